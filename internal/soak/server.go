package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"time"
)

// Server is a cairn serve process started for a soak.
type Server struct {
	URL  string
	cmd  *exec.Cmd
	done chan error
}

var servingLine = regexp.MustCompile(`^cairn serving on (http://\S+) `)

// StartServer starts bin serve on a free loopback port with dataDir (and
// database, when set, as the metadata store); its log goes to logw.
func StartServer(ctx context.Context, bin, dataDir, database string, logw io.Writer) (*Server, error) {
	args := []string{"--data-dir", dataDir, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0"}
	if database != "" {
		args = append([]string{"--database", database}, args...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CAIRN_SERVER=", "HOME="+dataDir)
	cmd.Stderr = logw
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	s := &Server{cmd: cmd, done: make(chan error, 1)}
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		l, _ := br.ReadString('\n')
		line <- l
		io.Copy(io.Discard, br)
	}()
	go func() { s.done <- cmd.Wait() }()
	select {
	case l := <-line:
		m := servingLine.FindStringSubmatch(l)
		if m == nil {
			s.Stop(5 * time.Second)
			return nil, fmt.Errorf("cairn serve printed %q, not its address", l)
		}
		s.URL = m[1]
		return s, nil
	case <-time.After(60 * time.Second):
		s.Stop(5 * time.Second)
		return nil, errors.New("cairn serve did not start within 60s")
	case <-ctx.Done():
		s.Stop(5 * time.Second)
		return nil, ctx.Err()
	}
}

// Stop sends SIGTERM and waits up to grace for the process to exit; it
// reports an error when the server had to be killed or failed on the way out.
func (s *Server) Stop(grace time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-s.done:
		if err != nil {
			return fmt.Errorf("cairn serve exited with %v after SIGTERM", err)
		}
		return nil
	case <-time.After(grace):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("cairn serve did not stop within %s of SIGTERM and was killed", grace)
	}
}
