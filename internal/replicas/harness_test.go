package replicas

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/internal/testbin"
	"github.com/cairn-dev/cairn/store/postgres/pgtest"
)

// cairnBuild builds the binary once per test process; testbin shares the
// file with the other packages' tests.
var cairnBuild = sync.OnceValues(func() (string, error) { return testbin.Build("./cmd/cairn", "cairn") })

// cairnBinary builds cmd/cairn from the module root (once).
func cairnBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := cairnBuild()
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// database is one fresh schema in the test database, named in the DSN the
// replicas get (search_path), so every replica and the checks see the same
// tables and nothing else.
type database struct {
	schema pgtest.Schema
}

func newDatabase(tb testing.TB) database {
	tb.Helper()
	return database{schema: pgtest.NewSchema(tb)}
}

// dsn is the DSN of the schema for a replica; application_name tells its
// sessions apart in pg_stat_activity.
func (d database) dsn(tb testing.TB, application string) string {
	tb.Helper()
	params := map[string]string{"search_path": d.schema.Name, "application_name": application}
	base := d.schema.DSN
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			tb.Fatalf("parse %s: %v", pgtest.EnvDSN, err)
		}
		q := u.Query()
		for k, v := range params {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	// key=value form: later keys win.
	for k, v := range params {
		base += " " + k + "=" + v
	}
	return base
}

// conn opens a plain connection on the schema for the checks.
func (d database) conn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(d.schema.DSN)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = pgx.Identifier{d.schema.Name}.Sanitize()
	cfg.RuntimeParams["application_name"] = "cairn-replicas-check"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("connect to the test database: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// lockedBuffer collects a subprocess's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// replica is one `cairn serve` process.
type replica struct {
	name   string
	app    string // its application_name in PostgreSQL
	url    string
	cmd    *exec.Cmd
	logs   *lockedBuffer
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
	killed atomic.Bool
	// inflight counts requests sent to it and not yet answered, and
	// inflightWrites the writes among them.
	inflight, inflightWrites atomic.Int64
	client                   *client.Client
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// startReplica starts `cairn serve` on a free loopback port on db and
// waits until it answers /readyz. At the end of the test it is stopped with
// SIGINT, as an operator would, and must exit cleanly (unless it was
// killed).
func startReplica(tb testing.TB, bin string, db database, name string, extra ...string) *replica {
	tb.Helper()
	dir := tb.TempDir()
	r := &replica{name: name, app: "cairn-replica-" + name, logs: &lockedBuffer{}, exited: make(chan struct{})}
	args := append([]string{"serve", "--allow-anonymous", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--database", db.dsn(tb, r.app)}, extra...)
	r.cmd = exec.Command(bin, args...)
	// Nothing from the environment but PATH: no user configuration, no
	// CAIRN_* variables.
	r.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "XDG_DATA_HOME=" + dir}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	r.cmd.Stderr = r.logs
	if err := r.cmd.Start(); err != nil {
		tb.Fatalf("start replica %s: %v", name, err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	tb.Cleanup(func() { r.stop(tb) })
	select {
	case r.url = <-urls:
	case <-r.exited:
		tb.Fatalf("replica %s exited before serving: %v\n%s", name, r.err, r.logs)
	case <-time.After(30 * time.Second):
		tb.Fatalf("replica %s did not report its address within 30s\n%s", name, r.logs)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, MaxIdleConns: 64}}
	r.client, err = client.New(r.url, client.WithHTTPClient(hc), client.WithActor("replicas-test"))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.client.Healthy(ctx); err != nil {
		tb.Fatalf("replica %s is not ready: %v\n%s", name, err, r.logs)
	}
	return r
}

// stop ends the process with SIGINT and checks it exits cleanly.
func (r *replica) stop(tb testing.TB) {
	select {
	case <-r.exited:
		if !r.killed.Load() && r.err != nil {
			tb.Errorf("replica %s exited with %v\n%s", r.name, r.err, r.logs)
		}
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-r.exited:
		if r.err != nil {
			tb.Errorf("replica %s did not exit cleanly on SIGINT: %v\n%s", r.name, r.err, r.logs)
		}
	case <-time.After(15 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
		tb.Errorf("replica %s did not stop within 15s of SIGINT\n%s", r.name, r.logs)
	}
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone. It
// may run on any goroutine.
func (r *replica) kill() error {
	r.killed.Store(true)
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 replica %s: %w", r.name, err)
	}
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("replica %s still running 10s after SIGKILL", r.name)
	}
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) {
		return fmt.Errorf("replica %s after SIGKILL: %v, want an exit by signal", r.name, r.err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fmt.Errorf("replica %s after SIGKILL: exit status %v, want killed by SIGKILL", r.name, ee)
	}
	return nil
}

// The Type every test registers: a cup ResourceDefinition, served as
// flags.flipt.io/v1alpha1.
const flagRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "flags.flipt.io"},
 "names": {"kind": "Flag", "singular": "flag", "plural": "flags", "shortNames": ["fl"]},
 "spec": {"group": "flipt.io", "versions": {
   "v1alpha1": {"type": "object", "required": ["key"], "additionalProperties": false,
     "properties": {
       "key": {"type": "string", "minLength": 1},
       "enabled": {"type": "boolean"},
       "port": {"type": "integer", "minimum": 1, "maximum": 65535}}}}}}`

var flags = client.Resource{Group: "flipt.io", Version: "v1alpha1", Plural: "flags", Kind: "Flag", Namespaced: true}

const namespace = "default"

// registerFlag creates the Type through the first replica and waits until
// every replica serves it (each caches its resources for a short time).
// It returns the Type's reference.
func registerFlag(tb testing.TB, rs ...*replica) cairn.TypeRef {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := rs[0].client.Create(ctx, client.Types, "", json.RawMessage(flagRD))
	if err != nil {
		tb.Fatalf("POST types on %s: %v", rs[0].name, err)
	}
	var typ struct {
		Spec struct {
			Path     string `json:"path"`
			Revision string `json:"revision"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(out, &typ); err != nil || typ.Spec.Path == "" {
		tb.Fatalf("POST types answered %s (%v)", out, err)
	}
	for _, r := range rs {
		poll(tb, 15*time.Second, fmt.Sprintf("replica %s serves flags", r.name), func() error {
			_, err := r.client.List(ctx, flags, namespace, client.ListOptions{Limit: 1})
			return err
		})
	}
	return cairn.TypeRef{Path: typ.Spec.Path, Revision: typ.Spec.Revision}
}

// poll calls fn until it returns nil, failing tb with fn's last error when
// the deadline passes.
func poll(tb testing.TB, within time.Duration, what string, fn func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: still failing after %v: %v", what, within, err)
		}
		<-tick.C
	}
}
