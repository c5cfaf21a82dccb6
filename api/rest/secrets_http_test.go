package rest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
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
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			h, err := hub.New(ctx, hub.Config{Store: st})
			if err != nil {
				t.Fatal(err)
			}
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
			srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
			t.Cleanup(srv.Close)
			for i, path := range tc.steps {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("step %d, GET %s: %d %s", i, path, resp.StatusCode, body)
				}
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
					if !hasQuery(path, "values=true") {
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

func hasQuery(path, q string) bool { return strings.Contains(path, q) }
