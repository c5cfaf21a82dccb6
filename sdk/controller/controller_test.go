package controller_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/sdk/controller"
)

// recorder answers from fixed values and records what Run passed it.
type recorder struct {
	calls []string
	kind  controller.Kind
	got   any
	err   error
}

func (r *recorder) Get(_ *os.Root, kind controller.Kind, ns, name string) (json.RawMessage, error) {
	r.calls, r.kind, r.got = append(r.calls, "get"), kind, []string{ns, name}
	if r.err != nil {
		return nil, r.err
	}
	return json.RawMessage(`{"metadata":{"name":"` + name + `"}}`), nil
}

func (r *recorder) List(_ *os.Root, kind controller.Kind, ns string, labels map[string]string) ([]json.RawMessage, error) {
	r.calls, r.kind, r.got = append(r.calls, "list"), kind, labels
	return nil, r.err
}

func (r *recorder) Put(_ *os.Root, kind controller.Kind, res controller.Resource) error {
	r.calls, r.kind, r.got = append(r.calls, "put"), kind, res.Metadata
	if res.Metadata.Name == "boom" {
		panic("boom")
	}
	return r.err
}

func (r *recorder) Delete(_ *os.Root, kind controller.Kind, ns, name string) error {
	r.calls, r.kind, r.got = append(r.calls, "delete"), kind, []string{ns, name}
	return r.err
}

func TestRun(t *testing.T) {
	env := map[string]string{controller.EnvGroup: "example.com", controller.EnvVersion: "v1"}
	for _, tc := range []struct {
		name     string
		args     []string
		stdin    string
		err      error
		wantCode int
		wantOut  string // exact stdout, trimmed
		wantCall string // the method called, "" for none
	}{
		{name: "get", args: []string{"get", "Widget", "ns", "a"}, wantOut: `{"metadata":{"name":"a"}}`, wantCall: "get"},
		{name: "get not found", args: []string{"get", "Widget", "ns", "a"}, err: controller.NotFound("no a"), wantCode: 2, wantOut: `{"message":"no a","code":"NotFound"}`, wantCall: "get"},
		{name: "get wrapped not found", args: []string{"get", "Widget", "ns", "a"}, err: errors.Join(controller.NotFound("no a")), wantCode: 2, wantCall: "get"},
		{name: "get error", args: []string{"get", "Widget", "ns", "a"}, err: errors.New("disk on fire"), wantCode: 1, wantOut: `{"message":"disk on fire"}`, wantCall: "get"},
		{name: "get missing name", args: []string{"get", "Widget", "ns"}, wantCode: 1},
		{name: "list empty is []", args: []string{"list", "Widget", "ns", "a=1", "b=x=y"}, wantOut: `[]`, wantCall: "list"},
		{name: "list bad label", args: []string{"list", "Widget", "ns", "nolabel"}, wantCode: 1, wantOut: `{"message":"label \"nolabel\" is not key=value","code":"Invalid"}`},
		{name: "put", args: []string{"put", "Widget"}, stdin: `{"metadata":{"namespace":"ns","name":"a","labels":{"k":"v"}}}`, wantOut: `{}`, wantCall: "put"},
		// cup's runtime (and cairn's) pass the resource's namespace and
		// name after the kind; they must be the resource's.
		{name: "put with namespace and name", args: []string{"put", "Widget", "ns", "a"}, stdin: `{"metadata":{"namespace":"ns","name":"a"}}`, wantOut: `{}`, wantCall: "put"},
		{name: "put with another name", args: []string{"put", "Widget", "ns", "b"}, stdin: `{"metadata":{"namespace":"ns","name":"a"}}`, wantCode: 1,
			wantOut: `{"message":"put of ns/b, but the resource on stdin is ns/a","code":"Invalid"}`},
		{name: "put with another namespace", args: []string{"put", "Widget", "other", "a"}, stdin: `{"metadata":{"namespace":"ns","name":"a"}}`, wantCode: 1},
		{name: "put with a namespace alone", args: []string{"put", "Widget", "ns"}, stdin: `{"metadata":{"namespace":"ns","name":"a"}}`, wantCode: 1},
		{name: "put invalid JSON", args: []string{"put", "Widget"}, stdin: `{`, wantCode: 1},
		{name: "put without name", args: []string{"put", "Widget"}, stdin: `{"metadata":{}}`, wantCode: 1, wantOut: `{"message":"resource has no metadata.name","code":"Invalid"}`},
		{name: "put panics", args: []string{"put", "Widget"}, stdin: `{"metadata":{"name":"boom"}}`, wantCode: 1, wantOut: `{"message":"controller panicked: boom"}`, wantCall: "put"},
		{name: "delete", args: []string{"delete", "Widget", "ns", "a"}, wantOut: `{}`, wantCall: "delete"},
		{name: "unknown op", args: []string{"patch", "Widget"}, wantCode: 1},
		{name: "no args", args: nil, wantCode: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			impl := &recorder{err: tc.err}
			var out bytes.Buffer
			code := controller.Run(impl, nil, append([]string{"ctl"}, tc.args...), func(k string) string { return env[k] }, strings.NewReader(tc.stdin), &out)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stdout %s)", code, tc.wantCode, out.String())
			}
			if !json.Valid(out.Bytes()) {
				t.Errorf("stdout is not JSON: %q", out.String())
			}
			if tc.wantOut != "" && strings.TrimSpace(out.String()) != tc.wantOut {
				t.Errorf("stdout %s, want %s", strings.TrimSpace(out.String()), tc.wantOut)
			}
			if tc.wantCode != 0 {
				var msg struct{ Message string }
				if json.Unmarshal(out.Bytes(), &msg) != nil || msg.Message == "" {
					t.Errorf("a failure without a message: %s", out.String())
				}
			}
			if got := strings.Join(impl.calls, ","); got != tc.wantCall {
				t.Errorf("called %q, want %q", got, tc.wantCall)
			}
			if tc.wantCall != "" && impl.kind != (controller.Kind{Group: "example.com", Version: "v1", Kind: "Widget"}) {
				t.Errorf("kind %+v", impl.kind)
			}
		})
	}
}

func TestRunPassesArguments(t *testing.T) {
	impl := &recorder{}
	var out bytes.Buffer
	controller.Run(impl, nil, []string{"ctl", "list", "Widget", "", "a=1", "b=x=y"}, os.Getenv, nil, &out)
	labels, _ := impl.got.(map[string]string)
	if len(labels) != 2 || labels["a"] != "1" || labels["b"] != "x=y" {
		t.Fatalf("labels %v", impl.got)
	}
	controller.Run(impl, nil, []string{"ctl", "put", "Widget"}, os.Getenv, strings.NewReader(`{"metadata":{"namespace":"ns","name":"a","labels":{"k":"v"}}}`), &out)
	md, _ := impl.got.(controller.Metadata)
	if md.Namespace != "ns" || md.Name != "a" || md.Labels["k"] != "v" {
		t.Fatalf("metadata %+v", impl.got)
	}
}

func TestMatchLabels(t *testing.T) {
	have := map[string]string{"a": "1", "b": "2"}
	for _, tc := range []struct {
		want map[string]string
		ok   bool
	}{
		{nil, true},
		{map[string]string{"a": "1"}, true},
		{map[string]string{"a": "1", "b": "2"}, true},
		{map[string]string{"a": "2"}, false},
		{map[string]string{"c": ""}, false},
	} {
		if got := controller.MatchLabels(have, tc.want); got != tc.ok {
			t.Errorf("MatchLabels(%v, %v) = %v", have, tc.want, got)
		}
	}
}
