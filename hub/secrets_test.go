package hub_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

const credsSchema = `{"type":"object","required":["username","password"],"properties":{
  "username":{"type":"string"},
  "password":{"type":"string","minLength":8,"x-cairn-secret":true}}}`

// TestSecretFields: a list shows a secret property as the marker, with
// values asked for by id or with Secrets in the clear; a failed write names
// the field, never the value; other Types' values are untouched.
func TestSecretFields(t *testing.T) {
	e := newEnv(t)
	creds := cairn.TypeRef{Path: "cap.type.database.postgresql.credentials", Revision: "0.1.0"}
	e.registerType(creds.Path, creds.Revision, credsSchema)
	e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
	const marker = "hub-secret-marker-77f1"
	id := e.create(hub.NewInstance{TypeRef: creds, Value: json.RawMessage(`{"username":"app","password":"` + marker + `"}`)})
	plain := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"host":"` + marker + `"}`)})

	list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{}, true)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, inst := range list {
		switch inst.ID {
		case id:
			seen++
			if got, want := string(inst.Latest.Value), `{"password":"`+hub.SecretMarker+`","username":"app"}`; got != want {
				t.Errorf("listed secret value = %s, want %s", got, want)
			}
		case plain:
			seen++
			if !strings.Contains(string(inst.Latest.Value), marker) {
				t.Errorf("a Type without secrets lost its value in the list: %s", inst.Latest.Value)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("listed %d of the 2 instances", seen)
	}
	all, _, err := e.h.ListInstancesWith(e.ctx, store.InstanceFilter{TypePath: creds.Path}, hub.ListOptions{Values: true, Secrets: true})
	if err != nil || len(all) != 1 || !strings.Contains(string(all[0].Latest.Value), marker) {
		t.Fatalf("list with Secrets = %v, %v", all, err)
	}
	// The cache (or store) keeps the value: a later get has it in the clear.
	if v := string(e.get(id).Latest.Value); !strings.Contains(v, marker) {
		t.Errorf("get by id = %s, want the password", v)
	}
	if ok, err := e.h.TypeHasSecrets(e.ctx, creds); err != nil || !ok {
		t.Errorf("TypeHasSecrets(creds) = %v, %v", ok, err)
	}
	if ok, err := e.h.TypeHasSecrets(e.ctx, cfgType); err != nil || ok {
		t.Errorf("TypeHasSecrets(config) = %v, %v", ok, err)
	}

	// An update breaking the schema names the field, not the value.
	short := "x" + marker[:5]
	_, err = e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: json.RawMessage(`{"username":"app","password":"` + short + `"}`)}})
	wantCode(t, err, cairn.CodeInvalid)
	if !strings.Contains(err.Error(), "spec/value/password") || strings.Contains(err.Error(), short) {
		t.Errorf("error %q: want the field named and the value absent", err)
	}
}

// TestSecretsAfterTypeChangesElsewhere: what a hub keeps of a Type's secret
// marks never shows a secret in the clear after the Type changed through
// another replica: a Type registered for instances that existed without it,
// and a Type deleted and registered again with secret marks.
func TestSecretsAfterTypeChangesElsewhere(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(cfg *hub.Config) { cfg.Now = c.now })
	other, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: e.opener, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	const marker = "elsewhere-secret-marker-5a1"
	listed := func(path string) string {
		t.Helper()
		list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: path}, true)
		if err != nil || len(list) != 1 {
			t.Fatalf("list %s: %d instances, %v", path, len(list), err)
		}
		return string(list[0].Latest.Value)
	}
	creds := func(path string) cairn.TypeRef { return cairn.TypeRef{Path: path, Revision: "0.1.0"} }
	value := json.RawMessage(`{"username":"app","password":"` + marker + `"}`)

	// Instances of a Type not registered yet, listed; then the Type is
	// registered elsewhere with a secret mark.
	unreg := creds("cap.type.later.credentials")
	e.create(hub.NewInstance{TypeRef: unreg, Value: value})
	c.add(time.Minute)
	if v := listed(unreg.Path); !strings.Contains(v, marker) {
		t.Fatalf("an unregistered Type's value was redacted: %s", v)
	}
	if _, err := other.CreateType(e.ctx, cairn.Type{Path: unreg.Path, Revision: unreg.Revision, JSONSchema: json.RawMessage(credsSchema)}); err != nil {
		t.Fatal(err)
	}
	c.add(time.Minute)
	if v := listed(unreg.Path); strings.Contains(v, marker) {
		t.Fatalf("after the Type was registered elsewhere, the list shows the secret: %s", v)
	}

	// A Type without marks, listed; deleted elsewhere with its instance,
	// registered again with a mark, and a new instance created.
	plain := creds("cap.type.again.credentials")
	if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: plain.Path, Revision: plain.Revision,
		JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	old := e.create(hub.NewInstance{TypeRef: plain, Value: value})
	c.add(time.Minute)
	if v := listed(plain.Path); !strings.Contains(v, marker) {
		t.Fatalf("a Type without marks was redacted: %s", v)
	}
	if err := other.DeleteInstance(e.ctx, old, ""); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteType(e.ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateType(e.ctx, cairn.Type{Path: plain.Path, Revision: plain.Revision, JSONSchema: json.RawMessage(credsSchema)}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: plain, Value: value}}}); err != nil {
		t.Fatal(err)
	}
	if v := listed(plain.Path); strings.Contains(v, marker) {
		t.Fatalf("after the Type was registered again elsewhere with a mark, the list shows the secret: %s", v)
	}
}

// TestSecretsInLastAppliedAnnotation: kubectl apply keeps the whole object
// it applied, secrets included, in the kubectl.kubernetes.io/last-applied-
// configuration annotation. Annotations are metadata, which encryption at
// rest and SOPS leave in plaintext, so the hub stores that object with the
// secret fields replaced by the marker (keeping the keys under them, all
// kubectl's three-way merge reads of it to delete fields): on create and
// on update, for every reader. An annotation it cannot read is replaced
// whole; other annotations are the user's.
func TestSecretsInLastAppliedAnnotation(t *testing.T) {
	const pw = "applied-secret-93c1"
	const key = "kubectl.kubernetes.io/last-applied-configuration"
	creds := cairn.TypeRef{Path: "cap.type.database.postgresql.credentials", Revision: "0.1.0"}
	whole := cairn.TypeRef{Path: "cap.type.test.whole.secret", Revision: "0.1.0"}
	for _, tc := range []struct {
		name       string
		ref        cairn.TypeRef
		annotation string
		want       string
	}{
		{"through the Type's kind", creds, `{"apiVersion":"database.cairn.dev/v1","kind":"PostgresCredentials","metadata":{"name":"a"},"spec":{"password":"` + pw + `","username":"a"}}` + "\n",
			`{"apiVersion":"database.cairn.dev/v1","kind":"PostgresCredentials","metadata":{"name":"a"},"spec":{"password":"` + hub.SecretMarker + `","username":"a"}}` + "\n"},
		{"through typeinstances", creds, `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","metadata":{"name":"a"},"spec":{"typeRef":{"path":"p"},"value":{"password":"` + pw + `","username":"a"}}}`,
			`{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","metadata":{"name":"a"},"spec":{"typeRef":{"path":"p"},"value":{"password":"` + hub.SecretMarker + `","username":"a"}}}`},
		{"a whole secret value keeps its keys", whole, `{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","spec":{"value":{"password":"` + pw + `","username":{"n":["` + pw + `"]}}}}`,
			`{"apiVersion":"hub.cairn.dev/v1","kind":"TypeInstance","spec":{"value":{"password":"` + hub.SecretMarker + `","username":{"n":"` + hub.SecretMarker + `"}}}}`},
		{"not JSON", creds, `password: ` + pw, hub.SecretMarker},
		{"without the secret", creds, `{"apiVersion":"database.cairn.dev/v1","kind":"PostgresCredentials","spec":{"username":"a"}}`,
			`{"apiVersion":"database.cairn.dev/v1","kind":"PostgresCredentials","spec":{"username":"a"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.registerType(creds.Path, creds.Revision, credsSchema)
			e.registerType(whole.Path, whole.Revision, `{"type":"object","x-cairn-secret":true}`)
			value := json.RawMessage(`{"username":"a","password":"` + pw + `"}`)
			id := e.create(hub.NewInstance{TypeRef: tc.ref, Annotations: map[string]string{key: tc.annotation, "team": pw}, Value: value})
			check := func(when string) {
				t.Helper()
				for _, values := range []bool{true, false} {
					list, _, err := e.h.ListInstancesWith(e.ctx, store.InstanceFilter{TypePath: tc.ref.Path}, hub.ListOptions{Values: values})
					if err != nil || len(list) != 1 {
						t.Fatalf("list: %v, %v", list, err)
					}
					if got := list[0].Annotations[key]; got != tc.want {
						t.Errorf("%s, values=%v: listed annotation\n%s\nwant\n%s", when, values, got, tc.want)
					}
					if got := list[0].Annotations["team"]; got != pw {
						t.Errorf("%s, values=%v: another annotation changed: %q", when, values, got)
					}
				}
				all, _, err := e.h.ListInstancesWith(e.ctx, store.InstanceFilter{TypePath: tc.ref.Path}, hub.ListOptions{Values: true, Secrets: true})
				if err != nil || all[0].Annotations[key] != tc.want {
					t.Errorf("%s: list with Secrets: annotation %q, %v", when, all[0].Annotations[key], err)
				}
				if got := e.get(id).Annotations[key]; got != tc.want {
					t.Errorf("%s: read by id: annotation %q", when, got)
				}
				stored, err := e.st.GetInstancesBrief(e.ctx, []string{id})
				if err != nil || len(stored) != 1 || stored[0].Annotations[key] != tc.want {
					t.Errorf("%s: the store holds the annotation %v, %v", when, stored, err)
				}
			}
			check("created")
			// An update giving the annotation again (kubectl apply's
			// patch does) stores it the same way.
			if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Value: value, Annotations: map[string]string{key: tc.annotation, "team": pw}}}); err != nil {
				t.Fatal(err)
			}
			check("updated")
		})
	}
}
