package terraform_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/terraform"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/hub"
)

// tofuRBAC grants user ci the states of namespace team-a, by path.
const tofuRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: tofu-team-a}
rules:
  - nonResourceURLs: ["/terraform/v1/namespaces/team-a/*"]
    verbs: [get, post, lock, unlock]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ci-runs-tofu}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: tofu-team-a}
subjects: [{kind: User, name: ci}]`

// The real tofu through the access guard, as cairn serve runs it with
// --token-auth-file and --rbac-file: the token is the basic-auth password
// (TF_HTTP_PASSWORD), the user name is not trusted, RBAC grants the
// protocol's paths.
func TestTofuWithTokens(t *testing.T) {
	ctx := context.Background()
	var pol rbac.Policy
	for doc := range strings.SplitSeq(tofuRBAC, "\n---\n") {
		if err := pol.Parse([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := hub.New(ctx, hub.Config{Store: sqliteStore(t), RBAC: pol})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterTerraformTypes(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tokens, err := authn.ParseTokenFile(strings.NewReader("ci-token,ci,1\nvic-token,vic,2\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := access.New(access.Config{Authn: &authn.Chain{Tokens: []authn.TokenAuthenticator{tokens}}, Authz: h})
	mux := http.NewServeMux()
	g.Handle(mux)
	mux.Handle(terraform.Prefix, terraform.New(terraform.Config{Hub: h, Logger: slog.New(slog.DiscardHandler)}))
	srv := httptest.NewServer(g.Wrap(mux))
	t.Cleanup(srv.Close)

	url := stateURL(srv.URL, "team-a", "app")
	w := newWorkdirEnv(t, url, []string{"TF_HTTP_PASSWORD=ci-token"})
	w.apply("one")
	hist, err := h.TerraformStateHistory(ctxT(t), "team-a", "app")
	if err != nil || len(hist) != 1 || hist[0].CreatedBy != "ci" {
		// The block's username (ci-runner) is not who wrote it.
		t.Errorf("history = %+v, %v; want one version created by the token's user ci", hist, err)
	}
	for _, tt := range []struct {
		name, url, password string
	}{
		{"a user without the grant", url, "vic-token"},
		{"a state of another namespace", stateURL(srv.URL, "team-b", "app"), "ci-token"},
		{"no token", url, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &workdir{t: t, tofu: tofuBinary(t), dir: t.TempDir(), env: []string{"TF_HTTP_PASSWORD=" + tt.password}}
			writeConfig(t, w.dir, tt.url)
			out, err := w.run("init", "-input=false", "-no-color")
			if err == nil {
				out, err = w.run("apply", "-auto-approve", "-input=false", "-no-color")
			}
			if err == nil || !strings.Contains(out, "HTTP remote state endpoint") {
				t.Errorf("tofu was let in (or failed for another reason): %v\n%s", err, out)
			}
		})
	}
	if hist, _ := h.TerraformStateHistory(ctxT(t), "team-a", "app"); len(hist) != 1 {
		t.Errorf("a refused run wrote the state: %d versions", len(hist))
	}
}

func writeConfig(t *testing.T, dir, url string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(config, url, url, url)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newWorkdirEnv(t *testing.T, url string, env []string) *workdir {
	t.Helper()
	w := &workdir{t: t, tofu: tofuBinary(t), dir: t.TempDir(), env: env}
	writeConfig(t, w.dir, url)
	w.must("init", "-input=false", "-no-color")
	return w
}
