package wasm

import (
	"context"
	"crypto/rand"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// Warm instances.
//
// Most of a call to a Go module happens before its main runs: instantiation
// (wazero copies the module's data segments and function table into a fresh
// instance) and the Go runtime's start (heap, scheduler, growing memory).
// The Go runtime asks for its arguments (args_sizes_get) only at the end of
// that start, and nothing before that depends on the call. So a controller
// starts instances ahead of its calls and holds each one inside that
// question; a call binds its arguments, environment, stdin, stdout and tree
// to a held instance and lets it go on. An instance serves exactly one call
// and is closed after it: each call still runs in memory no other call has
// touched, so nothing can leak from one call to the next, by construction.
//
// A module that touches stdio or files, or finishes, before asking for its
// arguments or environment (not a Go module, say) cannot be held that way;
// the controller notices at its first warm-up and from then on starts an
// instance per call with everything bound up front, as before.

// The WASI functions cairn answers itself, from the call bound to the
// instance, instead of from the module's configuration.
const (
	argsSizesGet    = "args_sizes_get"
	argsGet         = "args_get"
	environSizesGet = "environ_sizes_get"
	environGet      = "environ_get"
)

// asksAgainExport is the export by which a module says that it asks for
// its arguments and environment again once started (sdk/controller does).
const asksAgainExport = "cairn_controller_v1"

// WASI errno values (wasi_snapshot_preview1 "errno").
const (
	errnoSuccess  = 0
	errnoCanceled = 11
	errnoFault    = 21
)

// instantiateWASI instantiates WASI preview 1 with the argument and
// environment functions replaced by ones reading the instance's binding.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	b := rt.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	i32 := api.ValueTypeI32
	for name, fn := range map[string]api.GoModuleFunc{
		argsSizesGet:    func(ctx context.Context, mod api.Module, stack []uint64) { sizesGet(ctx, mod, stack, argsOf, false) },
		argsGet:         func(ctx context.Context, mod api.Module, stack []uint64) { valuesGet(ctx, mod, stack, argsOf) },
		environSizesGet: func(ctx context.Context, mod api.Module, stack []uint64) { sizesGet(ctx, mod, stack, envOf, true) },
		environGet:      func(ctx context.Context, mod api.Module, stack []uint64) { valuesGet(ctx, mod, stack, envOf) },
	} {
		b.NewFunctionBuilder().WithGoModuleFunction(fn, []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func argsOf(b *binding) []string { return b.args }
func envOf(b *binding) []string  { return b.env }

// sizesGet writes the number of values and the bytes they take with their
// NUL terminators (args_sizes_get, environ_sizes_get).
func sizesGet(ctx context.Context, mod api.Module, stack []uint64, values func(*binding) []string, environ bool) {
	b, errno := awaitBinding(ctx, environ)
	if errno != errnoSuccess {
		stack[0] = errno
		return
	}
	vals := values(b)
	size := 0
	for _, v := range vals {
		size += len(v) + 1
	}
	mem := mod.Memory()
	if !mem.WriteUint32Le(uint32(stack[0]), uint32(len(vals))) || !mem.WriteUint32Le(uint32(stack[1]), uint32(size)) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// valuesGet writes the values, NUL-terminated, one after the other from
// the buffer offset, and the offset of each in the pointer array
// (args_get, environ_get).
func valuesGet(ctx context.Context, mod api.Module, stack []uint64, values func(*binding) []string) {
	b, errno := awaitBinding(ctx, false)
	if errno != errnoSuccess {
		stack[0] = errno
		return
	}
	ptrs, buf := uint32(stack[0]), uint32(stack[1])
	mem := mod.Memory()
	for i, v := range values(b) {
		if !mem.WriteUint32Le(ptrs+4*uint32(i), buf) || !mem.WriteString(buf, v) || !mem.WriteByte(buf+uint32(len(v)), 0) {
			stack[0] = errnoFault
			return
		}
		buf += uint32(len(v)) + 1
	}
	stack[0] = errnoSuccess
}

type instanceKey struct{}

// awaitBinding returns the call bound to the instance running in ctx,
// holding the instance until a call comes if none is bound yet. A module
// that asks again (sdk/controller's Main) gets placeholders while its
// runtime reads the arguments and environment at start-up, up to and
// including environ_sizes_get (which the Go runtime always calls, after
// the arguments), and is held when it asks again.
func awaitBinding(ctx context.Context, environSizes bool) (*binding, uint64) {
	inst, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		return nil, errnoCanceled // not a controller's instance: cannot happen
	}
	if inst.binding != nil { // only the module's goroutine gets here
		return inst.binding, errnoSuccess
	}
	if inst.asksAgain && !inst.startRead {
		if environSizes {
			inst.startRead = true
		}
		select {
		case b := <-inst.bind: // a fresh instance is bound from the start
			inst.binding = b
			return b, errnoSuccess
		default:
			return &inst.placeholder, errnoSuccess
		}
	}
	inst.holdOnce.Do(func() { close(inst.held) })
	select {
	case b := <-inst.bind:
		inst.binding = b
		return b, errnoSuccess
	case <-ctx.Done():
		return nil, errnoCanceled
	}
}

// binding is what one call gives the instance serving it.
type binding struct {
	args, env []string
}

// instance is one module instance serving one call.
type instance struct {
	cancel context.CancelCauseFunc // ends the instance wherever it is
	bind   chan *binding           // the call, sent once
	// held is closed when the module first asks for its arguments or
	// environment, done when _start has returned or instantiation failed.
	held, done chan struct{}
	holdOnce   sync.Once

	binding *binding // the module's goroutine's own copy

	// asksAgain: the module exports cairn_controller_v1 and asks for its
	// arguments again in main, so it is held there, after its start-up;
	// until then it reads placeholder (its name only, no environment).
	asksAgain   bool
	startRead   bool // the module's goroutine's own
	placeholder binding

	// Set before done is closed.
	mod api.Module
	err error // instantiation's error, or _start's

	// Late-bound stdio and tree: set by the call before it sends on bind.
	stdin          switchReader
	stdout, stderr switchWriter
	tree           switchFS
	early          atomic.Bool // stdio or the tree was used before bind
}

func (c *Controller) newInstance() *instance {
	inst := &instance{bind: make(chan *binding, 1), held: make(chan struct{}), done: make(chan struct{}),
		asksAgain: c.asksAgain, placeholder: binding{args: []string{c.name}, env: []string{}}}
	inst.stdin.inst, inst.stdout.inst, inst.stderr.inst, inst.tree.inst = inst, inst, inst, inst
	return inst
}

// start instantiates the controller's module and runs _start on a
// goroutine of its own; the module runs until it asks for its arguments,
// and on when the instance has been bound to a call.
func (c *Controller) start(inst *instance) {
	ctx, cancel := context.WithCancelCause(c.r.life)
	inst.cancel = cancel
	ctx = context.WithValue(ctx, instanceKey{}, inst)
	if c.r.alloc != nil {
		ctx = experimental.WithMemoryAllocator(ctx, c.r.alloc)
	}
	cfg := wazero.NewModuleConfig().
		WithName(""). // anonymous, so that concurrent calls can coexist
		WithStdin(&inst.stdin).
		WithStdout(&inst.stdout).
		WithStderr(&inst.stderr).
		WithFSConfig(wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(&inst.tree, "/")).
		WithSysWalltime().
		WithSysNanotime().
		// The default no-op sleep is kept on purpose: a real host sleep
		// cannot be interrupted by the deadline, so a module asleep for an
		// hour would hold the call for an hour.
		WithRandSource(rand.Reader).
		// _start is called below, so that the instance (and its memory
		// size) is still at hand when it fails.
		WithStartFunctions()
	c.r.wg.Add(1)
	go func() {
		defer c.r.wg.Done()
		defer close(inst.done)
		mod, err := c.r.rt.InstantiateModule(ctx, c.mod, cfg)
		if err != nil {
			inst.err = err
			return
		}
		inst.mod = mod
		_, inst.err = mod.ExportedFunction("_start").Call(ctx)
	}()
}

// bindTo gives the instance a call's stdio, tree and arguments. A held
// instance is waiting in awaitBinding, so the send orders these writes
// before the module's reads; a fresh one is bound before it starts.
func (inst *instance) bindTo(b *binding, stdin io.Reader, stdout, stderr io.Writer, tree experimentalsys.FS) {
	inst.stdin.r, inst.stdout.w, inst.stderr.w, inst.tree.fs = stdin, stdout, stderr, tree
	if d := inst.tree.dir; d != nil {
		f, errno := tree.OpenFile(".", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
		if errno != 0 {
			f = errDir{errno: errno}
		}
		d.File = f
	}
	inst.bind <- b
}

// close releases the instance after its call, or a held one never used.
func (inst *instance) close(ctx context.Context) {
	inst.cancel(context.Canceled)
	<-inst.done
	if inst.mod != nil {
		_ = inst.mod.Close(ctx)
	}
}

// held returns a held instance when the pool has one, else nil; the first
// call starts the pool. The caller starts the replacement (warmOne) when
// its call is done, so that the warm-up does not compete with the call.
func (c *Controller) held() *instance {
	if c.r.opts.WarmInstances > 0 && !c.cold.Load() {
		c.warmOnce.Do(func() {
			for range c.r.opts.WarmInstances {
				c.warmOne()
			}
		})
		select {
		case inst := <-c.pool:
			return inst
		default:
		}
	}
	return nil
}

// warmOne starts an instance and puts it in the pool once it is held.
func (c *Controller) warmOne() {
	c.r.wg.Add(1)
	go func() {
		defer c.r.wg.Done()
		inst := c.newInstance()
		c.start(inst)
		select {
		case <-inst.held:
		case <-inst.done:
		}
		if !inst.early.Load() && !isDone(inst.done) {
			select {
			case c.pool <- inst:
				return
			case <-c.r.life.Done():
			}
		} else if c.r.life.Err() == nil {
			// Finished or used stdio or files before asking for its
			// arguments: this module cannot be held.
			c.cold.Store(true)
		}
		inst.close(context.Background())
	}()
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// switchReader, switchWriter and switchFS are an instance's stdio and tree,
// bound to the call's when the call takes the instance. Before that they
// are empty, and using them marks the instance as one that cannot be held.
type switchReader struct {
	inst *instance
	r    io.Reader
}

func (s *switchReader) Read(p []byte) (int, error) {
	if s.r == nil {
		s.inst.early.Store(true)
		return 0, io.EOF
	}
	return s.r.Read(p)
}

type switchWriter struct {
	inst *instance
	w    io.Writer
}

func (s *switchWriter) Write(p []byte) (int, error) {
	if s.w == nil {
		s.inst.early.Store(true)
		return len(p), nil
	}
	return s.w.Write(p)
}

type switchFS struct {
	inst *instance
	fs   experimentalsys.FS
	dir  *switchDir // the mount's directory, if opened before binding
}

func (s *switchFS) get() experimentalsys.FS {
	if s.fs == nil {
		s.inst.early.Store(true)
		return experimentalsys.UnimplementedFS{}
	}
	return s.fs
}

func (s *switchFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if s.fs == nil && path == "." {
		// WASI opens the mount's own directory when the module looks for
		// its preopened directories (Go's syscall package does at start).
		s.dir = &switchDir{File: unboundDir{}}
		return s.dir, 0
	}
	return s.get().OpenFile(path, flag, perm)
}

// switchDir is the mount's directory as opened before the call is bound:
// a directory until then, the bound tree's own directory after (bindTo
// opens it while the module is held).
type switchDir struct {
	experimentalsys.File
}

// unboundDir is a directory that cannot be used yet.
type unboundDir struct {
	experimentalsys.UnimplementedFile
}

func (unboundDir) IsDir() (bool, experimentalsys.Errno) { return true, 0 }

// errDir is the mount's directory when the tree's could not be opened.
type errDir struct {
	experimentalsys.UnimplementedFile
	errno experimentalsys.Errno
}

func (d errDir) IsDir() (bool, experimentalsys.Errno) { return true, 0 }
func (d errDir) Stat() (sys.Stat_t, experimentalsys.Errno) {
	return sys.Stat_t{}, d.errno
}
func (d errDir) Readdir(int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	return nil, d.errno
}
func (s *switchFS) Lstat(path string) (sys.Stat_t, experimentalsys.Errno) {
	return s.get().Lstat(path)
}
func (s *switchFS) Stat(path string) (sys.Stat_t, experimentalsys.Errno) { return s.get().Stat(path) }
func (s *switchFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	return s.get().Mkdir(path, perm)
}
func (s *switchFS) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	return s.get().Chmod(path, perm)
}
func (s *switchFS) Rename(from, to string) experimentalsys.Errno  { return s.get().Rename(from, to) }
func (s *switchFS) Rmdir(path string) experimentalsys.Errno       { return s.get().Rmdir(path) }
func (s *switchFS) Unlink(path string) experimentalsys.Errno      { return s.get().Unlink(path) }
func (s *switchFS) Link(from, to string) experimentalsys.Errno    { return s.get().Link(from, to) }
func (s *switchFS) Symlink(from, to string) experimentalsys.Errno { return s.get().Symlink(from, to) }
func (s *switchFS) Readlink(path string) (string, experimentalsys.Errno) {
	return s.get().Readlink(path)
}
func (s *switchFS) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	return s.get().Utimens(path, atim, mtim)
}
