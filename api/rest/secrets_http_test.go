package rest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// An object whose Type marks a secret is read whole by name and with the
// secret redacted in a list, whatever came first: the kept encodings of
// objects are shared by reads and lists, and once held a read's clear
// value (served to every list after it, so to list-only users) or a list's
// marker (served to the next read by name, which a client writes back).
// kubectl apply's annotation, which holds the applied object, is redacted
// in lists as the value is.
func TestSecretsOfKindReadsAndListsInAnyOrder(t *testing.T) {
	const (
		obj     = "/apis/example.org/v1/namespaces/default/vaults/v1"
		list    = "/apis/example.org/v1/namespaces/default/vaults"
		listAll = "/apis/example.org/v1/vaults"
		clear   = "open-sesame-1234"
	)
	for _, tc := range []struct {
		name  string
		steps []string // paths read in order; each is checked
	}{
		{"read then list", []string{obj, list, listAll}},
		{"list then read", []string{list, obj, list}},
		{"list with values then list", []string{list + "?values=true", list, obj}},
		{"read twice then list twice", []string{obj, obj, list, list, listAll + "?values=true", obj}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRestEnv(t)
			ctx, h := e.ctx, e.h
			typ, err := h.CreateType(ctx, cairn.Type{Path: "org.example.vault", Revision: "0.1.0",
				JSONSchema: []byte(`{"type":"object","properties":{"user":{"type":"string"},"password":{"type":"string","x-cairn-secret":true}}}`),
				Group:      "example.org", Version: "v1", Names: &cairn.Names{Kind: "Vault", Plural: "vaults"}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "v1", Name: "v1", Namespace: "default",
				TypeRef: typ.Ref(), Value: json.RawMessage(`{"user":"u","password":"` + clear + `"}`),
				Annotations: map[string]string{hub.LastAppliedAnnotation: `{"apiVersion":"example.org/v1","kind":"Vault","spec":{"password":"` + clear + `","user":"u"}}`}}}}); err != nil {
				t.Fatal(err)
			}
			for i, path := range tc.steps {
				body := e.mustDo("GET", path, "", nil, http.StatusOK).body
				var one struct {
					Spec  struct{ Password string }
					Items []struct{ Spec struct{ Password string } }
				}
				if err := json.Unmarshal(body, &one); err != nil {
					t.Fatal(err)
				}
				got, want := one.Spec.Password, clear
				if path != obj {
					if len(one.Items) != 1 {
						t.Fatalf("step %d, GET %s: %d items: %s", i, path, len(one.Items), body)
					}
					got = one.Items[0].Spec.Password
					if !strings.Contains(path, "values=true") {
						want = hub.SecretMarker
						if strings.Contains(string(body), clear) { // kubectl's last-applied annotation
							t.Errorf("step %d, GET %s: the password is in the list: %s", i, path, body)
						}
					}
				}
				if got != want {
					t.Errorf("step %d, GET %s: password %q, want %q", i, path, got, want)
				}
			}
		})
	}
}
