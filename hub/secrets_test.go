package hub_test

import (
	"encoding/json"
	"strings"
	"testing"

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
