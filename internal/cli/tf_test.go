package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/terraform"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/cli"
	"github.com/cairn-dev/cairn/store/sqlite"
)

func tfState(serial int, ip string, extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"version":4,"terraform_version":"1.10.10","serial":%d,"lineage":"L","outputs":{"ip":{"value":%q,"type":"string"}%s},`+
		`"resources":[{"mode":"managed","type":"terraform_data","name":"x","instances":[{"attributes":{"input":%q}}]}]}`, serial, ip, extra, ip))
}

// writeStates writes two versions of state "net" through h.
func writeStates(t *testing.T, h *hub.Hub) {
	t.Helper()
	ctx := cairn.WithActor(context.Background(), "terraformer")
	for i, doc := range []json.RawMessage{tfState(1, "10.0.0.1", ""), tfState(2, "10.0.0.2", `,"dns":{"value":"a.example","type":"string"}`)} {
		if _, err := h.PutTerraformState(ctx, "default", "net", "", doc); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
	}
}

func TestTfHistoryAndDiff(t *testing.T) {
	checks := func(t *testing.T, ok func(args ...string) string, fail func(args ...string) result) {
		matchLines(t, ok("tf", "history", "net"),
			`VERSION\s+SERIAL\s+LINEAGE\s+RESOURCES\s+OUTPUTS\s+TOFU\s+CREATED\s+BY`,
			`1\s+1\s+L\s+1\s+1\s+1\.10\.10\s+\S+Z\s+terraformer`,
			`2\s+2\s+L\s+1\s+2\s+1\.10\.10\s+\S+Z\s+terraformer`)
		if got, want := ok("tf", "diff", "net", "1", "2"), "~ resource terraform_data.x\n+ output dns\n~ output ip\n"; got != want {
			t.Errorf("tf diff = %q, want %q", got, want)
		}
		var d map[string][]string
		if err := json.Unmarshal([]byte(ok("tf", "diff", "net", "2", "1", "-o", "json")), &d); err != nil || strings.Join(d["outputsRemoved"], ",") != "dns" {
			t.Errorf("tf diff -o json = %v, %v", d, err)
		}
		if got := ok("tf", "diff", "net", "2", "2"); got != "no changes between versions 2 and 2\n" {
			t.Errorf("diff of a version with itself = %q", got)
		}
		for _, tt := range []struct {
			args []string
			msg  string
		}{
			{[]string{"tf", "history", "nope"}, `state "default/nope" was not found`},
			{[]string{"tf", "diff", "net", "1", "9"}, `state "default/net" has no version 9`},
			{[]string{"tf", "diff", "net", "1", "x"}, `"x" is not a resource version`},
			{[]string{"tf", "history", "net", "-o", "yaml"}, `--output "yaml"`},
		} {
			r := fail(tt.args...)
			if r.code == 0 || !strings.Contains(r.stderr, tt.msg) {
				t.Errorf("cairn %s: exit %d, stderr %q; want a failure saying %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.msg)
			}
		}
	}

	t.Run("local", func(t *testing.T) {
		e := newEnv(t)
		e.ok("version") // creates the store
		writeStates(t, e.hub())
		checks(t, e.ok, func(args ...string) result { return e.run("", args...) })
	})

	t.Run("client", func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		st, err := sqlite.Open(ctx, filepath.Join(dir, "server.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		h, err := hub.New(ctx, hub.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.RegisterTerraformTypes(ctx); err != nil {
			t.Fatal(err)
		}
		writeStates(t, h)
		srv := httptest.NewServer(terraform.New(terraform.Config{Hub: h}))
		t.Cleanup(srv.Close)
		run := func(args ...string) result {
			var out, errOut bytes.Buffer
			vars := map[string]string{"USER": "tester", "HOME": dir}
			code := cli.Main(ctx, append([]string{"--server", srv.URL}, args...), cli.Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			})
			return result{code: code, stdout: out.String(), stderr: errOut.String()}
		}
		ok := func(args ...string) string {
			r := run(args...)
			if r.code != 0 {
				t.Fatalf("cairn %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
			}
			return r.stdout
		}
		checks(t, ok, run)
	})
}

// A state's or an output's readable id names its TypeInstance, as a UUID
// does, in get, describe and delete.
func TestReadableIDsNameInstances(t *testing.T) {
	e := newEnv(t)
	e.ok("version") // creates the store
	writeStates(t, e.hub())
	if got := e.ok("get", "terraformoutput.default.net-ip", "-o", "name"); got != "typeinstance.hub.cairn.dev/terraformoutput.default.net-ip\n" {
		t.Errorf("get by an output's id = %q", got)
	}
	if got := e.ok("describe", "terraformstate.default.net"); !strings.Contains(got, "UID:") || !strings.Contains(got, "terraformstate.default.net") {
		t.Errorf("describe by a state's id:\n%s", got)
	}
	// A resource type's qualified name still names the resource type.
	matchLines(t, e.ok("get", "terraformoutputs.terraform.cairn.dev"), `NAME\s+.*`, `net-dns\s+.*`, `net-ip\s+.*`)
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"get", "terraformoutput.default.nope"}, `typeinstances.hub.cairn.dev "terraformoutput.default.nope" not found`},
		{[]string{"get", "widget.default.x"}, `the server doesn't have a resource type "widget.default.x"`},
	} {
		r := e.run("", tt.args...)
		if r.code != cli.ExitNotFound || !strings.Contains(r.stderr, tt.msg) {
			t.Errorf("cairn %s: exit %d, stderr %q; want not found saying %q", strings.Join(tt.args, " "), r.code, r.stderr, tt.msg)
		}
	}
	e.ok("delete", "terraformoutput.default.net-dns")
	if r := e.run("", "get", "terraformoutput.default.net-dns"); r.code != cli.ExitNotFound {
		t.Errorf("the output deleted by its id: exit %d %s", r.code, r.stdout)
	}
}
