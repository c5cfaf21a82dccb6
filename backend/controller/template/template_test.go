package template_test

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
	"github.com/cairn-dev/cairn/backend/controller/template"
)

// TestPathTemplates renders the path templates a cup Controller's
// path_template would hold, cup's own function (replace) included, so a
// cup configuration moves over unchanged.
func TestPathTemplates(t *testing.T) {
	flag := controller.Kind{Group: "flipt.io", Version: "v1alpha1", Kind: "Flag"}
	for _, tt := range []struct {
		name, resource, want string
	}{
		{"cup's default", "", "default/flipt.io-v1alpha1-Flag-new-project.json"},
		{"cup's replace", `{{ .Namespace }}/{{ replace .Group "." "-" }}/{{ .Name }}.json`, "default/flipt-io/new-project.json"},
		{"labels", `{{ .Labels.team }}/{{ .Name }}.yaml`, "moonshots/new-project.yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := template.New(template.Paths{Resource: tt.resource})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got, err := c.Path(flag, "default", "new-project", map[string]string{"team": "moonshots"})
			if err != nil || got != tt.want {
				t.Errorf("Path = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestBadPathTemplates: a template that cannot work is refused when the
// controller is made, naming the field, not at the first write.
func TestBadPathTemplates(t *testing.T) {
	for _, tt := range []struct {
		paths template.Paths
		want  string
	}{
		{template.Paths{Resource: `{{ .Namespace }`}, "paths.resource"},
		{template.Paths{Resource: `{{ lower .Name }}.json`}, `paths.resource: template: resource:1: function "lower" not defined`},
		{template.Paths{List: `{{ .Namespace }/*.json`}, "paths.list"},
		// Parse, but fail on every resource.
		{template.Paths{Resource: `{{ .Nme }}.json`}, `paths.resource: path template: template: resource:1:3: executing "resource" at <.Nme>: can't evaluate field Nme`},
		{template.Paths{Resource: `../{{ .Name }}.json`}, `paths.resource: path template: "../sample.json" is not a path inside the repository`},
		{template.Paths{List: `.git/{{ .Namespace }}/*.json`}, `paths.list: path template: ".git/default/*.json" is not a path inside the repository`},
	} {
		_, err := template.New(tt.paths)
		if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want Invalid with %q", tt.paths, err, tt.want)
		}
	}
}

// A file that does not parse is named once, with where in it.
func TestDecodeErrorsSayWhere(t *testing.T) {
	for _, tt := range []struct {
		name, data, want string
	}{
		{"a.json", "{\"kind\": \"Flag\",\n  nope\n}", "a.json: line 2, column 3: invalid character 'n' looking for beginning of object key string"},
		{"a.json", "{\"kind\": \"Flag\"", "a.json: line 1, column 15: unexpected end of JSON input"},
		{"a.json", "{}\n{}", "a.json: line 2, column 1: invalid character '{' after top-level value"},
		{"a.yaml", "kind: Flag\nspec: [\n", "a.yaml: yaml: line 2: "},
	} {
		_, err := template.Decode(tt.name, []byte(tt.data))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || strings.Count(err.Error(), tt.name) != 1 {
			t.Errorf("Decode(%s, %q) = %v; want %q...", tt.name, tt.data, err, tt.want)
		}
	}
}
