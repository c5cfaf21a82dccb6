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

// TestKubectlApplyOfASecretAgain: kubectl apply sends the applied object,
// secrets included, in its last-applied annotation, which the hub stores
// with the secrets redacted (annotations are not encrypted at rest). The
// next kubectl apply of the same object patches that annotation again:
// nothing changed, so no new resource version, through the Type's kind as
// through typeinstances; and no write stores the secret in an annotation.
func TestKubectlApplyOfASecretAgain(t *testing.T) {
	const clear = "open-sesame-5678"
	e := newRestEnv(t)
	if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: "org.example.vault", Revision: "0.1.0",
		JSONSchema: []byte(`{"type":"object","properties":{"user":{"type":"string"},"password":{"type":"string","x-cairn-secret":true}}}`),
		Group:      "example.org", Version: "v1", Names: &cairn.Names{Kind: "Vault", Plural: "vaults"}}); err != nil {
		t.Fatal(err)
	}
	applied := `{"apiVersion":"example.org/v1","kind":"Vault","metadata":{"name":"v1","namespace":"default"},"spec":{"password":"` + clear + `","user":"u"}}` + "\n"
	annotations := map[string]any{"metadata": map[string]any{"annotations": map[string]string{hub.LastAppliedAnnotation: applied}}}
	created := e.mustDo("POST", "/apis/example.org/v1/namespaces/default/vaults", "application/json", map[string]any{
		"apiVersion": "example.org/v1", "kind": "Vault", "metadata": map[string]any{"name": "v1", "annotations": map[string]string{hub.LastAppliedAnnotation: applied}},
		"spec": map[string]string{"user": "u", "password": clear}}, http.StatusCreated)
	var o struct {
		Metadata struct {
			UID             string
			ResourceVersion string
			Annotations     map[string]string
		}
	}
	if err := json.Unmarshal(created.body, &o); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/apis/example.org/v1/namespaces/default/vaults/v1", "/apis/hub.cairn.dev/v1/typeinstances/" + o.Metadata.UID} {
		before, err := e.h.GetInstance(e.ctx, o.Metadata.UID, true)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(path, "/apis/hub.cairn.dev/") {
			// typeinstances are replaced (PUT) whole: the object read, with
			// the annotation as kubectl would send it.
			var cur map[string]any
			if err := json.Unmarshal(e.mustDo("GET", path, "", nil, http.StatusOK).body, &cur); err != nil {
				t.Fatal(err)
			}
			cur["metadata"].(map[string]any)["annotations"] = map[string]string{hub.LastAppliedAnnotation: applied}
			e.mustDo("PUT", path, "application/json", cur, http.StatusOK)
		} else {
			e.mustDo("PATCH", path, "application/merge-patch+json", annotations, http.StatusOK)
		}
		after, err := e.h.GetInstance(e.ctx, o.Metadata.UID, true)
		if err != nil {
			t.Fatal(err)
		}
		if after.Latest.ResourceVersion != before.Latest.ResourceVersion || after.Seq != before.Seq {
			t.Errorf("write to %s of the same last-applied object: resource version %d -> %d, seq %d -> %d, want no change",
				path, before.Latest.ResourceVersion, after.Latest.ResourceVersion, before.Seq, after.Seq)
		}
		if strings.Contains(after.Annotations[hub.LastAppliedAnnotation], clear) || !strings.Contains(after.Annotations[hub.LastAppliedAnnotation], hub.SecretMarker) {
			t.Errorf("after a write to %s the stored annotation is %q", path, after.Annotations[hub.LastAppliedAnnotation])
		}
	}
}
