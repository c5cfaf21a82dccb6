package sqlite

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The writer's connection opens the database through walVFSName, a VFS over
// SQLite's own (unix) that writes a transaction's WAL frames to the file in
// one pwrite at its commit, where SQLite writes each frame's 24-byte header
// and its page with a write each: two syscalls per page the transaction
// changed (12–15% of a create's CPU under load, 17 pages for a lone create).
//
// Frames are held only until the transaction's commit frame is complete,
// and SQLite makes a commit visible to readers only after that write
// returns (it then updates the WAL index in shared memory), so no reader,
// in this process or another, can see a frame before it is in the file;
// a process killed with frames held dies as if before their writes. Every
// other call on the WAL file (a read back of a spilled page, a sync, the
// size, a truncate, a file control, close) writes what is held first, and a
// write that does not follow the held bytes writes them before its own, so
// the file sees the same writes in the same order as without the VFS, only
// fewer calls. A transaction larger than walHoldMax is written in pieces,
// and so is anything over walWriteMax.
//
// Frames held when a transaction ends without its commit (rolled back
// after SQLite spilled pages to the WAL) are frames SQLite would have
// written past the last commit, which no reader reads; they are dropped
// when the connection releases the WAL's write lock (on the database
// file, whose xShmLock the VFS therefore sees too), before any other
// connection can write where they would have gone.
//
// VFS registration is process-wide in SQLite, so the VFS and its method
// table are package variables, registered once; the state of an open WAL
// file lives in SQLite's memory for it (walFile), never in Go's heap.
const (
	walVFSName = "cairn-wal"
	walHoldMax = 1 << 20 // bytes held before they are written anyway
	// walWriteMax is the most the unix VFS writes in one call: it keeps
	// the low 17 bits of a write's length (seekAndWriteFd).
	walWriteMax = 0x1f000
	walFrameHd  = 24 // a WAL frame's header; the WAL's own header is 32
)

var (
	walOnce     sync.Once
	walErr      error
	walVFS      sqlite3.Tsqlite3_vfs // ours: the default VFS with walOpen
	walBaseVFS  uintptr              // SQLite's default VFS
	walBaseOpen uintptr              // its xOpen
	walMethods  sqlite3.Tsqlite3_io_methods
	walName     = [...]byte{'c', 'a', 'i', 'r', 'n', '-', 'w', 'a', 'l', 0}
	// walSyncs counts the syncs of WAL files (for tests: SyncFull
	// syncs at every commit, SyncNormal only at checkpoints).
	walSyncs atomic.Int64
	// walOpenFiles finds the WAL files of a database file at the release
	// of its write lock.
	walOpenFiles = struct {
		sync.Mutex
		wals     map[string][]uintptr // WAL path: its open walFiles
		dbs      map[uintptr]string   // database walFile: its WAL's path
		releases int                  // write locks released (for tests)
	}{wals: map[string][]uintptr{}, dbs: map[uintptr]string{}}
)

// The lock SQLite takes on the WAL index (a database file's xShmLock) to
// write to the WAL: slot 0 (WAL_WRITE_LOCK in wal.c).
const walWriteLock = 0

// walFile is the head of an open WAL or database file in the memory
// SQLite gives the VFS for it: the methods SQLite calls, what is held (a
// WAL's frames; a database file holds nothing), and the default VFS's
// methods for its own file, which follows the head.
type walFile struct {
	methods uintptr // &walMethods
	base    uintptr // the default VFS's methods of the file at pFile+walHead
	buf     uintptr // held bytes, SQLite memory of cap bytes
	n, cap  int64
	off     int64 // the file offset of buf's first byte
	commit  int64 // 1: the last write was a commit frame's header
	wal     int64 // 1: a WAL (its writes are held); 0: the database file
}

const walHead = int32(unsafe.Sizeof(walFile{}))

// registerWALVFS registers walVFSName once per process.
func registerWALVFS() error {
	walOnce.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		walBaseVFS = sqlite3.Xsqlite3_vfs_find(tls, 0)
		if walBaseVFS == 0 {
			walErr = fmt.Errorf("sqlite: no default VFS to write the WAL through")
			return
		}
		base := (*sqlite3.Tsqlite3_vfs)(ptr(walBaseVFS))
		walVFS = *base
		walVFS.FpNext = 0
		walVFS.FzName = uintptr(unsafe.Pointer(&walName[0]))
		walVFS.FszOsFile = base.FszOsFile + walHead
		walBaseOpen = base.FxOpen
		walVFS.FxOpen = funcPtr(walOpen)

		walMethods = sqlite3.Tsqlite3_io_methods{
			FiVersion:               3,
			FxClose:                 funcPtr(walClose),
			FxRead:                  funcPtr(walRead),
			FxWrite:                 funcPtr(walWrite),
			FxTruncate:              funcPtr(walTruncate),
			FxSync:                  funcPtr(walSync),
			FxFileSize:              funcPtr(walFileSize),
			FxLock:                  funcPtr(walLock),
			FxUnlock:                funcPtr(walUnlock),
			FxCheckReservedLock:     funcPtr(walCheckReservedLock),
			FxFileControl:           funcPtr(walFileControl),
			FxSectorSize:            funcPtr(walSectorSize),
			FxDeviceCharacteristics: funcPtr(walDeviceCharacteristics),
			FxShmMap:                funcPtr(walShmMap),
			FxShmLock:               funcPtr(walShmLock),
			FxShmBarrier:            funcPtr(walShmBarrier),
			FxShmUnmap:              funcPtr(walShmUnmap),
			FxFetch:                 funcPtr(walFetch),
			FxUnfetch:               funcPtr(walUnfetch),
		}
		if rc := sqlite3.Xsqlite3_vfs_register(tls, uintptr(unsafe.Pointer(&walVFS)), 0); rc != sqlite3.SQLITE_OK {
			walErr = fmt.Errorf("sqlite: register the WAL VFS: error %d", rc)
		}
	})
	return walErr
}

// walOpen opens a file through the default VFS: in place for every file
// but a WAL or the main database, which get a walFile head in front.
func walOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	open := *(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{walBaseOpen}))
	wal := flags&sqlite3.SQLITE_OPEN_WAL != 0
	if zName == 0 || !wal && flags&sqlite3.SQLITE_OPEN_MAIN_DB == 0 {
		return open(tls, walBaseVFS, zName, pFile, flags, pOutFlags)
	}
	f := fileOf(pFile)
	*f = walFile{}
	inner := pFile + uintptr(walHead)
	rc := open(tls, walBaseVFS, zName, inner, flags, pOutFlags)
	base := *(*uintptr)(ptr(inner))
	if rc != sqlite3.SQLITE_OK {
		if base != 0 {
			methodsOf(base).close(tls, inner)
		}
		return rc
	}
	if methodsOf(base).FiVersion < 3 {
		// Methods without shared memory (a locking style of another
		// system's unix VFS): no WAL index to follow, so no holding;
		// the file is opened again in place, as without the shim.
		methodsOf(base).close(tls, inner)
		return open(tls, walBaseVFS, zName, pFile, flags, pOutFlags)
	}
	f.base = base
	f.methods = uintptr(unsafe.Pointer(&walMethods))
	if wal {
		f.wal = 1
	}
	name := libc.GoString(zName)
	walOpenFiles.Lock()
	defer walOpenFiles.Unlock()
	if wal {
		walOpenFiles.wals[name] = append(walOpenFiles.wals[name], pFile)
	} else {
		walOpenFiles.dbs[pFile] = name + "-wal"
	}
	return sqlite3.SQLITE_OK
}

// forget drops pFile from walOpenFiles.
func forget(pFile uintptr) {
	walOpenFiles.Lock()
	defer walOpenFiles.Unlock()
	delete(walOpenFiles.dbs, pFile)
	for name, fs := range walOpenFiles.wals {
		for i, p := range fs {
			if p == pFile {
				fs = append(fs[:i], fs[i+1:]...)
				if len(fs) == 0 {
					delete(walOpenFiles.wals, name)
				} else {
					walOpenFiles.wals[name] = fs
				}
				return
			}
		}
	}
}

// dropHeld drops the frames held for the WAL of database file pFile,
// whose connection is about to release the write lock: a commit writes
// what it holds, so what is left belongs to a transaction that ended
// without one. Only the connection holding the lock can hold frames.
func dropHeld(pFile uintptr) {
	walOpenFiles.Lock()
	defer walOpenFiles.Unlock()
	walOpenFiles.releases++
	for _, w := range walOpenFiles.wals[walOpenFiles.dbs[pFile]] {
		if f := fileOf(w); f.n != 0 {
			f.n, f.commit = 0, 0
		}
	}
}

// flush writes what f holds.
func (f *walFile) flush(tls *libc.TLS, pFile uintptr) int32 {
	if f.n == 0 {
		return sqlite3.SQLITE_OK
	}
	m, inner := methodsOf(f.base), pFile+uintptr(walHead)
	var rc int32
	for done := int64(0); done < f.n && rc == sqlite3.SQLITE_OK; done += walWriteMax {
		rc = m.write(tls, inner, f.buf+uintptr(done), int32(min(f.n-done, walWriteMax)), f.off+done)
	}
	f.n, f.commit = 0, 0
	return rc
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := fileOf(pFile)
	inner := pFile + uintptr(walHead)
	if f.wal == 0 {
		return methodsOf(f.base).write(tls, inner, zBuf, iAmt, iOfst)
	}
	if f.n > 0 && iOfst != f.off+f.n {
		if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if f.n+int64(iAmt) > f.cap {
		c := max(2*f.cap, 64<<10, f.n+int64(iAmt))
		b := sqlite3.Xsqlite3_realloc64(tls, f.buf, uint64(c))
		if b == 0 { // no memory to hold it: write it as SQLite would
			if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
				return rc
			}
			return methodsOf(f.base).write(tls, inner, zBuf, iAmt, iOfst)
		}
		f.buf, f.cap = b, c
	}
	if f.n == 0 {
		f.off = iOfst
	}
	src := unsafe.Slice((*byte)(ptr(zBuf)), iAmt)
	copy(unsafe.Slice((*byte)(ptr(f.buf+uintptr(f.n))), iAmt), src)
	f.n += int64(iAmt)
	// A frame header (24 bytes; a page is at least 512) whose "database
	// size after commit" is set heads a commit frame: the page after it
	// ends the transaction, and SQLite publishes the commit once that
	// write returns.
	endsCommit := f.commit == 1 && iAmt != walFrameHd
	f.commit = 0
	if iAmt == walFrameHd && binary.BigEndian.Uint32(src[4:8]) != 0 {
		f.commit = 1
	}
	if endsCommit || f.n >= walHoldMax {
		return f.flush(tls, pFile)
	}
	return sqlite3.SQLITE_OK
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	forget(pFile)
	f := fileOf(pFile)
	rc := f.flush(tls, pFile)
	if f.buf != 0 {
		sqlite3.Xsqlite3_free(tls, f.buf)
		f.buf, f.cap = 0, 0
	}
	if crc := methodsOf(f.base).close(tls, pFile+uintptr(walHead)); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	return rc
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := fileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return methodsOf(f.base).read(tls, pFile+uintptr(walHead), zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	f := fileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	m := methodsOf(f.base)
	return call2[int64](m.FxTruncate)(tls, pFile+uintptr(walHead), size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	f := fileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	if f.wal == 1 {
		walSyncs.Add(1)
	}
	return call2[int32](methodsOf(f.base).FxSync)(tls, pFile+uintptr(walHead), flags)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	f := fileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call2[uintptr](methodsOf(f.base).FxFileSize)(tls, pFile+uintptr(walHead), pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	f := fileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	fn := *(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(f.base).FxFileControl}))
	return fn(tls, pFile+uintptr(walHead), op, pArg)
}

func walFetch(tls *libc.TLS, pFile uintptr, iOfst int64, iAmt int32, pp uintptr) int32 {
	f := fileOf(pFile)
	if rc := f.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	fn := *(*func(*libc.TLS, uintptr, int64, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(f.base).FxFetch}))
	return fn(tls, pFile+uintptr(walHead), iOfst, iAmt, pp)
}

func walUnfetch(tls *libc.TLS, pFile uintptr, iOfst int64, p uintptr) int32 {
	fn := *(*func(*libc.TLS, uintptr, int64, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(fileOf(pFile).base).FxUnfetch}))
	return fn(tls, pFile+uintptr(walHead), iOfst, p)
}

// The methods that neither read nor write a file pass straight through
// (a WAL's lock methods; a database file's shared-memory ones, the write
// lock's release noted).

func walLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	return call2[int32](methodsOf(fileOf(pFile).base).FxLock)(tls, pFile+uintptr(walHead), lock)
}

func walUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	return call2[int32](methodsOf(fileOf(pFile).base).FxUnlock)(tls, pFile+uintptr(walHead), lock)
}

func walCheckReservedLock(tls *libc.TLS, pFile, pResOut uintptr) int32 {
	return call2[uintptr](methodsOf(fileOf(pFile).base).FxCheckReservedLock)(tls, pFile+uintptr(walHead), pResOut)
}

func walSectorSize(tls *libc.TLS, pFile uintptr) int32 {
	fn := *(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(fileOf(pFile).base).FxSectorSize}))
	return fn(tls, pFile+uintptr(walHead))
}

func walDeviceCharacteristics(tls *libc.TLS, pFile uintptr) int32 {
	fn := *(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(fileOf(pFile).base).FxDeviceCharacteristics}))
	return fn(tls, pFile+uintptr(walHead))
}

func walShmMap(tls *libc.TLS, pFile uintptr, iPg, pgsz, bExtend int32, pp uintptr) int32 {
	fn := *(*func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(fileOf(pFile).base).FxShmMap}))
	return fn(tls, pFile+uintptr(walHead), iPg, pgsz, bExtend, pp)
}

func walShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	if flags == sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE && offset <= walWriteLock && walWriteLock < offset+n {
		dropHeld(pFile)
	}
	fn := *(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&struct{ uintptr }{methodsOf(fileOf(pFile).base).FxShmLock}))
	return fn(tls, pFile+uintptr(walHead), offset, n, flags)
}

func walShmBarrier(tls *libc.TLS, pFile uintptr) {
	fn := *(*func(*libc.TLS, uintptr))(unsafe.Pointer(&struct{ uintptr }{methodsOf(fileOf(pFile).base).FxShmBarrier}))
	fn(tls, pFile+uintptr(walHead))
}

func walShmUnmap(tls *libc.TLS, pFile uintptr, deleteFlag int32) int32 {
	return call2[int32](methodsOf(fileOf(pFile).base).FxShmUnmap)(tls, pFile+uintptr(walHead), deleteFlag)
}

// ioMethods are the default VFS's methods of a file, callable.
type ioMethods struct{ *sqlite3.Tsqlite3_io_methods }

func methodsOf(p uintptr) ioMethods {
	return ioMethods{(*sqlite3.Tsqlite3_io_methods)(ptr(p))}
}

func (m ioMethods) write(tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	fn := *(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&struct{ uintptr }{m.FxWrite}))
	return fn(tls, pFile, buf, n, off)
}

func (m ioMethods) read(tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	fn := *(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&struct{ uintptr }{m.FxRead}))
	return fn(tls, pFile, buf, n, off)
}

func (m ioMethods) close(tls *libc.TLS, pFile uintptr) int32 {
	fn := *(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{m.FxClose}))
	return fn(tls, pFile)
}

// call2 is a method taking the file and one more argument of type A.
func call2[A int32 | int64 | uintptr](p uintptr) func(*libc.TLS, uintptr, A) int32 {
	return *(*func(*libc.TLS, uintptr, A) int32)(unsafe.Pointer(&struct{ uintptr }{p}))
}

func fileOf(pFile uintptr) *walFile { return (*walFile)(ptr(pFile)) }

// ptr turns an address SQLite handed over (memory of its own allocator,
// never Go's heap) into a pointer. Reading the uintptr's bits as a pointer
// says the same as unsafe.Pointer(p) without go vet's warning about Go
// pointers kept as integers, which these are not.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// funcPtr is the function pointer SQLite calls for fn, in the form the
// transpiled SQLite stores one: the func value's code pointer word, which
// for a top-level function is static.
func funcPtr(fn any) uintptr { return (*[2]uintptr)(unsafe.Pointer(&fn))[1] }
