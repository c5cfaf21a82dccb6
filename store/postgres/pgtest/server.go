package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// EnvBin names the environment variable holding the directory of the
// PostgreSQL server binaries (initdb, pg_ctl) StartServer uses; by default
// the newest /usr/lib/postgresql/*/bin, else pg_ctl on $PATH.
const EnvBin = "CAIRN_TEST_PG_BIN"

// Server is a PostgreSQL server of the test's own: a cluster initialized
// in a temporary directory, listening on 127.0.0.1 on a port of its own,
// for tests that stop and restart the database under load, which the
// shared server of $CAIRN_TEST_POSTGRES must never be. The cluster is
// removed when the test ends.
type Server struct {
	// DSN reaches the server's postgres database as the superuser cairn
	// (trust authentication, loopback only). It stays the same across
	// restarts.
	DSN string

	tb   testing.TB
	bin  string // directory of pg_ctl and initdb
	dir  string // the cluster's data directory's parent, also the socket dir
	port int
	attr *syscall.SysProcAttr // run as the postgres user when the test is root
}

// StartServer initializes and starts a server of the test's own. Without
// the PostgreSQL binaries it skips tb, or fails it when CI=true.
func StartServer(tb testing.TB) *Server {
	tb.Helper()
	bin := serverBin()
	if bin == "" {
		missing(tb, "the PostgreSQL server binaries (initdb, pg_ctl) were not found; set "+EnvBin+" or install postgresql")
	}
	s := &Server{tb: tb, bin: bin}
	var uid, gid int = -1, -1
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			missing(tb, "running as root, and there is no postgres user to run the test's PostgreSQL server as: "+err.Error())
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		s.attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	dir, err := os.MkdirTemp("", "cairn-pgtest-")
	if err != nil {
		tb.Fatal(err)
	}
	s.dir = dir
	tb.Cleanup(func() {
		s.pgctl("stop", "-m", "immediate")
		os.RemoveAll(dir)
	})
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.DSN = fmt.Sprintf("postgres://cairn@127.0.0.1:%d/postgres?sslmode=disable", s.port)

	if out, err := s.run("initdb", "-D", s.data(), "-U", "cairn", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	s.Start()
	return s
}

// Start starts the stopped server and waits until it accepts connections.
func (s *Server) Start() {
	s.tb.Helper()
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c max_connections=50", s.port, s.dir)
	if out, err := s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "server.log"), "-o", opts); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		s.tb.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// Stop stops the server: mode "fast" ends every session and shuts down
// cleanly; "immediate" kills it as a crash would, and the next start
// recovers from the write-ahead log.
func (s *Server) Stop(mode string) {
	s.tb.Helper()
	if out, err := s.pgctl("stop", "-w", "-t", "60", "-m", mode); err != nil {
		s.tb.Fatalf("pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) pgctl(args ...string) ([]byte, error) {
	return s.run("pg_ctl", append([]string{"-D", s.data()}, args...)...)
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.SysProcAttr = s.attr
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the postmaster running with the output files:
	// wait for pg_ctl only, not for what it started.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

// serverBin finds the directory of initdb and pg_ctl.
func serverBin() string {
	if d := os.Getenv(EnvBin); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(p)
		}
	}
	return ""
}

// version is the major version in /usr/lib/postgresql/VERSION/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		tb.Fatal("CI=true but " + why)
	}
	tb.Skip(why)
}
