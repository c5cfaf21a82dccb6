package wasm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
)

var widget = controller.Kind{Group: "example.com", Version: "v1", Kind: "Widget"}

func resource(ns, name string, labels map[string]string) json.RawMessage {
	b, err := json.Marshal(map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"namespace": ns, "name": name, "labels": labels},
		"spec":       map[string]any{"size": len(name)},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func names(t *testing.T, items []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, item := range items {
		var doc struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		}
		if err := json.Unmarshal(item, &doc); err != nil {
			t.Fatalf("list item %s: %v", item, err)
		}
		out = append(out, doc.Metadata.Namespace+"/"+doc.Metadata.Name)
	}
	slices.Sort(out)
	return out
}

// The example controller end to end through the Controller interface
// against a real directory: the files land where the example says, list
// filters by labels, delete makes get answer NotFound (exit 2).
func TestExampleControllerEndToEnd(t *testing.T) {
	m := modules(t)
	var ctl controller.Controller = load(t, newRuntime(t, Options{}), "yaml-tree", m.example)
	ctx := context.Background()
	root := t.TempDir()

	for _, r := range []json.RawMessage{
		resource("team-a", "blue", map[string]string{"tier": "web", "env": "prod"}),
		resource("team-a", "red", map[string]string{"tier": "db", "env": "prod"}),
		resource("team-b", "green", map[string]string{"tier": "web", "env": "dev"}),
	} {
		if err := ctl.Put(ctx, root, widget, r); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	// The example's own layout: <namespace>/<kind>.<group>/<name>.yaml.
	data, err := os.ReadFile(filepath.Join(root, "team-a", "widget.example.com", "blue.yaml"))
	if err != nil {
		t.Fatalf("the example did not write its file: %v", err)
	}
	if !strings.Contains(string(data), "name: blue") || strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		t.Fatalf("blue.yaml is not the YAML form of the resource:\n%s", data)
	}

	got, err := ctl.Get(ctx, root, widget, "team-a", "blue")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	var doc struct {
		Metadata struct {
			Name   string
			Labels map[string]string
		}
		Spec struct{ Size int }
	}
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatalf("get returned %s: %v", got, err)
	}
	if doc.Metadata.Name != "blue" || doc.Metadata.Labels["tier"] != "web" || doc.Spec.Size != 4 {
		t.Fatalf("get returned %s", got)
	}

	for _, tc := range []struct {
		namespace string
		labels    map[string]string
		want      []string
	}{
		{"team-a", nil, []string{"team-a/blue", "team-a/red"}},
		{"team-a", map[string]string{"tier": "web"}, []string{"team-a/blue"}},
		{"team-a", map[string]string{"tier": "web", "env": "dev"}, nil},
		{"", map[string]string{"tier": "web"}, []string{"team-a/blue", "team-b/green"}},
		{"", nil, []string{"team-a/blue", "team-a/red", "team-b/green"}},
		{"nobody", nil, nil},
	} {
		items, err := ctl.List(ctx, root, widget, tc.namespace, tc.labels)
		if err != nil {
			t.Fatalf("list %q %v: %v", tc.namespace, tc.labels, err)
		}
		if got := names(t, items); !slices.Equal(got, tc.want) {
			t.Errorf("list %q %v = %v, want %v", tc.namespace, tc.labels, got, tc.want)
		}
	}

	if err := ctl.Delete(ctx, root, widget, "team-a", "blue"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "team-a", "widget.example.com", "blue.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("blue.yaml still there after delete: %v", err)
	}
	_, err = ctl.Get(ctx, root, widget, "team-a", "blue")
	if !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("get after delete: %v (code %s), want NotFound", err, cairn.ErrorCode(err))
	}
	if !strings.Contains(err.Error(), `wasm controller "yaml-tree": get Widget team-a/blue`) || !strings.Contains(err.Error(), `"blue" not found`) {
		t.Fatalf("not-found error does not name the controller, the operation and the module's message: %v", err)
	}
	if err := ctl.Delete(ctx, root, widget, "team-a", "blue"); !cairn.HasCode(err, cairn.CodeNotFound) {
		t.Fatalf("second delete: %v, want NotFound", err)
	}

	// The module's refusals arrive as Invalid, with its message.
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"put without a name", func() error {
			return ctl.Put(ctx, root, widget, json.RawMessage(`{"metadata":{"namespace":"team-a"}}`))
		}},
		{"put that is not an object", func() error { return ctl.Put(ctx, root, widget, json.RawMessage(`[1]`)) }},
		{"get with a path as name", func() error { _, err := ctl.Get(ctx, root, widget, "team-a", "../../etc/passwd"); return err }},
	} {
		if err := tc.call(); !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("%s: %v (code %s), want Invalid", tc.name, err, cairn.ErrorCode(err))
		}
	}
}

// argv and environment are exactly the protocol's: nothing of the host's
// environment reaches the module.
func TestArgumentsAndEnvironment(t *testing.T) {
	m := modules(t)
	ctl := load(t, newRuntime(t, Options{}), "probe", m.probe)
	kind := controller.Kind{Group: "example.com", Version: "v1", Kind: "env"}
	t.Setenv("CAIRN_HOST_SECRET", "must-not-leak")
	out, err := ctl.Get(context.Background(), t.TempDir(), kind, "ns", "name")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Args    []string
		Group   string
		Version string
		Environ []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"probe", "get", "env", "ns", "name"}; !slices.Equal(got.Args, want) {
		t.Errorf("args = %q, want %q", got.Args, want)
	}
	if got.Group != "example.com" || got.Version != "v1" {
		t.Errorf("CUP_GROUP, CUP_VERSION = %q, %q", got.Group, got.Version)
	}
	slices.Sort(got.Environ)
	if want := []string{"CUP_GROUP=example.com", "CUP_VERSION=v1"}; !slices.Equal(got.Environ, want) {
		t.Errorf("environment = %q, want only %q", got.Environ, want)
	}

	// List passes sorted label pairs after the namespace, "" for all.
	items, err := ctl.List(context.Background(), t.TempDir(), kind, "", map[string]string{"b": "2", "a": "1"})
	if err != nil || len(items) != 1 {
		t.Fatalf("list: %v, %v", items, err)
	}
	if err := json.Unmarshal(items[0], &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"probe", "list", "env", "", "a=1", "b=2"}; !slices.Equal(got.Args, want) {
		t.Errorf("list args = %q, want %q", got.Args, want)
	}

	// Put passes the resource's namespace and name after the kind, as
	// cup's runtime does (cup's Go SDK reads them there).
	tree := t.TempDir()
	if err := ctl.Put(context.Background(), tree, kind, resource("ns", "name", nil)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(tree, "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if want := []string{"probe", "put", "env", "ns", "name"}; !slices.Equal(got.Args, want) {
		t.Errorf("put args = %q, want %q", got.Args, want)
	}
}

// The module sees the tree and nothing else: not through "..", not through
// absolute host paths, not through symlinks in the tree pointing out.
func TestSandboxFilesystem(t *testing.T) {
	m := modules(t)
	ctl := load(t, newRuntime(t, Options{}), "probe", m.probe)
	base := t.TempDir()
	const secret = "outside-secret-7f3a"
	if err := os.MkdirAll(filepath.Join(base, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside", "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret.txt"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(base, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "inside.txt"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret.txt", filepath.Join(tree, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside", filepath.Join(tree, "dirlink")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		call func() (json.RawMessage, error)
	}{
		{"get (read-only mount)", func() (json.RawMessage, error) {
			return ctl.Get(context.Background(), tree, controller.Kind{Kind: "escape"}, "ns", "n")
		}},
		{"delete (writable mount)", func() (json.RawMessage, error) {
			// Delete discards stdout, so read it through the call itself.
			return ctl.call(context.Background(), request{op: "delete", root: tree, kind: controller.Kind{Kind: "escape"}, args: []string{"ns", "n"}, writable: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			var seen map[string]string
			if err := json.Unmarshal(out, &seen); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if seen["/inside.txt"] != "read: inside" {
				t.Fatalf("the module cannot read its own tree: %q", seen["/inside.txt"])
			}
			for what, result := range seen {
				if strings.Contains(result, secret) {
					t.Errorf("%s reached outside the mount: %q", what, result)
				}
				if strings.HasPrefix(result, "entries:") && (strings.Contains(result, "outside") || strings.Contains(result, "tree")) {
					t.Errorf("%s lists the mount's parent: %q", what, result)
				}
				if strings.HasPrefix(what, "/etc/") || strings.HasPrefix(what, "/proc/") {
					if !strings.HasPrefix(result, "error:") {
						t.Errorf("%s of the host is readable: %q", what, result)
					}
				}
			}
			for _, p := range []string{"/link", "/dirlink/secret.txt"} {
				if !strings.HasPrefix(seen[p], "error:") {
					t.Errorf("symlink %s out of the tree was followed: %q", p, seen[p])
				}
			}
			// ".." of the mount is the mount itself, never its parent.
			if seen["ls /.."] != seen["ls /"] && !strings.HasPrefix(seen["ls /.."], "error:") {
				t.Errorf("ls /.. = %q, ls / = %q", seen["ls /.."], seen["ls /"])
			}
		})
	}
}

// get and list see a read-only tree; put and delete a writable one, still
// without links.
func TestMountModes(t *testing.T) {
	m := modules(t)
	ctl := load(t, newRuntime(t, Options{}), "probe", m.probe)
	kind := controller.Kind{Kind: "write"}
	for _, tc := range []struct {
		op       string
		writable bool
	}{
		{"get", false},
		{"list", false},
		{"put", true},
		{"delete", true},
	} {
		t.Run(tc.op, func(t *testing.T) {
			tree := t.TempDir()
			if err := os.WriteFile(filepath.Join(tree, "inside.txt"), []byte("inside"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := ctl.call(context.Background(), request{op: tc.op, root: tree, kind: kind, args: []string{"ns", "n"}, stdin: []byte(`{}`), writable: tc.writable})
			if err != nil {
				t.Fatal(err)
			}
			var seen map[string]string
			if err := json.Unmarshal(out, &seen); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			for _, what := range []string{"write", "mkdir", "remove"} {
				if ok := seen[what] == "ok"; ok != tc.writable {
					t.Errorf("%s %s: %q, writable mount = %v", tc.op, what, seen[what], tc.writable)
				}
			}
			if !strings.HasPrefix(seen["link"], "error:") {
				t.Errorf("%s: the module made a symlink: %q", tc.op, seen["link"])
			}
			_, err = os.Stat(filepath.Join(tree, "probe.txt"))
			if written := err == nil; written != tc.writable {
				t.Errorf("%s: probe.txt on the host exists = %v, writable mount = %v", tc.op, written, tc.writable)
			}
			if _, err := os.Lstat(filepath.Join(tree, "made-link")); err == nil {
				t.Errorf("%s: a symlink appeared on the host", tc.op)
			}
		})
	}
}

// Misbehaving modules give clear errors, quickly, and never hang.
func TestLimitsAndFailures(t *testing.T) {
	m := modules(t)
	const timeout = time.Second
	ctl := load(t, newRuntime(t, Options{MemoryLimit: 32 << 20, Timeout: timeout, MaxStdout: 1 << 20}), "probe", m.probe)
	for _, tc := range []struct {
		behaviour string
		op        string
		sentinel  error      // errors.Is, when set
		code      cairn.Code // cairn.ErrorCode otherwise
		contains  []string
	}{
		{behaviour: "loop", sentinel: ErrTimeout, contains: []string{"still running after 1s"}},
		{behaviour: "sleep", sentinel: ErrTimeout},
		{behaviour: "hog", sentinel: ErrMemoryLimit, contains: []string{"of 32.0 MiB", "out of memory"}},
		{behaviour: "flood", sentinel: ErrOutputLimit, contains: []string{"more than 1048576 bytes to stdout"}},
		{behaviour: "panic", sentinel: ErrCrashed, contains: []string{"exit code 2 without a JSON message", "probe panics on purpose"}},
		{behaviour: "exit2-silent", sentinel: ErrCrashed},
		{behaviour: "exit7", sentinel: ErrCrashed, contains: []string{"exit code 7", "stderr: probe exits 7"}},
		{behaviour: "garbage", sentinel: ErrProtocol, contains: []string{"not a JSON object"}},
		{behaviour: "garbage", op: "list", sentinel: ErrProtocol},
		{behaviour: "notfound", code: cairn.CodeNotFound, contains: []string{"no such probe resource"}},
		{behaviour: "invalid", code: cairn.CodeInvalid, contains: []string{"probe refuses"}},
		{behaviour: "error", code: cairn.CodeInternal, contains: []string{"probe failed on purpose"}},
		{behaviour: "error", op: "put", code: cairn.CodeInternal, contains: []string{"probe failed on purpose"}},
		{behaviour: "notfound", op: "delete", code: cairn.CodeNotFound},
		// cup's Go SDK says not found on stderr, with exit 2 and nothing
		// on stdout; a Go runtime crash (panic, above) also exits 2, with
		// its report on stderr.
		{behaviour: "notfound-stderr", code: cairn.CodeNotFound, contains: []string{"not found: probe resource"}},
		{behaviour: "notfound-stderr", op: "delete", code: cairn.CodeNotFound},
		{behaviour: "error-stderr", sentinel: ErrCrashed, contains: []string{"exit code 1 without a JSON message", "probe failed, said on stderr"}},
	} {
		op := tc.op
		if op == "" {
			op = "get"
		}
		t.Run(op+"/"+tc.behaviour, func(t *testing.T) {
			kind := controller.Kind{Kind: tc.behaviour}
			ctx := context.Background()
			start := time.Now()
			var err error
			switch op {
			case "get":
				_, err = ctl.Get(ctx, t.TempDir(), kind, "ns", "n")
			case "list":
				_, err = ctl.List(ctx, t.TempDir(), kind, "ns", nil)
			case "put":
				err = ctl.Put(ctx, t.TempDir(), kind, resource("ns", "n", nil))
			case "delete":
				err = ctl.Delete(ctx, t.TempDir(), kind, "ns", "n")
			}
			elapsed := time.Since(start)
			t.Log(err)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("error %q does not wrap %q", err, tc.sentinel)
			}
			if tc.sentinel != nil && cairn.HasCode(err, cairn.CodeNotFound) {
				t.Errorf("a failure is reported as not found: %v", err)
			}
			if tc.code != "" && cairn.ErrorCode(err) != tc.code {
				t.Errorf("code %s, want %s: %v", cairn.ErrorCode(err), tc.code, err)
			}
			for _, s := range append([]string{`wasm controller "probe": ` + op + " " + tc.behaviour}, tc.contains...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			// Generous for a loaded machine, but far from a hang.
			if elapsed > timeout+10*time.Second {
				t.Errorf("took %s", elapsed)
			}
		})
	}
}

// A list that answers 2 is an empty list; a stream of objects is a list.
func TestListAnswers(t *testing.T) {
	m := modules(t)
	ctl := load(t, newRuntime(t, Options{}), "probe", m.probe)
	items, err := ctl.List(context.Background(), t.TempDir(), controller.Kind{Kind: "notfound"}, "ns", nil)
	if err != nil || items == nil || len(items) != 0 {
		t.Fatalf("list answering exit 2 = %v, %v; want an empty list", items, err)
	}
	items, err = ctl.List(context.Background(), t.TempDir(), controller.Kind{Kind: "stream"}, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, items); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Fatalf("stream list = %v", got)
	}
	if _, err := ctl.List(context.Background(), t.TempDir(), controller.Kind{Kind: "stream"}, "ns", map[string]string{"a=b": "c"}); !cairn.HasCode(err, cairn.CodeInvalid) {
		t.Fatalf("a label key with '=' = %v, want Invalid", err)
	}
}

// WASI preview 1 cannot open a socket: Dial fails and nothing connects.
func TestNoNetwork(t *testing.T) {
	m := modules(t)
	ctl := load(t, newRuntime(t, Options{}), "probe", m.probe)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := ctl.call(context.Background(), request{op: "get", root: t.TempDir(), kind: controller.Kind{Kind: "net"}, args: []string{ln.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	var seen map[string]string
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(seen["dial"], "error:") {
		t.Fatalf("dial from the module: %q", seen["dial"])
	}
	// The module has exited, so a connection it made would be queued by now.
	if err := ln.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if conn, err := ln.Accept(); err == nil {
		conn.Close()
		t.Fatal("the module connected to the host")
	}
}

// The caller's cancellation is reported as such, not as the module's
// time limit.
func TestCallerDeadline(t *testing.T) {
	m := modules(t)
	ctl := load(t, newRuntime(t, Options{Timeout: time.Minute}), "probe", m.probe)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := ctl.Get(ctx, t.TempDir(), controller.Kind{Kind: "loop"}, "ns", "n")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
}

// Modules are compiled once per digest; loads and calls run concurrently.
func TestCompiledOnceAndConcurrentCalls(t *testing.T) {
	m := modules(t)
	r := newRuntime(t, Options{})
	var wg sync.WaitGroup
	ctls := make([]*Controller, 4)
	errs := make([]error, len(ctls))
	for i := range ctls {
		wg.Go(func() { ctls[i], errs[i] = r.Load(context.Background(), "yaml-tree", m.example) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(r.compiled); n != 1 {
		t.Fatalf("%d compiled modules for one digest", n)
	}
	for _, c := range ctls[1:] {
		if c.mod != ctls[0].mod || c.Digest() != ctls[0].Digest() {
			t.Fatal("a second load compiled the module again")
		}
	}

	root := t.TempDir()
	ctx := context.Background()
	for i := range 8 {
		if err := ctls[0].Put(ctx, root, widget, resource("ns", "w"+string(rune('a'+i)), nil)); err != nil {
			t.Fatal(err)
		}
	}
	errs = make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = ctls[i%len(ctls)].Get(ctx, root, widget, "ns", "w"+string(rune('a'+i%8)))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	r := newRuntime(t, Options{})
	for _, tc := range []struct {
		name, module, want string
	}{
		{"not wasm", "hello", `wasm controller "bad": load: compile:`},
		// The smallest valid module: no _start, so not a command.
		{"no _start", "\x00asm\x01\x00\x00\x00", "not a WASI command"},
		// A command importing env.f besides WASI: a host function cairn does not give.
		{"foreign import", "\x00asm\x01\x00\x00\x00" +
			"\x01\x04\x01\x60\x00\x00" + // type 0: () -> ()
			"\x02\x09\x01\x03env\x01f\x00\x00" + // import env.f: type 0
			"\x03\x02\x01\x00" + // function 1: type 0
			"\x07\x0a\x01\x06_start\x00\x01" + // export _start = function 1
			"\x0a\x04\x01\x02\x00\x0b", // its body: end
			"imports env.f; a controller may import only wasi_snapshot_preview1"},
	} {
		_, err := r.Load(context.Background(), "bad", []byte(tc.module))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if len(r.compiled) != 0 {
		t.Errorf("failed compilations are cached: %d", len(r.compiled))
	}
}

// A call cannot see what an earlier call left in memory or in its tree:
// every call runs in an instance of its own (held ones included, see
// warm.go). The probe keeps a secret in package variables, on its heap
// and in a file of its tree, and counts the copies in its memory (at least
// the two it made, which shows the count works); the next call, served by
// a held instance, looks for the secret everywhere it can.
func TestNoStateLeaksBetweenCalls(t *testing.T) {
	m := modules(t)
	ctx := context.Background()
	for _, warm := range []int{0, -1} {
		ctl := load(t, newRuntime(t, Options{WarmInstances: warm}), "probe", m.probe)
		rootA, rootB := t.TempDir(), t.TempDir()
		for i := range 2 {
			secret := fmt.Sprintf("cairn-secret-%d-%d-a1b2c3d4e5f6", warm, i)
			err := ctl.Delete(ctx, rootA, controller.Kind{Kind: "remember"}, secret, "x")
			var n int
			if err == nil || !strings.Contains(err.Error(), "remembered: ") {
				t.Fatalf("remember: %v", err)
			}
			if _, serr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "remembered: "):], "remembered: %d copies", &n); serr != nil || n < 2 {
				t.Fatalf("remember found %d copies of what it kept (%v): the scan does not work", n, err)
			}
			if b, err := os.ReadFile(filepath.Join(rootA, "remembered.txt")); err != nil || string(b) != secret {
				t.Fatalf("the tree of the remembering call has %q, %v", b, err)
			}
			if warm >= 0 { // the next call takes a held instance
				waitFull(t, ctl)
			}
			out, err := ctl.Get(ctx, rootB, controller.Kind{Kind: "recall"}, reverse(secret), "x")
			if err != nil {
				t.Fatal(err)
			}
			var seen struct {
				Kept   int    `json:"kept"`
				Copies int    `json:"copies"`
				File   string `json:"file"`
				Ls     string `json:"ls"`
			}
			if err := json.Unmarshal(out, &seen); err != nil {
				t.Fatal(err)
			}
			if seen.Kept != 0 || seen.Copies != 0 || !strings.HasPrefix(seen.File, "error: ") || seen.Ls != "entries: " {
				t.Errorf("warm=%d call %d sees the previous call's state: %s", warm, i, out)
			}
		}
	}
}

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// waitFull waits until c's pool holds as many instances as it can.
func waitFull(t *testing.T, c *Controller) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(c.pool) < cap(c.pool) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d of %d instances after 30 s", len(c.pool), cap(c.pool))
		}
		time.Sleep(time.Millisecond)
	}
}
