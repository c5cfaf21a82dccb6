// Package wasm runs WASM controllers: WASI (wasip1) modules that decide
// where and how a Git storage backend's resources live in the repository
// tree, speaking cup's process protocol (seed 003, "WASM/WASI Process
// Interface"). A Controller implements backend/controller.Controller by
// running the module once per call under wazero, a pure-Go runtime:
//
//	get    <kind> <namespace> <name>         stdout: the resource (a JSON object)
//	list   <kind> <namespace> [key=value..]  stdout: a JSON array of resources
//	                                         (a stream of objects is accepted too)
//	put    <kind>                            stdin: the resource; stdout ignored
//	delete <kind> <namespace> <name>         stdout ignored
//
// argv[0] is the controller's name. The kind argument is the Kind name; the
// group and version are in the environment as CUP_GROUP and CUP_VERSION
// (cup's argument list has no place for them). List with namespace "" asks
// for every namespace and passes "" as the argument. Exit code 0 is success,
// 1 an error with {"message": "..."} on stdout ("code": "Invalid" is honoured,
// a cairn extension), 2 not found (cairn.CodeNotFound) with such a message;
// for list, 2 is an empty list, as Kubernetes answers a list of nothing.
// An exit 2 without a message on stdout is a crash, not "not found" (the Go
// runtime exits 2 when it panics or runs out of memory), unless stdout is
// empty and stderr holds a message that is no runtime's crash report: cup's
// Go SDK reports not found so.
//
// The root directory is mounted at "/", read-only for get and list and
// writable for put and delete; nothing else of the host is visible, not even
// through symlinks in the tree. The module has no network (WASI preview 1
// has no way to open a socket and no host functions are added). Every call
// has a memory limit, a time limit and caps on stdout and stderr; a module
// that traps, exceeds one of them, or never returns gives an error naming
// the controller and the operation, wrapping ErrTimeout, ErrMemoryLimit,
// ErrOutputLimit, ErrCrashed or ErrProtocol.
package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
)

// Errors a call wraps when the module misbehaves, for errors.Is.
var (
	ErrTimeout     = errors.New("time limit exceeded")
	ErrMemoryLimit = errors.New("memory limit exceeded")
	ErrOutputLimit = errors.New("stdout limit exceeded")
	ErrCrashed     = errors.New("module crashed")
	ErrProtocol    = errors.New("module broke the controller protocol")
)

// Defaults for the zero Options.
const (
	DefaultMemoryLimit = 64 << 20
	DefaultTimeout     = 10 * time.Second
	DefaultMaxStdout   = 16 << 20
	DefaultMaxStderr   = 64 << 10
	// DefaultWarmInstances: two, so that a call finds one ready while the
	// replacement of the one before it is still starting.
	DefaultWarmInstances = 2
)

const pageSize = 64 << 10 // a WebAssembly memory page

// Options limit every call of every controller of a Runtime.
type Options struct {
	// MemoryLimit caps a module instance's linear memory, in bytes (rounded
	// up to 64 KiB pages). A module whose initial memory is larger does not
	// load.
	MemoryLimit uint64
	// Timeout bounds one call, instantiation included.
	Timeout time.Duration
	// MaxStdout is the most a call may write to stdout; a module writing
	// more is stopped. MaxStderr is how much of stderr is kept for error
	// messages; the rest is dropped.
	MaxStdout int
	MaxStderr int
	// CacheDir, when set, keeps compiled code on disk so that another
	// process (or a restart) skips compilation. Compiled modules are cached
	// in memory across calls either way.
	CacheDir string
	// WarmInstances is how many instances each controller keeps started
	// ahead of its calls, held where the module asks for its arguments
	// (see warm.go); each serves one call. 0 means DefaultWarmInstances,
	// a negative number none: every call starts its own instance.
	WarmInstances int
}

func (o Options) withDefaults() Options {
	if o.MemoryLimit == 0 {
		o.MemoryLimit = DefaultMemoryLimit
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxStdout <= 0 {
		o.MaxStdout = DefaultMaxStdout
	}
	if o.MaxStderr <= 0 {
		o.MaxStderr = DefaultMaxStderr
	}
	switch {
	case o.WarmInstances == 0:
		o.WarmInstances = DefaultWarmInstances
	case o.WarmInstances < 0:
		o.WarmInstances = 0
	}
	return o
}

// Runtime compiles and runs controllers. It is safe for concurrent use;
// one per process is enough. Close it to release compiled code.
type Runtime struct {
	opts  Options
	rt    wazero.Runtime
	cache wazero.CompilationCache
	alloc experimental.MemoryAllocator // instances' linear memory (memory_unix.go); nil: wazero's own

	mu       sync.Mutex
	compiled map[[sha256.Size]byte]*compileResult

	// life ends when the Runtime is closed, and with it every instance;
	// wg counts the goroutines running or warming instances.
	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// compileResult is one module digest's compilation, shared by every
// controller loaded from the same bytes; ready is closed when it is done.
type compileResult struct {
	ready chan struct{}
	mod   wazero.CompiledModule
	err   error
}

// NewRuntime returns a Runtime with opts' limits.
func NewRuntime(ctx context.Context, opts Options) (*Runtime, error) {
	opts = opts.withDefaults()
	pages := (opts.MemoryLimit + pageSize - 1) / pageSize
	if pages > 65536 {
		return nil, fmt.Errorf("wasm: memory limit %d bytes is over the 4 GiB a wasm32 module can address", opts.MemoryLimit)
	}
	var cache wazero.CompilationCache
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache in %s: %w", opts.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(uint32(pages)).
		// Without this a module in an endless loop would keep its call
		// running past the deadline.
		WithCloseOnContextDone(true)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	// WASI preview 1 is the only host module: it has no socket creation,
	// so a controller cannot reach the network.
	if err := instantiateWASI(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		_ = cache.Close(ctx)
		return nil, fmt.Errorf("wasm: instantiate WASI: %w", err)
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	return &Runtime{opts: opts, rt: rt, cache: cache, compiled: map[[sha256.Size]byte]*compileResult{}, life: life, stop: stop,
		// Kept reservations: the held instances' replacements, and a spare.
		alloc: memoryAllocator(opts.WarmInstances + 1)}, nil
}

// Close ends every instance and releases every compiled module;
// controllers of r stop working.
func (r *Runtime) Close(ctx context.Context) error {
	r.stop()
	r.wg.Wait()
	err := errors.Join(r.rt.Close(ctx), r.cache.Close(ctx))
	if a, ok := r.alloc.(interface{ close() }); ok {
		a.close()
	}
	return err
}

// Load returns a controller running module (a WASI command, e.g. built with
// GOOS=wasip1 GOARCH=wasm). name appears in argv[0] and in error messages.
// Modules are compiled once per digest, however many times they are loaded.
func (r *Runtime) Load(ctx context.Context, name string, module []byte) (*Controller, error) {
	digest := sha256.Sum256(module)
	r.mu.Lock()
	res, ok := r.compiled[digest]
	if !ok {
		res = &compileResult{ready: make(chan struct{})}
		r.compiled[digest] = res
	}
	r.mu.Unlock()
	if !ok {
		res.mod, res.err = r.compile(ctx, module)
		if res.err != nil {
			// Forget the failure so that a later Load (e.g. after a
			// cancelled context) tries again.
			r.mu.Lock()
			delete(r.compiled, digest)
			r.mu.Unlock()
		}
		close(res.ready)
	}
	select {
	case <-res.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("wasm controller %q: load: %w", name, ctx.Err())
	}
	if res.err != nil {
		return nil, fmt.Errorf("wasm controller %q: load: %w", name, res.err)
	}
	_, asksAgain := res.mod.ExportedFunctions()[asksAgainExport]
	return &Controller{r: r, name: name, mod: res.mod, digest: fmt.Sprintf("sha256:%x", digest),
		pool: make(chan *instance, r.opts.WarmInstances), asksAgain: asksAgain}, nil
}

// LoadFile loads the module at path; when wantSHA256 is not empty the
// file's digest must match it (hex), so a backend's configuration pins the
// exact controller it runs.
func (r *Runtime) LoadFile(ctx context.Context, path, wantSHA256 string) (*Controller, error) {
	module, err := os.ReadFile(path)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "wasm: read controller module: %w", err)
	}
	if wantSHA256 != "" {
		sum := sha256.Sum256(module)
		if got := hex.EncodeToString(sum[:]); !strings.EqualFold(got, wantSHA256) {
			return nil, cairn.Errorf(cairn.CodeInvalid, "wasm: controller module %s has SHA-256 %s, the configuration pins %s", path, got, wantSHA256)
		}
	}
	return r.Load(ctx, filepath.Base(path), module)
}

func (r *Runtime) compile(ctx context.Context, module []byte) (wazero.CompiledModule, error) {
	mod, err := r.rt.CompileModule(ctx, module)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	if _, ok := mod.ExportedFunctions()["_start"]; !ok {
		_ = mod.Close(ctx)
		return nil, fmt.Errorf("%w: not a WASI command (no _start export); build it as a program (package main)", ErrProtocol)
	}
	// Refuse other imports here rather than on every call: WASI preview 1
	// is all a controller gets (no sockets, no host functions).
	for _, fn := range mod.ImportedFunctions() {
		if module, name, _ := fn.Import(); module != wasi_snapshot_preview1.ModuleName {
			_ = mod.Close(ctx)
			return nil, fmt.Errorf("%w: imports %s.%s; a controller may import only %s", ErrProtocol, module, name, wasi_snapshot_preview1.ModuleName)
		}
	}
	return mod, nil
}

// Controller runs one module; it implements controller.Controller.
type Controller struct {
	r      *Runtime
	name   string
	mod    wazero.CompiledModule
	digest string

	pool     chan *instance // held instances, ready for a call
	warmOnce sync.Once      // the first call starts the pool's warm-up
	cold     atomic.Bool    // the module cannot be held: start one per call
	// asksAgain: the module exports asksAgainExport (see warm.go)
	asksAgain bool
}

var _ controller.Controller = (*Controller)(nil)

// Digest is the module's sha256 digest, "sha256:<hex>".
func (c *Controller) Digest() string { return c.digest }

// Get runs `get <kind> <namespace> <name>` with root mounted read-only.
func (c *Controller) Get(ctx context.Context, root string, kind controller.Kind, namespace, name string) (json.RawMessage, error) {
	out, err := c.call(ctx, request{op: "get", root: root, kind: kind, args: []string{namespace, name}, subject: namespace + "/" + name})
	if err != nil {
		return nil, err
	}
	if !isObject(out) {
		return nil, c.errorf("get", kind, namespace+"/"+name, "%w: stdout is not a JSON object: %s", ErrProtocol, excerpt(out))
	}
	return json.RawMessage(bytes.TrimSpace(out)), nil
}

// List runs `list <kind> <namespace> [key=value ...]` with root mounted
// read-only; label pairs are passed sorted by key.
func (c *Controller) List(ctx context.Context, root string, kind controller.Kind, namespace string, labels map[string]string) ([]json.RawMessage, error) {
	args := []string{namespace}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k == "" || strings.Contains(k, "=") {
			return nil, cairn.Errorf(cairn.CodeInvalid, "wasm controller %q: list %s: label key %q cannot be passed as key=value", c.name, kind.Kind, k)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, k+"="+labels[k])
	}
	out, err := c.call(ctx, request{op: "list", root: root, kind: kind, args: args, subject: namespace})
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return []json.RawMessage{}, nil
	}
	if err != nil {
		return nil, err
	}
	items, perr := parseList(out)
	if perr != nil {
		return nil, c.errorf("list", kind, namespace, "%w: %w", ErrProtocol, perr)
	}
	return items, nil
}

// Put runs `put <kind> <namespace> <name>` with the resource on stdin and
// root mounted writable. The seed's protocol has `put <kind>`; cup's
// runtime passes the resource's namespace and name too, and controllers
// built with cup's Go SDK read them (and fail without them), while a
// controller of the seed's form has no use for more arguments.
func (c *Controller) Put(ctx context.Context, root string, kind controller.Kind, resource json.RawMessage) error {
	if !isObject(resource) {
		return cairn.Errorf(cairn.CodeInvalid, "wasm controller %q: put %s: the resource is not a JSON object", c.name, kind.Kind)
	}
	ns, name := metadataOf(resource)
	_, err := c.call(ctx, request{op: "put", root: root, kind: kind, args: []string{ns, name}, stdin: resource, writable: true, subject: ns + "/" + name})
	return err
}

// Delete runs `delete <kind> <namespace> <name>` with root mounted writable.
func (c *Controller) Delete(ctx context.Context, root string, kind controller.Kind, namespace, name string) error {
	_, err := c.call(ctx, request{op: "delete", root: root, kind: kind, args: []string{namespace, name}, writable: true, subject: namespace + "/" + name})
	return err
}

type request struct {
	op       string
	root     string
	kind     controller.Kind
	args     []string
	stdin    []byte
	writable bool
	subject  string // namespace/name for messages
}

// call runs the module once and returns its stdout when it exits 0. Exit 1
// and 2 become *cairn.Error with the module's message; everything else is
// an error wrapping one of the package's sentinels.
func (c *Controller) call(ctx context.Context, req request) ([]byte, error) {
	opts := c.r.opts
	if req.kind.Kind == "" {
		return nil, cairn.Errorf(cairn.CodeInvalid, "wasm controller %q: %s: no kind", c.name, req.op)
	}
	root, err := os.OpenRoot(req.root)
	if err != nil {
		return nil, c.errorf(req.op, req.kind, req.subject, "open the tree: %w", err)
	}
	defer root.Close()

	callCtx, cancelTimeout := context.WithTimeoutCause(ctx, opts.Timeout, ErrTimeout)
	defer cancelTimeout()
	callCtx, cancel := context.WithCancelCause(callCtx)
	defer cancel(nil)

	// Cancelling on overflow stops a module that floods stdout at once,
	// rather than when the time limit comes.
	stdout := &cappedWriter{max: opts.MaxStdout, onOverflow: func() { cancel(ErrOutputLimit) }}
	stderr := &cappedWriter{max: opts.MaxStderr, quiet: true}
	fsys := newConfinedFS(root, req.root, req.writable)
	b := &binding{
		args: append([]string{c.name, req.op, req.kind.Kind}, req.args...),
		env:  []string{"CUP_GROUP=" + req.kind.Group, "CUP_VERSION=" + req.kind.Version},
	}
	inst := c.held()
	if inst != nil {
		// The pool keeps its size: a replacement starts after this call.
		defer c.warmOne()
		inst.bindTo(b, bytes.NewReader(req.stdin), stdout, stderr, fsys)
	} else {
		inst = c.newInstance()
		inst.bindTo(b, bytes.NewReader(req.stdin), stdout, stderr, fsys)
		c.start(inst)
	}
	// The instance runs under a context of the Runtime's (it may have
	// been started before this call); the call's limits reach it here.
	stop := context.AfterFunc(callCtx, func() { inst.cancel(context.Cause(callCtx)) })
	defer stop()
	<-inst.done
	// Closing frees the instance's memory; the answer does not wait for it.
	c.r.wg.Add(1)
	defer func() {
		go func() {
			defer c.r.wg.Done()
			inst.close(context.WithoutCancel(ctx))
		}()
	}()
	if inst.mod == nil {
		return nil, c.errorf(req.op, req.kind, req.subject, "instantiate: %w", c.contextErr(ctx, callCtx, inst.err))
	}
	runErr := inst.err
	used := memorySize(inst.mod)

	if stdout.overflow {
		return nil, c.errorf(req.op, req.kind, req.subject, "%w: wrote more than %d bytes to stdout", ErrOutputLimit, opts.MaxStdout)
	}
	exitCode := uint32(0)
	var exitErr *sys.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exitErr):
		exitCode = exitErr.ExitCode()
	default: // a trap: unreachable, out-of-bounds access, stack overflow...
		if c.nearMemoryLimit(used, stderr.buf.Bytes()) {
			return nil, c.errorf(req.op, req.kind, req.subject, "%w (%s of %s when it trapped): %v%s", ErrMemoryLimit, mib(used), mib(c.r.opts.MemoryLimit), runErr, stderrNote(stderr))
		}
		return nil, c.errorf(req.op, req.kind, req.subject, "%w: %v%s", ErrCrashed, runErr, stderrNote(stderr))
	}
	if exitCode == sys.ExitCodeContextCanceled || exitCode == sys.ExitCodeDeadlineExceeded {
		err := c.contextErr(ctx, callCtx, runErr)
		if errors.Is(err, ErrTimeout) {
			return nil, c.errorf(req.op, req.kind, req.subject, "%w: still running after %s", ErrTimeout, opts.Timeout)
		}
		return nil, c.errorf(req.op, req.kind, req.subject, "%w", err)
	}

	out := stdout.buf.Bytes()
	switch exitCode {
	case 0:
		return out, nil
	case 1, 2:
		msg, ok := parseMessage(out)
		if !ok {
			if c.nearMemoryLimit(used, stderr.buf.Bytes()) {
				return nil, c.errorf(req.op, req.kind, req.subject, "%w (%s of %s when it exited with code %d)%s", ErrMemoryLimit, mib(used), mib(c.r.opts.MemoryLimit), exitCode, stderrNote(stderr))
			}
			if msg, ok := stderrNotFound(exitCode, out, stderr.buf.Bytes()); ok {
				return nil, &cairn.Error{Code: cairn.CodeNotFound, Msg: fmt.Sprintf("wasm controller %q: %s %s %s: %s", c.name, req.op, req.kind.Kind, req.subject, msg)}
			}
			return nil, c.errorf(req.op, req.kind, req.subject, "%w: exit code %d without a JSON message on stdout (stdout: %s)%s", ErrCrashed, exitCode, excerpt(out), stderrNote(stderr))
		}
		code := cairn.CodeInternal
		switch {
		case exitCode == 2:
			code = cairn.CodeNotFound
		case msg.Code == string(cairn.CodeInvalid):
			code = cairn.CodeInvalid
		}
		return nil, &cairn.Error{Code: code, Msg: fmt.Sprintf("wasm controller %q: %s %s %s: %s", c.name, req.op, req.kind.Kind, req.subject, msg.Message)}
	default:
		if c.nearMemoryLimit(used, stderr.buf.Bytes()) {
			return nil, c.errorf(req.op, req.kind, req.subject, "%w (%s of %s when it exited with code %d)%s", ErrMemoryLimit, mib(used), mib(c.r.opts.MemoryLimit), exitCode, stderrNote(stderr))
		}
		return nil, c.errorf(req.op, req.kind, req.subject, "%w: exit code %d%s", ErrCrashed, exitCode, stderrNote(stderr))
	}
}

// contextErr tells the caller's cancellation apart from this package's
// own limits, both of which reach the module as a done context.
func (c *Controller) contextErr(ctx, callCtx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if cause := context.Cause(callCtx); cause != nil {
		return cause
	}
	return err
}

// nearMemoryLimit guesses whether a failed module ran out of memory. wazero
// refuses memory.grow past the limit without telling the host, and the
// module then fails its own way (Go prints "out of memory" and exits 2, Rust
// aborts with a trap), so the evidence is a failure with memory within one
// Go heap arena (4 MiB) of the limit, or the runtime saying so on stderr.
func (c *Controller) nearMemoryLimit(used uint64, stderr []byte) bool {
	return used+4<<20 > c.r.opts.MemoryLimit || bytes.Contains(stderr, []byte("out of memory"))
}

func memorySize(mod api.Module) uint64 {
	if m := mod.Memory(); m != nil {
		return uint64(m.Size())
	}
	return 0
}

func (c *Controller) errorf(op string, kind controller.Kind, subject, format string, args ...any) error {
	return fmt.Errorf("wasm controller %q: %s %s %s: %w", c.name, op, kind.Kind, subject, fmt.Errorf(format, args...))
}

type message struct {
	Message string `json:"message"`
	Code    string `json:"code"`
}

func parseMessage(out []byte) (message, bool) {
	var m message
	if !isObject(out) || json.Unmarshal(out, &m) != nil || m.Message == "" {
		return m, false
	}
	return m, true
}

// parseList accepts the JSON array cup's diagram shows, or a stream of
// objects (the table says "resource stream").
func parseList(out []byte) ([]json.RawMessage, error) {
	out = bytes.TrimSpace(out)
	items := []json.RawMessage{}
	if len(out) == 0 {
		return items, nil
	}
	if out[0] == '[' {
		if err := json.Unmarshal(out, &items); err != nil {
			return nil, fmt.Errorf("stdout is not a JSON array: %w", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var item json.RawMessage
			if err := dec.Decode(&item); err != nil {
				return nil, fmt.Errorf("stdout is not a JSON array or stream of objects: %w", err)
			}
			items = append(items, item)
		}
	}
	for i, item := range items {
		if !isObject(item) {
			return nil, fmt.Errorf("item %d is not a JSON object: %s", i, excerpt(item))
		}
	}
	return items, nil
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// metadataOf is a resource's namespace and name, empty when it has none
// (the module validates the resource).
func metadataOf(resource []byte) (namespace, name string) {
	var doc struct {
		Metadata struct{ Namespace, Name string } `json:"metadata"`
	}
	_ = json.Unmarshal(resource, &doc)
	return doc.Metadata.Namespace, doc.Metadata.Name
}

func excerpt(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "(empty)"
	}
	const max = 200
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// stderrNotFound reads an exit 2 with nothing on stdout and a message on
// stderr as not found: cup's Go SDK reports it so. A Go runtime's crash
// also exits 2, with its report on stderr ("panic: ", "fatal error: ",
// then the goroutines), and an exit 2 that says nothing may be any crash:
// both stay crashes.
func stderrNotFound(exitCode uint32, stdout, stderr []byte) (string, bool) {
	msg := bytes.TrimSpace(stderr)
	if exitCode != 2 || len(bytes.TrimSpace(stdout)) != 0 || len(msg) == 0 {
		return "", false
	}
	for _, crash := range [][]byte{[]byte("panic: "), []byte("fatal error: "), []byte("runtime: ")} {
		if bytes.HasPrefix(msg, crash) || bytes.Contains(msg, append([]byte("\n"), crash...)) {
			return "", false
		}
	}
	if bytes.Contains(msg, []byte("\ngoroutine ")) {
		return "", false
	}
	const max = 1 << 10
	if len(msg) > max {
		msg = msg[:max]
	}
	return string(msg), true
}

func stderrNote(w *cappedWriter) string {
	b := bytes.TrimSpace(w.buf.Bytes())
	if len(b) == 0 {
		return ""
	}
	const max = 1 << 10
	if len(b) > max {
		b = b[:max]
	}
	return "; stderr: " + string(b)
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// cappedWriter buffers at most max bytes. Past that it records the
// overflow and either drops the rest quietly (stderr, kept for messages
// only) or fails the write and calls onOverflow (stdout, where a truncated
// answer must not be mistaken for a whole one). A module is single
// threaded, so no lock is needed.
type cappedWriter struct {
	buf        bytes.Buffer
	max        int
	quiet      bool
	overflow   bool
	onOverflow func()
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if len(p) <= room {
		return w.buf.Write(p)
	}
	if room > 0 {
		w.buf.Write(p[:room])
	}
	if !w.overflow {
		w.overflow = true
		if w.onOverflow != nil {
			w.onOverflow()
		}
	}
	if w.quiet {
		return len(p), nil
	}
	return max(room, 0), ErrOutputLimit
}
