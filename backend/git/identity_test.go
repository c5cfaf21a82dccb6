package git_test

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
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// TestCommitIdentity: behind the access guard, a commit made for an
// impersonated request names both identities, the impersonated user as
// Cairn-Actor and the authenticated one as Cairn-Impersonator; a request
// made as oneself has no Cairn-Impersonator. Single and batch commits alike,
// checked with the real git.
func TestCommitIdentity(t *testing.T) {
	r := gittest.NewRemote(t)
	url := r.Serve(t)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var pol rbac.Policy
	if err := pol.Parse([]byte(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "jane-edits"},
		"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cairn-editor"},
		"subjects": [{"kind": "User", "name": "jane"}]}`)); err != nil {
		t.Fatal(err)
	}
	h, err := hub.New(ctx, hub.Config{Store: st, RBAC: pol, Backends: git.NewOpener(git.OpenerConfig{CacheDir: t.TempDir()})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.CreateType(ctx, cairn.Type{Path: "io.flipt.flag", Revision: "1.0.0", Group: "flipt.io", Version: "v1",
		Names:      &cairn.Names{Kind: "Flag", Singular: "flag", Plural: "flags"},
		JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	value, _ := json.Marshal(map[string]any{"url": url, "acceptValue": true, "contextSchema": json.RawMessage(git.ContextSchema), "branch": "main"})
	reg, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Namespace: hub.SystemNamespace,
		TypeRef: cairn.TypeRef{Path: git.TypePath, Revision: cairn.CoreRevision}, Value: value,
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "io.flipt.flag"}, Backend: policy.BackendRef{ID: reg[0].ID}}}}}); err != nil {
		t.Fatal(err)
	}
	tokens, err := authn.ParseTokenFile(strings.NewReader("admin-token,ada,1,\"cairn:admins\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	guard := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tokens}}, Authz: h})
	srv := httptest.NewServer(guard.Wrap(rest.New(rest.Config{Hub: h})))
	t.Cleanup(srv.Close)

	create := func(name string, hdr ...string) {
		t.Helper()
		body := `{"apiVersion":"flipt.io/v1","kind":"Flag","metadata":{"name":"` + name + `"},"spec":{}}`
		req, _ := http.NewRequest("POST", srv.URL+"/apis/flipt.io/v1/namespaces/default/flags", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer admin-token")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("create %s: %d %s", name, resp.StatusCode, b)
		}
	}
	trailer := func(key string) string {
		return gittest.Git(t, r.Path, "log", "-1", "--format=%(trailers:key="+key+",valueonly)", "main")
	}
	subject := func() string { return gittest.Git(t, r.Path, "log", "-1", "--format=%s", "main") }

	create("as-jane", "Impersonate-User", "jane")
	if got := trailer("Cairn-Actor"); got != "jane" {
		t.Errorf("Cairn-Actor of the impersonated create = %q, want jane", got)
	}
	if got := trailer("Cairn-Impersonator"); got != "ada" {
		t.Errorf("Cairn-Impersonator of the impersonated create = %q, want ada", got)
	}
	if got := subject(); !strings.HasSuffix(got, "by jane (impersonated by ada)") {
		t.Errorf("subject = %q", got)
	}

	create("as-ada")
	if got := trailer("Cairn-Actor"); got != "ada" {
		t.Errorf("Cairn-Actor = %q, want ada", got)
	}
	if got := trailer("Cairn-Impersonator"); got != "" {
		t.Errorf("a request made as oneself has Cairn-Impersonator %q", got)
	}

	// A batch (one commit for several instances) records both as well.
	asJane := cairn.WithUser(ctx, cairn.User{Name: "jane", Impersonator: "ada"})
	if _, err := h.CreateInstances(asJane, hub.CreateRequest{Instances: []hub.NewInstance{
		{Namespace: "default", Name: "b1", TypeRef: cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}, Value: json.RawMessage(`{}`)},
		{Namespace: "default", Name: "b2", TypeRef: cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"}, Value: json.RawMessage(`{}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if got, imp := trailer("Cairn-Actor"), trailer("Cairn-Impersonator"); got != "jane" || imp != "ada" {
		t.Errorf("batch commit: Cairn-Actor %q, Cairn-Impersonator %q; want jane and ada (%s)", got, imp, subject())
	}
	// A controller acting as itself on such a context drops the impersonator.
	if imp := cairn.Impersonator(cairn.WithActor(asJane, "stack-controller")); imp != "" {
		t.Errorf("WithActor kept the impersonator %q", imp)
	}
}

// TestGroupCommitIdentity: writers queued into one group commit each keep
// their identities: the impersonated one's line and trailers name both
// users, the other's only itself.
func TestGroupCommitIdentity(t *testing.T) {
	r := gittest.NewRemote(t)
	url, arm, arrived, release := serveGated(t, r)
	b := groupBackend(t, url)
	ctx := t.Context()
	create(t, ctx, b, "seed", "seed", `{}`)

	arm()
	first := make(chan error, 1)
	go func() {
		_, err := b.OnCreate(cairn.WithResourceMeta(cairn.WithActor(ctx, "w0"), flagMeta("first", nil)), cairn.OnCreateRequest{InstanceID: "first", Value: json.RawMessage(`{}`)})
		first <- err
	}()
	<-arrived
	writers := map[string]context.Context{
		"as-jane": cairn.WithUser(ctx, cairn.User{Name: "jane", Impersonator: "ada"}),
		"as-bob":  cairn.WithUser(ctx, cairn.User{Name: "bob"}),
	}
	errs := make(chan error, len(writers))
	for name, wctx := range writers {
		go func() {
			_, err := b.OnCreate(cairn.WithResourceMeta(wctx, flagMeta(name, nil)), cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(`{}`)})
			errs <- err
		}()
	}
	waitQueued(t, b, len(writers))
	release()
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	msg := gittest.Git(t, r.Path, "log", "-1", "--format=%B", "main") + "\n" // gitCmd trims
	for _, want := range []string{
		"production/as-jane (resource version 1) by jane (impersonated by ada)\n",
		"production/as-bob (resource version 1) by bob\n",
		"Cairn-Actor: jane\n", "Cairn-Actor: bob\n", "Cairn-Impersonator: ada\n",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the group commit lacks %q:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "Cairn-Impersonator:") != 1 {
		t.Errorf("the group commit names impersonators other than ada:\n%s", msg)
	}
}
