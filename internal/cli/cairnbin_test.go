package cli_test

import (
	"bufio"
	"bytes"
	"io"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/internal/testbin"
)

// cairnBuild builds the cairn binary once for all the package's binary
// tests; testbin shares the file with the other packages' tests.
var cairnBuild = sync.OnceValues(func() (string, error) { return testbin.Build("./cmd/cairn", "cairn") })

// cairnBinary returns the path of the cairn binary built from this
// checkout, building it on first use.
func cairnBinary(t *testing.T) string {
	t.Helper()
	bin, err := cairnBuild()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// servedBinary is a `cairn serve` process of the built binary.
type servedBinary struct {
	URL    string // where it serves, as it printed it
	Cmd    *exec.Cmd
	Stderr *syncBuffer

	stop    sync.Once
	stopErr error
}

// serveBinary runs bin with args (a serve command listening on port 0) in
// env until the test ends, and returns once the server has printed where it
// serves.
func serveBinary(t *testing.T, bin string, env []string, args ...string) *servedBinary {
	t.Helper()
	s := &servedBinary{Cmd: exec.Command(bin, args...), Stderr: &syncBuffer{}}
	s.Cmd.Env = env
	s.Cmd.Stderr = s.Stderr
	stdout, err := s.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	out := bufio.NewReader(stdout)
	line, err := out.ReadString('\n')
	m := regexp.MustCompile(`^cairn serving on (https?://\S+) `).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("cairn serve printed %q (%v); stderr:\n%s", line, err, s.Stderr.String())
	}
	// The rest of its output is not read, but must not fill the pipe.
	go io.Copy(io.Discard, out)
	s.URL = m[1]
	return s
}

// Stop ends the server with SIGTERM and waits for it to exit; a later call
// returns the first one's answer.
func (s *servedBinary) Stop() error {
	s.stop.Do(func() {
		if s.Cmd.ProcessState != nil {
			return // the test ended it
		}
		if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			s.stopErr = err
			return
		}
		s.stopErr = s.Cmd.Wait()
	})
	return s.stopErr
}

// runBinary runs bin with args in env and returns what it printed and its
// exit code; a failure to run it at all ends the test.
func runBinary(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}
