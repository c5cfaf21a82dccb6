package expr

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseRefs(t *testing.T) {
	tests := []struct {
		in      string
		refs    []string
		literal bool
	}{
		{"plain text", nil, true},
		{"", nil, true},
		{"${bundle.parameters.logLevel}", []string{"bundle.parameters.logLevel"}, false},
		{"${ bundle.credentials.kubeconfig }", []string{"bundle.credentials.kubeconfig"}, false},
		{"https://${bundle.dependencies.infra.outputs.ip}:${outputs.port}/myapp",
			[]string{"bundle.dependencies.infra.outputs.ip", "outputs.port"}, false},
		{"${a.b}-${a.b}", []string{"a.b"}, false},
		{"${ resources.Network.network.status.conditions[0].type }", []string{"resources.Network.network.status.conditions[0].type"}, false},
		{`${metadata.labels["app.kubernetes.io/name"]}`, []string{`metadata.labels["app.kubernetes.io/name"]`}, false},
		{"cost: $5 and $${not.a.ref}", nil, true},
		{"${ installation.root.ID }", []string{"installation.root.ID"}, false},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if got := tpl.Refs(); !reflect.DeepEqual(got, tt.refs) {
			t.Errorf("Parse(%q).Refs() = %q, want %q", tt.in, got, tt.refs)
		}
		if got := tpl.IsLiteral(); got != tt.literal {
			t.Errorf("Parse(%q).IsLiteral() = %v, want %v", tt.in, got, tt.literal)
		}
		if tpl.String() != tt.in {
			t.Errorf("String() = %q, want %q", tpl.String(), tt.in)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in   string
		pos  int
		want string
	}{
		{"abc ${a.b", 4, "unterminated ${"},
		{"${}", 0, "empty reference"},
		{"${   }", 0, "empty reference"},
		{"x ${a..b}", 6, "want a name"},
		{"${a.}", 4, "path ends after '.'"},
		{"${ a b }", 4, `unexpected ' '`},
		{"${.a}", 2, `unexpected '.'`},
		{"${a[0}", 3, "unterminated '['"},
		{"${a[]}", 3, "empty brackets"},
		{"${a[-1]}", 4, "negative index"},
		{"${a.[0]}", 4, `unexpected '['`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want an *Error", tt.in, err)
			continue
		}
		if pe.Pos != tt.pos || !strings.Contains(pe.Msg, tt.want) {
			t.Errorf("Parse(%q) = pos %d %q, want pos %d containing %q", tt.in, pe.Pos, pe.Msg, tt.pos, tt.want)
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("error %q does not name the offset", err)
		}
	}
}

func TestEval(t *testing.T) {
	root := map[string]any{
		"parameters": map[string]any{
			"region": "us-west1", "replicas": float64(3), "ratio": 0.25, "on": true, "none": nil,
			"big": float64(1e6), "tags": []any{"a", "b"}, "obj": map[string]any{"k": "v"},
			"count": int64(7),
		},
		"resources": map[string]any{
			"Network": map[string]any{"network": map[string]any{
				"metadata": map[string]any{"name": "bars-network", "labels": map[string]any{"app.kubernetes.io/name": "net"}},
				"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
			}},
		},
	}
	tests := []struct {
		tpl  string
		want any
	}{
		{"${parameters.region}", "us-west1"},
		{"${ parameters.replicas }", float64(3)},
		{"${parameters.on}", true},
		{"${parameters.none}", nil},
		{"${parameters.tags}", []any{"a", "b"}},
		{"${parameters.obj}", map[string]any{"k": "v"}},
		{"n=${parameters.replicas}", "n=3"},
		{"${parameters.ratio}/${parameters.on}/${parameters.none}/${parameters.big}/${parameters.count}", "0.25/true//1000000/7"},
		{"${parameters.tags} ${parameters.obj}", `["a","b"] {"k":"v"}`},
		{"${resources.Network.network.status.conditions[0].status}", "True"},
		{`${resources.Network.network.metadata.labels["app.kubernetes.io/name"]}`, "net"},
		{`${resources.Network.network.metadata.labels[app.kubernetes.io/name]}`, "net"},
		{"literal $${x}", "literal ${x}"},
		{"", ""},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.tpl)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.tpl, err)
		}
		got, err := tpl.Eval(Lookup(root))
		if err != nil {
			t.Fatalf("Eval(%q): %v", tt.tpl, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Eval(%q) = %#v, want %#v", tt.tpl, got, tt.want)
		}
	}
}

func TestEvalUnknownRef(t *testing.T) {
	for _, s := range []string{"${parameters.zone}", "at ${parameters.zone}!", "${resources.Network.network.status.conditions[3]}"} {
		_, err := MustParse(s).Eval(Lookup(map[string]any{"parameters": map[string]any{}}))
		if err == nil || !strings.Contains(err.Error(), "unknown reference") {
			t.Errorf("Eval(%q) error = %v, want unknown reference", s, err)
		}
		if err != nil && !strings.Contains(err.Error(), MustParse(s).Refs()[0]) {
			t.Errorf("Eval(%q) error %q does not name the reference", s, err)
		}
	}
}

func TestGet(t *testing.T) {
	root := map[string]any{"a": []any{map[string]any{"b": "x"}}, "m": map[string]string{"k": "v"}}
	if v, ok := Get(root, "a[0].b"); !ok || v != "x" {
		t.Errorf("Get a[0].b = %v %v", v, ok)
	}
	if v, ok := Get(root, "m.k"); !ok || v != "v" {
		t.Errorf("Get m.k = %v %v", v, ok)
	}
	for _, p := range []string{"a[1]", "a.b", "m.z", "a[0].b.c", "bad..path"} {
		if v, ok := Get(root, p); ok {
			t.Errorf("Get(%q) = %v, want not found", p, v)
		}
	}
}

// FuzzParse: Parse never panics, and a template it accepts evaluates with
// every reference known, its Refs each parse as a path.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"${a.b}", "x ${ a[0].b } y", "$${x}", "${", "${a.}", `${m["k.x"]}`, "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := Parse(s)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos < 0 || pe.Pos > len(s) {
				t.Fatalf("Parse(%q) error %v has no valid position", s, err)
			}
			return
		}
		for _, r := range tpl.Refs() {
			if _, err := ParsePath(r); err != nil {
				t.Fatalf("Parse(%q) ref %q does not parse: %v", s, r, err)
			}
		}
		if _, err := tpl.Eval(func(string) (any, bool) { return "v", true }); err != nil {
			t.Fatalf("Eval(%q): %v", s, err)
		}
		if tpl.IsLiteral() != (len(tpl.Refs()) == 0) {
			t.Fatalf("IsLiteral(%q) disagrees with Refs", s)
		}
	})
}
