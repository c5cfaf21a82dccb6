package terraform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/terraform"
	s3backend "github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/backend/s3/s3test"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// EnvTofu names the tofu binary scripts/with-services builds from the
// github.com/opentofu/opentofu module.
const EnvTofu = "CAIRN_TEST_TOFU"

func tofuBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvTofu)
	if bin == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s is not set: run the tests through scripts/with-services, which builds tofu", EnvTofu)
		}
		t.Skipf("!!! SKIPPING the OpenTofu end-to-end tests: %s is not set (scripts/with-services builds tofu)", EnvTofu)
	}
	return bin
}

// server is one cairn replica: a hub on a store, serving the state
// protocol and the REST API.
type server struct {
	url  string
	hub  *hub.Hub
	logs *logBuffer
}

// logBuffer collects everything the replica logs, at every level.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func ctxT(t testing.TB) context.Context { return cairn.WithActor(t.Context(), "test") }

func startServer(t testing.TB, st store.Store, opener hub.BackendOpener) *server {
	t.Helper()
	logs := &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := hub.New(ctxT(t), hub.Config{Store: st, Backends: opener, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterTerraformTypes(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(terraform.Prefix, terraform.New(terraform.Config{Hub: h, Logger: log}))
	api := rest.New(rest.Config{Hub: h, Logger: log, Version: rest.Version{Major: "1", Minor: "32", GitVersion: "v1.32.0-cairn"}})
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { api.StopWatches(); srv.Close() })
	return &server{url: srv.URL, hub: h, logs: logs}
}

func sqliteStore(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "cairn.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// workdir is one OpenTofu configuration using only the built-in
// terraform_data resource (no provider downloads).
type workdir struct {
	t    testing.TB
	tofu string
	dir  string
	// env is added to every run's environment (after the defaults).
	env []string
}

const config = `terraform {
  backend "http" {
    address        = %q
    lock_address   = %q
    unlock_address = %q
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
    username       = "ci-runner"
  }
}

variable "v" {
  default = "one"
}

resource "terraform_data" "x" {
  input = var.v
}

output "ip" {
  value = terraform_data.x.output
}

output "settings" {
  value = { name = terraform_data.x.output, replicas = 3 }
}

output "token" {
  value     = "secret-${terraform_data.x.output}"
  sensitive = true
}
`

func stateURL(base, ns, name string) string {
	return base + terraform.Prefix + "namespaces/" + ns + "/states/" + name
}

func newWorkdir(t *testing.T, address, lockAddress string) *workdir {
	t.Helper()
	w := &workdir{t: t, tofu: tofuBinary(t), dir: t.TempDir()}
	tf := fmt.Sprintf(config, address, lockAddress, address)
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(tf), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must("init", "-input=false", "-no-color")
	return w
}

func (w *workdir) run(args ...string) (string, error) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.tofu, args...)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "HOME="+w.dir, "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1", "TF_HTTP_PASSWORD=unused")
	cmd.Env = append(cmd.Env, w.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (w *workdir) must(args ...string) string {
	w.t.Helper()
	out, err := w.run(args...)
	if err != nil {
		w.t.Fatalf("tofu %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (w *workdir) apply(v string) {
	w.t.Helper()
	w.must("apply", "-auto-approve", "-input=false", "-no-color", "-var", "v="+v)
}

// outputValue returns the value of the instance of a state's output.
func outputValue(t *testing.T, h *hub.Hub, path, name string) json.RawMessage {
	t.Helper()
	inst, err := h.GetInstanceByName(ctxT(t), path, "default", name, true)
	if err != nil {
		t.Fatalf("output instance %s: %v", name, err)
	}
	var v struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(inst.Latest.Value, &v); err != nil {
		t.Fatal(err)
	}
	return v.Value
}

func wantJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	if !cairn.JSONEqual(got, json.RawMessage(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// lockAsOther takes the state's lock as another OpenTofu run would.
func lockAsOther(t *testing.T, url, id string) {
	t.Helper()
	body := fmt.Sprintf(`{"ID":%q,"Operation":"OperationTypeApply","Info":"","Who":"alice@build-7","Version":"1.10.10","Created":"2026-11-23T10:00:00Z","Path":""}`, id)
	req, _ := http.NewRequest("LOCK", url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("LOCK as another run: %s", resp.Status)
	}
}

// checkStateLife runs the whole life of a state through tofu against the
// replica at a (state) and b (lock), checking it through the hub of c.
func checkStateLife(t *testing.T, a, b, c *server, name string) {
	w := newWorkdir(t, stateURL(a.url, "default", name), stateURL(b.url, "default", name))
	w.apply("one")
	w.apply("two")

	inst, err := c.hub.GetInstanceByName(ctxT(t), hub.TerraformStatePath, "default", name, true)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := c.hub.TerraformStateHistory(ctxT(t), "default", name)
	if err != nil || len(hist) != 2 {
		t.Fatalf("history after two applies: %+v, %v", hist, err)
	}
	if hist[0].Serial >= hist[1].Serial || hist[1].CreatedBy != "ci-runner" {
		t.Errorf("history = %+v: want increasing serials, createdBy the basic-auth user", hist)
	}
	if inst.LockedBy != "" {
		t.Errorf("state still locked by %q after apply", inst.LockedBy)
	}
	wantJSON(t, "output ip", outputValue(t, c.hub, hub.TerraformOutputPath, name+"-ip"), `"two"`)
	wantJSON(t, "output settings", outputValue(t, c.hub, hub.TerraformOutputPath, name+"-settings"), `{"name":"two","replicas":3}`)
	wantJSON(t, "output token", outputValue(t, c.hub, hub.TerraformSensitivePath, name+"-token"), `"secret-two"`)

	// tofu state pull shows what cairn holds.
	pulled := w.must("state", "pull")
	wantJSON(t, "tofu state pull", json.RawMessage(pulled), string(inst.Latest.Value))

	// A concurrent run is refused, naming the holder (locked through the
	// state replica, refused through the lock replica).
	lockAsOther(t, stateURL(a.url, "default", name), "b1c0ffee-0000-4000-8000-000000000001")
	out, err := w.run("apply", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=0s", "-var", "v=three")
	if err == nil {
		t.Fatalf("apply while another run holds the lock succeeded:\n%s", out)
	}
	for _, want := range []string{"Error acquiring the state lock", "b1c0ffee-0000-4000-8000-000000000001", "alice@build-7", "OperationTypeApply"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused apply's output lacks %q:\n%s", want, out)
		}
	}
	if h, _ := c.hub.TerraformStateHistory(ctxT(t), "default", name); len(h) != 2 {
		t.Errorf("the refused apply wrote the state: %d versions", len(h))
	}
	// force-unlock of another lock ID is refused and leaves the lock; of
	// the holder's, releases it; the next apply goes through.
	if out, err := w.run("force-unlock", "-force", "0ddba11-0000-4000-8000-000000000002"); err == nil {
		t.Errorf("force-unlock of a lock ID that does not hold the state succeeded:\n%s", out)
	}
	if inst, err := c.hub.GetInstanceByName(ctxT(t), hub.TerraformStatePath, "default", name, false); err != nil || inst.LockedBy != "b1c0ffee-0000-4000-8000-000000000001" {
		t.Errorf("after a refused force-unlock the state is locked by %q (%v)", inst.LockedBy, err)
	}
	w.must("force-unlock", "-force", "b1c0ffee-0000-4000-8000-000000000001")
	w.apply("three")
	wantJSON(t, "output ip after force-unlock", outputValue(t, c.hub, hub.TerraformOutputPath, name+"-ip"), `"three"`)
}

func TestTofuSQLite(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	checkStateLife(t, s, s, s, "net")

	// kubectl lists the outputs; the sensitive one is of another kind.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kubectl is missing under CI=true")
		}
		t.Skip("kubectl is not installed")
	}
	out, err := exec.Command(kubectl, "--server", s.url, "get", "terraformoutputs", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get terraformoutputs: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	if strings.Join(got, " ") != "terraformoutput.terraform.cairn.dev/net-ip terraformoutput.terraform.cairn.dev/net-settings" {
		t.Errorf("kubectl get terraformoutputs -o name = %q", got)
	}
	checkTypeInstanceView(t, s, kubectl)
}

// checkTypeInstanceView checks the outputs of state net (after the apply
// of "three") in the TypeInstance view: their readable ids are the REST
// names, and a sensitive value is never in a list, a log line or an error.
func checkTypeInstanceView(t *testing.T, s *server, kubectl string) {
	body := httpGet(t, s.url+"/apis/hub.cairn.dev/v1/typeinstances")
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				Name  string
				Value struct{ Value json.RawMessage }
			}
		}
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, it := range list.Items {
		names[it.Metadata.Name] = string(it.Spec.Value.Value)
	}
	if v := names["terraformoutput.default.net-ip"]; v != `"three"` {
		t.Errorf("typeinstances list: terraformoutput.default.net-ip has value %s (names: %v)", v, slices.Sorted(maps.Keys(names)))
	}
	if v := names["terraformsensitiveoutput.default.net-token"]; v != `"(sensitive value)"` {
		t.Errorf("typeinstances list: the sensitive output shows %s", v)
	}
	// One instance by its readable id, as GraphQL and kubectl name it.
	one := httpGet(t, s.url+"/apis/hub.cairn.dev/v1/typeinstances/terraformoutput.default.net-ip")
	if !strings.Contains(string(one), `"name":"terraformoutput.default.net-ip"`) || !strings.Contains(string(one), `"three"`) {
		t.Errorf("GET typeinstances/terraformoutput.default.net-ip = %s", one)
	}

	const secret = "secret-three"
	seen := map[string][]byte{"the typeinstances list": body}
	seen["the terraformsensitiveoutputs list"] = httpGet(t, s.url+"/apis/terraform.cairn.dev/v1/namespaces/default/terraformsensitiveoutputs")
	for _, args := range [][]string{{"get", "terraformsensitiveoutputs", "-o", "json"}, {"get", "typeinstances", "-o", "yaml"}, {"get", "terraformsensitiveoutputs"}} {
		out, err := exec.Command(kubectl, append([]string{"--server", s.url}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		seen["kubectl "+strings.Join(args, " ")] = out
	}
	// A refused write of a document holding the secret: the error says
	// why without the value.
	resp, err := http.Post(stateURL(s.url, "default", "net"), "application/json",
		strings.NewReader(`{"version":4,"serial":99,"lineage":"another","outputs":{"token":{"value":"`+secret+`","type":"string","sensitive":true}},"resources":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	refused, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("a write of another lineage: %s %s", resp.Status, refused)
	}
	seen["the refused write's answer"] = refused
	seen["the server's log"] = []byte(s.logs.String())
	for what, b := range seen {
		if strings.Contains(string(b), secret) {
			t.Errorf("%s shows the sensitive value:\n%s", what, b)
		}
	}
	if !strings.Contains(s.logs.String(), "terraform state request") {
		t.Error("the server logged no request: the log check checks nothing")
	}
	// Reading the one instance shows it.
	if v := httpGet(t, s.url+"/apis/terraform.cairn.dev/v1/namespaces/default/terraformsensitiveoutputs/net-token"); !strings.Contains(string(v), secret) {
		t.Errorf("reading the sensitive output: %s", v)
	}
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return b
}

func TestTofuPostgresReplicas(t *testing.T) {
	schema := pgtest.NewSchema(t)
	a := startServer(t, schema.Open(t), nil)
	b := startServer(t, schema.Open(t), nil)
	// State on one replica, lock on the other, read back through either.
	checkStateLife(t, a, b, b, "replicated")
	doc, _, err := a.hub.TerraformState(ctxT(t), "default", "replicated")
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := b.hub.TerraformState(ctxT(t), "default", "replicated")
	if err != nil || !bytes.Equal(doc, other) {
		t.Errorf("the replicas disagree on the state: %v", err)
	}
}

func TestTofuStateInS3Backend(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "tfstate")
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
	opener := s3backend.NewOpener(s3backend.OpenerConfig{Getenv: func(k string) string { return env[k] }})
	s := startServer(t, sqliteStore(t), opener)
	ctx := ctxT(t)
	if _, _, err := s.hub.ApplyType(ctx, s3backend.StorageType()); err != nil {
		t.Fatal(err)
	}
	created, err := s.hub.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Alias: "s3", Name: "s3", Namespace: hub.SystemNamespace,
		TypeRef:    s3backend.StorageType().Ref(),
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
		Value: json.RawMessage(fmt.Sprintf(`{"url":%q,"acceptValue":true,"contextSchema":null,"bucket":"tfstate","prefix":"cairn","addressing":"path"}`,
			srv.Endpoint)),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	backendID := created[0].ID
	if _, err := s.hub.ApplyPolicy(ctx, policy.Policy{TypeInstance: policy.TypeInstancePolicy{Rules: []policy.Rule{
		{TypeRef: policy.TypeRef{Path: "cap.type.terraform.*"}, Backend: policy.BackendRef{ID: backendID}},
		{TypeRef: policy.TypeRef{Path: hub.TerraformStatePath}, Backend: policy.BackendRef{ID: backendID}},
	}}}); err != nil {
		t.Fatal(err)
	}
	w := newWorkdir(t, stateURL(s.url, "default", "ins3"), stateURL(s.url, "default", "ins3"))
	w.apply("one")
	w.apply("two")

	inst, err := s.hub.GetInstanceByName(ctx, hub.TerraformStatePath, "default", "ins3", true)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Backend.ID != backendID {
		t.Fatalf("state stored in backend %s, want the S3 backend %s", inst.Backend.ID, backendID)
	}
	// The bucket holds the state's resource versions as objects.
	c := srv.Client(t)
	obj, err := c.GetObject(ctx, "tfstate", fmt.Sprintf("cairn/%s/%010d.json", inst.ID, inst.Latest.ResourceVersion), minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(obj); err != nil {
		t.Fatalf("read the state's object from the bucket: %v", err)
	}
	wantJSON(t, "the state in the bucket", buf.Bytes(), w.must("state", "pull"))
	wantJSON(t, "output ip (in S3)", outputValue(t, s.hub, hub.TerraformOutputPath, "ins3-ip"), `"two"`)
}

// Two real tofu runs at once: the second is refused while the first (held
// up by a local-exec provisioner) holds the lock, and names it.
func TestTofuConcurrentApply(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	url := stateURL(s.url, "default", "busy")
	slow := newWorkdir(t, url, url)
	cfg := strings.Replace(fmt.Sprintf(config, url, url, url), `resource "terraform_data" "x" {
  input = var.v
}`, `resource "terraform_data" "x" {
  input = var.v
  provisioner "local-exec" {
    command = "sleep 4"
  }
}`, 1)
	if err := os.WriteFile(filepath.Join(slow.dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	fast := newWorkdir(t, url, url)

	done := make(chan error, 1)
	var slowOut string
	go func() {
		var err error
		slowOut, err = slow.run("apply", "-auto-approve", "-input=false", "-no-color", "-var", "v=slow")
		done <- err
	}()
	// Wait until the first run holds the lock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		inst, err := s.hub.GetInstanceByName(ctxT(t), hub.TerraformStatePath, "default", "busy", false)
		if err == nil && inst.LockedBy != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first apply never took the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := fast.run("apply", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=0s", "-var", "v=fast")
	if err == nil {
		t.Fatalf("a concurrent apply succeeded:\n%s", out)
	}
	for _, want := range []string{"Error acquiring the state lock", "Operation: OperationTypeApply", "Who:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused apply's output lacks %q:\n%s", want, out)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the first apply: %v\n%s", err, slowOut)
	}
	wantJSON(t, "output ip", outputValue(t, s.hub, hub.TerraformOutputPath, "busy-ip"), `"slow"`)
}

// A stack wires Terraform outputs into its parameters by reference: the
// example installation (examples/terraform/app-network) reads the outputs
// of examples/terraform/main.tf, and each real tofu apply flows into its
// children through the stack controller, triggered by the outputs' change.
func TestTofuOutputsIntoAStack(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	ctx := ctxT(t)
	st, err := stack.Load(ctx, repoPath("examples", "terraform", "app-network"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := st.Archive()
	if err != nil {
		t.Fatal(err)
	}
	entry, _, err := s.hub.AddStack(ctx, archive)
	if err != nil {
		t.Fatal(err)
	}
	// A resync far away: only changes trigger reconciles.
	ctl := stackctl.New(stackctl.Config{Hub: s.hub, Identity: "test-controller", Resync: time.Hour})
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = ctl.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-ran })

	// The example configuration, pointed at this server.
	w := &workdir{t: t, tofu: tofuBinary(t), dir: t.TempDir()}
	mainTF, err := os.ReadFile(repoPath("examples", "terraform", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	tf := strings.ReplaceAll(string(mainTF), "http://127.0.0.1:8080", s.url)
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(tf), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must("init", "-input=false", "-no-color")
	w.must("apply", "-auto-approve", "-input=false", "-no-color")

	// The example installation, as kubectl apply would create it.
	manifest, err := os.ReadFile(repoPath("examples", "terraform", "app-network", "installation.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Metadata struct {
			Name        string
			Annotations map[string]string
		}
		Spec json.RawMessage
	}
	if err := yaml.Unmarshal(manifest, &obj); err != nil {
		t.Fatal(err)
	}
	created, err := s.hub.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: obj.Metadata.Name,
		TypeRef: entry.InstallationType, Annotations: obj.Metadata.Annotations, Value: obj.Spec}}})
	if err != nil {
		t.Fatal(err)
	}
	shop := created[0].ID
	cm, err := s.hub.KindType(ctx, "examples.stacks.cairn.dev/v1alpha1", "AppSettings")
	if err != nil {
		t.Fatal(err)
	}
	fw, err := s.hub.KindType(ctx, "examples.stacks.cairn.dev/v1alpha1", "FirewallRule")
	if err != nil {
		t.Fatal(err)
	}
	children := func() string {
		a, err1 := s.hub.GetInstanceByName(ctx, cm.Path, "default", "shop-settings", true)
		b, err2 := s.hub.GetInstanceByName(ctx, fw.Path, "default", "shop-ingress", true)
		if err1 != nil || err2 != nil {
			return fmt.Sprint(err1, err2)
		}
		return string(a.Latest.Value) + " " + string(b.Latest.Value)
	}
	waitFor := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := children()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				inst, _ := s.hub.GetInstance(ctx, shop, false)
				t.Fatalf("%s: children are %s\nwant %s\n(installation status %s)", what, got, want, inst.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("after the first apply", `{"vpcCIDR":"10.0.0.0/16"} {"port":443,"sourceRanges":["10.0.1.0/24","10.0.2.0/24"]}`)
	inst, err := s.hub.GetInstance(ctx, shop, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"terraformoutput.default.network-vpc-cidr", "terraformoutput.default.network-subnets"} {
		if !slices.Contains(inst.Uses, id) {
			t.Errorf("the installation uses %v, want %s among them", inst.Uses, id)
		}
	}

	// A new apply flows into the children, with nothing else done.
	w.must("apply", "-auto-approve", "-input=false", "-no-color", "-var", "cidr=10.9.0.0/16")
	waitFor("after the second apply", `{"vpcCIDR":"10.9.0.0/16"} {"port":443,"sourceRanges":["10.9.1.0/24","10.9.2.0/24"]}`)

	// The state cannot drop an output the stack reads: the apply fails and
	// the output stays.
	noCIDR := strings.Replace(tf, "output \"vpc_cidr\" {\n  value = terraform_data.vpc.output\n}\n", "", 1)
	if noCIDR == tf {
		t.Fatal("the test's edit of main.tf changed nothing")
	}
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(noCIDR), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := w.run("apply", "-auto-approve", "-input=false", "-no-color", "-var", "cidr=10.9.0.0/16"); err == nil {
		t.Errorf("an apply dropping an output a stack reads succeeded:\n%s", out)
	}
	// The refusal (in the answer's body, which the server logs) names the
	// installation that reads the output.
	if l := s.logs.String(); !strings.Contains(l, `drops output \"vpc_cidr\"`) || !strings.Contains(l, "default/shop") {
		t.Errorf("the server's log does not name the output and the installation:\n%s", l)
	}
	if _, err := s.hub.GetInstance(ctx, "terraformoutput.default.network-vpc-cidr", false); err != nil {
		t.Errorf("the output a stack reads: %v", err)
	}

	// A sensitive output cannot be a parameter: the installation says so,
	// without the value, and renders nothing.
	created, err = s.hub.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Name: "leaky",
		TypeRef: entry.InstallationType, Value: json.RawMessage(`{}`),
		Annotations: map[string]string{hub.AnnotationParametersFrom: "vpcCIDR: {terraformOutput: network-admin-token}"}}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		inst, err := s.hub.GetInstance(ctx, created[0].ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(inst.Status), "is sensitive") {
			if strings.Contains(string(inst.Status), "token-for-") {
				t.Errorf("the status shows the sensitive value: %s", inst.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the installation reading a sensitive output: status %s", inst.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.hub.GetInstanceByName(ctx, cm.Path, "default", "leaky-settings", false); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Errorf("the installation reading a sensitive output rendered children: %v", err)
	}
}

func repoPath(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}
