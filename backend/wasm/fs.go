package wasm

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// confinedFS keeps a module inside its mount. wazero already refuses ".."
// beyond the mount, but its DirFS opens host paths with the host's rules, so
// a symlink in the tree (Git stores them, and anyone who can push can add
// one) pointing at ../../etc/passwd would be followed out of the tree. Before
// each operation the path is resolved through an os.Root, which refuses to
// leave the directory by any route; only then does the wrapped FS act. The
// check cannot go stale in between: a WASI preview 1 module is single
// threaded and each host call completes before the next, and the module
// cannot create symlinks (Symlink and Link are refused).
type confinedFS struct {
	experimentalsys.FS
	root *os.Root
}

func newConfinedFS(root *os.Root, dir string, writable bool) experimentalsys.FS {
	var inner experimentalsys.FS = sysfs.DirFS(dir)
	if !writable {
		inner = &sysfs.ReadFS{FS: inner}
	}
	return &confinedFS{FS: inner, root: root}
}

// escapes classifies the error of resolving a path through os.Root: a
// missing file or an ordinary system error is for the real operation to
// report; anything else is os.Root refusing a path that leaves the tree.
func escapes(err error) bool {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return false
	}
	var errno syscall.Errno
	return !errors.As(err, &errno)
}

// rel makes a mount path relative to the root for os.Root: wazero passes
// paths under a directory the module opened as "<dir>/<path>", which is
// "/<path>" for the mount itself, and os.Root refuses absolute paths.
func rel(path string) string {
	if path = strings.TrimLeft(path, "/"); path == "" {
		return "."
	}
	return path
}

// follow checks a path whose last element is followed if it is a symlink.
func (c *confinedFS) follow(path string) experimentalsys.Errno {
	if _, err := c.root.Stat(rel(path)); escapes(err) {
		return experimentalsys.EPERM
	}
	return 0
}

// nofollow checks a path whose last element is used as is.
func (c *confinedFS) nofollow(path string) experimentalsys.Errno {
	if _, err := c.root.Lstat(rel(path)); escapes(err) {
		return experimentalsys.EPERM
	}
	return 0
}

func (c *confinedFS) OpenFile(path string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	check := c.follow
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		check = c.nofollow
	}
	if errno := check(path); errno != 0 {
		return nil, errno
	}
	return c.FS.OpenFile(path, flag, perm)
}

func (c *confinedFS) Lstat(path string) (s sys.Stat_t, errno experimentalsys.Errno) {
	if errno = c.nofollow(path); errno != 0 {
		return s, errno
	}
	return c.FS.Lstat(path)
}

func (c *confinedFS) Stat(path string) (s sys.Stat_t, errno experimentalsys.Errno) {
	if errno = c.follow(path); errno != 0 {
		return s, errno
	}
	return c.FS.Stat(path)
}

func (c *confinedFS) Readlink(path string) (string, experimentalsys.Errno) {
	if errno := c.nofollow(path); errno != 0 {
		return "", errno
	}
	return c.FS.Readlink(path)
}

func (c *confinedFS) Mkdir(path string, perm fs.FileMode) experimentalsys.Errno {
	if errno := c.nofollow(path); errno != 0 {
		return errno
	}
	return c.FS.Mkdir(path, perm)
}

func (c *confinedFS) Chmod(path string, perm fs.FileMode) experimentalsys.Errno {
	if errno := c.follow(path); errno != 0 {
		return errno
	}
	return c.FS.Chmod(path, perm)
}

func (c *confinedFS) Rename(from, to string) experimentalsys.Errno {
	if errno := c.nofollow(from); errno != 0 {
		return errno
	}
	if errno := c.nofollow(to); errno != 0 {
		return errno
	}
	return c.FS.Rename(from, to)
}

func (c *confinedFS) Rmdir(path string) experimentalsys.Errno {
	if errno := c.nofollow(path); errno != 0 {
		return errno
	}
	return c.FS.Rmdir(path)
}

func (c *confinedFS) Unlink(path string) experimentalsys.Errno {
	if errno := c.nofollow(path); errno != 0 {
		return errno
	}
	return c.FS.Unlink(path)
}

func (c *confinedFS) Utimens(path string, atim, mtim int64) experimentalsys.Errno {
	if errno := c.follow(path); errno != 0 {
		return errno
	}
	return c.FS.Utimens(path, atim, mtim)
}

// Link and Symlink are refused: a controller stores resources as files and
// has no need for links, and a link it made would be a way out of the tree
// (a relative symlink "../.." is resolved by the host, not by the mount).
func (c *confinedFS) Link(string, string) experimentalsys.Errno    { return experimentalsys.EPERM }
func (c *confinedFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }
