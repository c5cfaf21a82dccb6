package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn/auth/peer"
	"github.com/cairn-dev/cairn/internal/cli"
)

// TestServeSecureCLI: a server with an authenticator configured refuses
// the anonymous CLI, and accepts it with the data directory's generated
// kubeconfig, with --kubeconfig and after cairn login --token.
func TestServeSecureCLI(t *testing.T) {
	data, other := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte("vic-token,vic,1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CAIRN_DATA_DIR": data, "CAIRN_CONFIG": cfg}
	url := startServeSecure(t, vars, "--token-auth-file", tokens)
	for _, f := range []string{"admin.token", "kubeconfig", "tls/serving.key"} {
		st, err := os.Stat(filepath.Join(data, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", f, st, err)
		}
	}
	otherVars := map[string]string{"CAIRN_DATA_DIR": other, "CAIRN_CONFIG": cfg}
	if r := runVars(t, otherVars, "--server", url, "get", "typeinstances"); r.code != cli.ExitForbidden || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("anonymous CLI: %+v", r)
	}
	// The same data directory: the kubeconfig serve wrote is used.
	if r := runVars(t, vars, "--server", url, "apply", "-f", "../../examples/flags/flags.json", "-f", "../../examples/flags/new-project.yaml"); r.code != 0 {
		t.Fatalf("apply with the data directory's credentials: %+v", r)
	}
	if r := runVars(t, otherVars, "--kubeconfig", filepath.Join(data, "kubeconfig"), "get", "flags", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"createdBy": "admin"`) {
		t.Fatalf("--kubeconfig: %+v", r)
	}
	tok, _ := os.ReadFile(filepath.Join(data, "admin.token"))
	if r := runVars(t, otherVars, "login", "--server", url, "--token", "bad token"); r.code == 0 {
		t.Fatalf("login took a token with a space: %+v", r)
	}
	if r := runVars(t, otherVars, "login", "--server", url, "--token", strings.TrimSpace(string(tok))); r.code != 0 {
		t.Fatalf("login: %+v", r)
	}
	if st, err := os.Stat(cfg); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config after login: %v %v", st, err)
	}
	if r := runVars(t, otherVars, "get", "flags"); r.code != 0 || !strings.Contains(r.stdout, "new-project") {
		t.Fatalf("after login: %+v", r)
	}
	// --as needs the impersonate verb; the admin has it, and the record is the impersonated user's.
	if r := runVars(t, otherVars, "--as", "jane", "get", "flags"); r.code == 0 {
		t.Fatalf("jane (impersonated, without rights) listed flags: %+v", r)
	}
}

// TestServeRBACFile: users of --token-auth-file get what --rbac-file binds.
func TestServeRBACFile(t *testing.T) {
	dir := t.TempDir()
	tokens, rbacFile := filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "rbac.yaml")
	os.WriteFile(tokens, []byte("vic-token,vic,1\ned-token,ed,2\n"), 0o600)
	os.WriteFile(rbacFile, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vic-views}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-viewer}
subjects: [{kind: User, name: vic}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ed-edits, namespace: a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cairn-editor}
subjects: [{kind: User, name: ed}]
`), 0o600)
	data := t.TempDir()
	vars := map[string]string{"CAIRN_DATA_DIR": data, "CAIRN_CONFIG": filepath.Join(dir, "config.yaml")}
	url := startServeSecure(t, vars, "--token-auth-file", tokens, "--rbac-file", rbacFile)
	if r := runVars(t, vars, "--server", url, "apply", "-f", "../../examples/flags/flags.json"); r.code != 0 {
		t.Fatalf("admin apply: %+v", r)
	}
	flag := func(ns string) string {
		p := filepath.Join(dir, ns+".yaml")
		os.WriteFile(p, []byte("apiVersion: flipt.io/v1alpha1\nkind: Flag\nmetadata: {name: f, namespace: "+ns+"}\nspec: {enabled: true}\n"), 0o600)
		return p
	}
	as := func(user string) map[string]string {
		v := map[string]string{"CAIRN_DATA_DIR": t.TempDir(), "CAIRN_CONFIG": filepath.Join(t.TempDir(), "c.yaml")}
		if r := runVars(t, v, "login", "--server", url, "--token", user+"-token"); r.code != 0 {
			t.Fatalf("login %s: %+v", user, r)
		}
		return v
	}
	vic, ed := as("vic"), as("ed")
	for _, tc := range []struct {
		who  map[string]string
		name string
		args []string
		ok   bool
	}{
		{ed, "editor creates in a", []string{"apply", "-f", flag("a")}, true},
		{ed, "editor creates in b", []string{"apply", "-f", flag("b")}, false},
		{vic, "viewer lists", []string{"get", "flags", "-A"}, true},
		{vic, "viewer creates", []string{"apply", "-f", flag("c")}, false},
	} {
		r := runVars(t, tc.who, tc.args...)
		if (r.code == 0) != tc.ok {
			t.Errorf("%s: %+v", tc.name, r)
		}
		if !tc.ok && !strings.Contains(r.stderr, "forbidden") {
			t.Errorf("%s: no reason: %s", tc.name, r.stderr)
		}
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r}\n"), 0o600)
	if r := runVars(t, vars, "serve", "--addr", "127.0.0.1:0", "--rbac-file", bad); r.code == 0 || !strings.Contains(r.stderr, "metadata.namespace is required") {
		t.Errorf("a bad --rbac-file: %+v", r)
	}
}

// TestServeLoopbackDefault: with nothing about access configured, a
// loopback server serves callers without credentials as before the guard
// (as cairn-admin), while credentials that are presented are still checked.
func TestServeLoopbackDefault(t *testing.T) {
	data, other := t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	vars := map[string]string{"CAIRN_DATA_DIR": data, "CAIRN_CONFIG": cfg}
	url := startServeSecure(t, vars)
	tok, err := os.ReadFile(filepath.Join(data, "admin.token"))
	if err != nil {
		t.Fatalf("admin token not written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "kubeconfig")); err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}
	list := url + "/apis/hub.cairn.dev/v1/typeinstances"
	for _, c := range []struct {
		name, token string
		want        int
	}{
		{"anonymous", "", http.StatusOK},
		{"admin token", strings.TrimSpace(string(tok)), http.StatusOK},
		{"bogus token", "not-a-token", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodGet, list, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: GET typeinstances answered %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	otherVars := map[string]string{"CAIRN_DATA_DIR": other, "CAIRN_CONFIG": cfg}
	if r := runVars(t, otherVars, "--server", url, "apply", "-f", "../../examples/flags/flags.json", "-f", "../../examples/flags/new-project.yaml"); r.code != 0 {
		t.Fatalf("anonymous CLI apply: %+v", r)
	}
	if r := runVars(t, otherVars, "--server", url, "get", "flags"); r.code != 0 || !strings.Contains(r.stdout, "new-project") {
		t.Fatalf("anonymous CLI get: %+v", r)
	}
	// The caller without credentials is the OS user this test runs as
	// (peer authentication), recorded as such.
	if me, err := user.Current(); err == nil && peer.Supported() {
		resp, err := http.Get(url + "/apis/flipt.io/v1alpha1/flags")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `"createdBy":"`+me.Username+`"`) {
			t.Errorf("createdBy of a flag applied without credentials is not %s: %.300s", me.Username, body)
		}
	}
	// With nothing configured, a name the admin acts as is recorded and
	// keeps the admin's rights: the only authenticated callers are admins.
	if r := runVars(t, vars, "--server", url, "--as", "jane", "apply", "-f", "../../examples/flags/flags.json"); r.code != 0 {
		t.Fatalf("jane (impersonated by the admin) could not apply: %+v", r)
	}
	if r := runVars(t, vars, "--server", url, "--as", "jane", "get", "flags"); r.code != 0 || !strings.Contains(r.stdout, "new-project") {
		t.Fatalf("jane (impersonated by the admin) could not list flags: %+v", r)
	}
}

// TestKubeconfigInlineData: a kubeconfig whose CA, client certificate and
// key are inline data authenticates the client by its certificate, and the
// CLI writes none of it to a file (a private key left in the temporary
// directory would outlive the command).
func TestKubeconfigInlineData(t *testing.T) {
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		Subject:     pkix.Name{CommonName: "carol", Organization: []string{"cairn:admins"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	vars := map[string]string{"CAIRN_DATA_DIR": data, "CAIRN_CONFIG": filepath.Join(dir, "config.yaml")}
	startServeSecure(t, vars, "--client-ca", caFile)
	// serve's own kubeconfig (its CA inline), with carol's certificate and
	// key inline instead of the admin token.
	cfg, err := clientcmd.LoadFromFile(filepath.Join(data, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos["carol"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	cfg.Contexts[cfg.CurrentContext].AuthInfo = "carol"
	kubeconfig := filepath.Join(dir, "carol.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	other := map[string]string{"CAIRN_DATA_DIR": t.TempDir(), "CAIRN_CONFIG": filepath.Join(dir, "config.yaml")}
	if r := runVars(t, other, "--kubeconfig", kubeconfig, "apply", "-f", "../../examples/flags/flags.json", "-f", "../../examples/flags/new-project.yaml"); r.code != 0 {
		t.Fatalf("apply as carol: %+v", r)
	}
	if r := runVars(t, other, "--kubeconfig", kubeconfig, "get", "flags", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, `"createdBy": "carol"`) {
		t.Fatalf("get as carol: %+v", r)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the CLI left %d files in the temporary directory, the first %s", len(left), left[0].Name())
	}

	// Data that is not what it says is refused, naming what is wrong.
	cfg.AuthInfos["carol"].ClientKeyData = []byte("not a key")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if r := runVars(t, other, "--kubeconfig", kubeconfig, "get", "flags"); r.code == 0 || !strings.Contains(r.stderr, "client certificate client-certificate-data") {
		t.Fatalf("a bad inline key: %+v", r)
	}
}
