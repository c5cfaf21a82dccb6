package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// serveFileBackend serves the file backend in-process on loopback and
// returns its address and a function that stops it.
func serveFileBackend(t *testing.T, cfg file.Config) (string, func()) {
	t.Helper()
	return serveFileBackendAt(t, cfg, "127.0.0.1:0")
}

// serveFileBackendAt serves it on addr: a backend back where it was.
func serveFileBackendAt(t *testing.T, cfg file.Config, addr string) (string, func()) {
	t.Helper()
	fb, err := file.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var srv *storagebackend.Server
	if fb.AcceptValue() {
		srv = storagebackend.NewValueServer(fb, storagebackend.Options{})
	} else {
		srv = storagebackend.NewContextServer(fb, storagebackend.Options{})
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, lis); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

func compact(t *testing.T, doc json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, doc); err != nil {
		t.Fatalf("compact %s: %v", doc, err)
	}
	return b.String()
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v
}

type backendJSON struct {
	ID            string          `json:"id"`
	Alias         string          `json:"alias"`
	Namespace     string          `json:"namespace"`
	URL           string          `json:"url"`
	Transport     string          `json:"transport"`
	AcceptValue   bool            `json:"acceptValue"`
	ContextSchema json.RawMessage `json:"contextSchema"`
	TypeRef       cairn.TypeRef   `json:"typeRef"`
	UsedBy        int             `json:"usedBy"`
}

func TestBackendsCommands(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		values := t.TempDir()
		addr, stop := serveFileBackend(t, file.Config{Dir: values})

		b := decode[backendJSON](t, e.ok("backends", "register", "--url", "grpc://"+addr, "--accept-value", "--alias", "files", "-o", "json"))
		if b.Alias != "files" || b.URL != "grpc://"+addr || !b.AcceptValue || b.Transport != "plaintext" ||
			b.Namespace != "cairn-system" || b.TypeRef != (cairn.TypeRef{Path: cli.GRPCStorageTypePath, Revision: cli.GRPCStorageTypeRevision}) || string(b.ContextSchema) != "null" {
			t.Errorf("registered = %+v", b)
		}
		// The default Type is registered with the storage schema.
		if out := e.ok("types", "get", cli.GRPCStorageTypePath+":"+cli.GRPCStorageTypeRevision, "-o", "json"); !strings.Contains(out, `"acceptValue"`) {
			t.Errorf("Type %s: %s", cli.GRPCStorageTypePath, out)
		}
		inst, err := e.hub().GetInstance(context.Background(), b.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(inst.Latest.Attributes) != 1 || inst.Latest.Attributes[0].Path != cairn.StorageAttributePath {
			t.Errorf("attributes = %v", inst.Latest.Attributes)
		}

		list := decode[[]backendJSON](t, e.ok("backends", "list", "-o", "json"))
		// A fresh hub has the built-in and the in-process gotemplate backends.
		if len(list) != 3 || list[0].Transport == "" || list[1].Transport == "" || list[2].Transport == "" {
			t.Errorf("list = %+v, want the gotemplate, built-in and files backends", list)
		}
		table := e.ok("backends", "list")
		if !strings.Contains(table, "cairn-builtin") || !strings.Contains(table, "grpc://"+addr) {
			t.Errorf("list table:\n%s", table)
		}
		if got := decode[backendJSON](t, e.ok("backends", "get", "files", "-o", "json")); got.ID != b.ID {
			t.Errorf("get by alias = %+v", got)
		}
		check := decode[map[string]any](t, e.ok("backends", "check", "files", "-o", "json"))
		if check["status"] != "SERVING" || check["service"] != "storage_backend.ValueAndContextStorageBackend" {
			t.Errorf("check = %v", check)
		}
		if out := e.ok("backends", "check", "cairn-builtin"); !strings.Contains(out, "SERVING (built in") {
			t.Errorf("check of the built-in backend: %s", out)
		}

		// An instance stored in it, named by the backend's alias.
		doc := writeFile(t, t.TempDir(), "secret.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: api-token}
spec:
  typeRef: {path: cap.type.token, revision: 0.1.0}
  backend: {id: files}
  value: {token: t0k3n}
`)
		e.ok("apply", "-f", doc)
		tok := instanceOf(t, e.ok("get", "cap.type.token", "api-token", "-o", "json"))
		var data []byte
		if tok.Backend.ID != b.ID || compact(t, tok.Latest.Value) != `{"token":"t0k3n"}` {
			t.Fatalf("instance = %+v", tok)
		}
		data, err = os.ReadFile(filepath.Join(values, tok.ID, "1.json"))
		if err != nil || string(data) != `{"token":"t0k3n"}` {
			t.Errorf("value file = %s, %v", data, err)
		}
		if got := decode[backendJSON](t, e.ok("backends", "get", b.ID, "-o", "json")); got.UsedBy != 1 {
			t.Errorf("usedBy = %d, want 1", got.UsedBy)
		}

		// Registering the alias again is refused with the way to move it.
		r := e.run("", "backends", "register", "--url", "grpc://127.0.0.1:1", "--accept-value", "--alias", "files")
		if r.code != 4 || !strings.Contains(r.stderr, "cairn update "+b.ID+" --value-file") {
			t.Errorf("register again: exit %d, %s", r.code, r.stderr)
		}
		// Moved: the same values served at another address, and the
		// backend's instance updated as the error says.
		moved, _ := serveFileBackend(t, file.Config{Dir: values})
		e.ok("update", b.ID, "--value-file", writeFile(t, t.TempDir(), "moved.json",
			`{"url": "grpc://`+moved+`", "acceptValue": true, "contextSchema": null}`))
		if got := decode[backendJSON](t, e.ok("backends", "get", "files", "-o", "json")); got.URL != "grpc://"+moved {
			t.Errorf("after the move: %+v", got)
		}
		stop()
		if got := instanceOf(t, e.ok("get", tok.ID, "-o", "json")); compact(t, got.Latest.Value) != `{"token":"t0k3n"}` {
			t.Errorf("read through the moved backend: %+v", got)
		}

		// When the backend is down (back at its first address, where
		// nothing listens now): exit 6 with the backend named.
		e.ok("update", b.ID, "--value-file", writeFile(t, t.TempDir(), "back.json",
			`{"url": "grpc://`+addr+`", "acceptValue": true, "contextSchema": null}`))
		r = e.run("", "backends", "check", "files")
		if r.code != 6 || !strings.Contains(r.stderr, `External backend "`+b.ID+`"`) {
			t.Errorf("check of a stopped backend: exit %d, %s", r.code, r.stderr)
		}
		r = e.run("", "get", tok.ID)
		if r.code != 6 || !strings.Contains(r.stderr, "unavailable at "+addr) {
			t.Errorf("get from a stopped backend: exit %d, %s", r.code, r.stderr)
		}
	})
}

// TestLocalDeleteWhileTheBackendIsDown: in local mode no recovery
// controller runs, so a delete whose value stays in a backend that is down
// says so, and cairn backends recover finishes it once the backend is back.
func TestLocalDeleteWhileTheBackendIsDown(t *testing.T) {
	e := newFixture(t, true)
	values := t.TempDir()
	addr, stop := serveFileBackend(t, file.Config{Dir: values})
	b := decode[backendJSON](t, e.ok("backends", "register", "--url", "grpc://"+addr, "--accept-value", "--alias", "files", "-o", "json"))
	e.ok("apply", "-f", e.file("token.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: api-token}
spec:
  typeRef: {path: cap.type.token, revision: 0.1.0}
  backend: {id: files}
  value: {token: t0k3n}
`))
	tok := instanceOf(t, e.ok("get", "cap.type.token", "api-token", "-o", "json"))
	stop()

	r := e.run("", "delete", "ti", tok.ID)
	if r.code != 0 {
		t.Fatalf("delete: exit %d, %s", r.code, r.stderr)
	}
	for _, want := range []string{tok.ID, b.ID, "still in its backend", "cairn backends recover"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("delete's stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "t0k3n") {
		t.Errorf("delete's stderr shows the value:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(values, tok.ID)); err != nil {
		t.Fatalf("the value should still be in the stopped backend: %v", err)
	}

	// While the backend is down, recover says what is left and fails.
	r = e.run("", "backends", "recover", "--grace", "0s")
	if r.code != 6 || !strings.Contains(r.stderr, "1 interrupted write could not be finished") || !strings.Contains(r.stderr, b.ID) {
		t.Errorf("recover while the backend is down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Back where it was: the value goes, and nothing waits any more.
	serveFileBackendAt(t, file.Config{Dir: values}, addr)
	r = e.run("", "backends", "recover", "--grace", "0s")
	if r.code != 0 || !strings.Contains(r.stdout, "1 deleted value removed from its backend") {
		t.Errorf("recover: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(values, tok.ID)); !os.IsNotExist(err) {
		t.Errorf("the deleted instance's value is still in the backend: %v", err)
	}
	if out := e.ok("backends", "check", "files"); strings.Contains(out, "interrupted") {
		t.Errorf("check after recover: %s", out)
	}
}

func TestBackendsRegisterRefusals(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		dir := t.TempDir()
		notSchema := writeFile(t, dir, "bad.json", `{"type": 12}`)
		notObject := writeFile(t, dir, "list.json", `[1]`)
		tests := []struct {
			args []string
			code int
			want string
		}{
			{[]string{"backends", "register"}, 2, "register needs --url"},
			{[]string{"backends", "register", "--url", "ftp://x:1"}, 2, `scheme "ftp" is not supported`},
			{[]string{"backends", "register", "--url", "x"}, 2, "want host:port"},
			{[]string{"backends", "register", "--url", "x:1", "--context-schema", notSchema}, 2, "--context-schema " + notSchema + ": not a valid JSON Schema"},
			{[]string{"backends", "register", "--url", "x:1", "--context-schema", notObject}, 2, "want a JSON Schema object"},
			{[]string{"backends", "register", "--url", "x:1", "--context-schema", filepath.Join(dir, "missing.json")}, 2, "missing.json"},
			{[]string{"backends", "register", "--url", "x:1", "--type", "nopath"}, 2, "want PATH:REVISION"},
			{[]string{"backends", "get", "nosuch"}, 3, `"nosuch" is neither an id nor the alias of a storage backend`},
			{[]string{"backends", "check", "nosuch"}, 3, "nosuch"},
			{[]string{"--backend-timeout", "0s", "list"}, 2, "--backend-timeout 0s: must be positive"},
			{[]string{"backend", "file", "--listen", "127.0.0.1:0"}, 2, "backend file needs --dir"},
			{[]string{"backend", "file", "--dir", filepath.Join(dir, "v"), "--listen", "nope"}, 2, `--listen "nope": want HOST:PORT`},
			{[]string{"backend", "file", "--dir", filepath.Join(dir, "v"), "--tls-cert", "c.pem"}, 2, "--tls-cert and --tls-key go together"},
			{[]string{"backend", "file", "--dir", filepath.Join(dir, "v"), "--client-ca", "ca.pem"}, 2, "--client-ca needs --tls-cert and --tls-key"},
			// Nothing authenticates callers without client certificates.
			{[]string{"backend", "file", "--dir", filepath.Join(dir, "v"), "--listen", "0.0.0.0:0"}, 2, "--listen 0.0.0.0:0 is not a loopback address and no --client-ca is given"},
			{[]string{"backend", "file", "--dir", filepath.Join(dir, "v"), "--listen", "[::]:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, 2, "no --client-ca is given"},
			{[]string{"backend", "gotemplate", "--server", "http://127.0.0.1:1", "--listen", "0.0.0.0:0"}, 2, "not a loopback address"},
		}
		for _, tt := range tests {
			if tt.args[0] == "--backend-timeout" && !e.local {
				// How this process would reach backends: the server has its own.
				tt.want = "--backend-timeout configures the hub of local mode"
			}
			r := e.run("", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("cairn %s: exit %d, stderr %q; want %d and %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.code, tt.want)
			}
		}
		// Nothing was registered by the refusals.
		if list := decode[[]backendJSON](t, e.ok("backends", "list", "-o", "json")); len(list) != 2 {
			t.Errorf("backends after refusals = %+v, want the built-in and gotemplate ones", list)
		}
	})
}

// TestContextOnlyBackendFromTheCLI registers the file backend in its
// context-only mode and creates an instance whose value is a file it names.
func TestContextOnlyBackendFromTheCLI(t *testing.T) {
	modes(t, func(t *testing.T, e *server) {
		src := t.TempDir()
		writeFile(t, src, "nginx/values.json", `{"replicas":2}`)
		addr, _ := serveFileBackend(t, file.Config{Dir: t.TempDir(), Source: src})
		schemaFile := writeFile(t, t.TempDir(), "ctx.json", file.ContextSchema)
		e.ok("backends", "register", "--url", "grpc://"+addr, "--context-schema", schemaFile, "--alias", "files-ro")
		doc := writeFile(t, t.TempDir(), "release.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: nginx}
spec:
  typeRef: {path: cap.type.helm.values, revision: 0.1.0}
  backend: {id: files-ro, context: {file: nginx/values.json}}
`)
		e.ok("apply", "-f", doc)
		if got := instanceOf(t, e.ok("get", "cap.type.helm.values", "nginx", "-o", "json")); compact(t, got.Latest.Value) != `{"replicas":2}` {
			t.Errorf("value = %s, want the file's content", got.Latest.Value)
		}
		// The hub validates the context against the registered schema first.
		bad := writeFile(t, t.TempDir(), "bad.yaml", `apiVersion: hub.cairn.dev/v1
kind: TypeInstance
metadata: {name: other}
spec:
  typeRef: {path: cap.type.helm.values, revision: 0.1.0}
  backend: {id: files-ro, context: {path: x}}
`)
		r := e.run("", "apply", "-f", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "context must have required property 'file'") {
			t.Errorf("apply with a bad context: exit %d, %s", r.code, r.stderr)
		}
	})
}

// instanceOf decodes what get -o json prints for one TypeInstance.
func instanceOf(t *testing.T, s string) cairn.Instance {
	t.Helper()
	inst, err := cairnclient.DecodeInstance(json.RawMessage(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return inst
}
