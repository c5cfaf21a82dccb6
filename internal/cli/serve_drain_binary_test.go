package cli_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM lets a request in flight finish (its write is acknowledged) and
// refuses new connections; a request still unfinished at
// --shutdown-timeout is cut off, and the server's last words say so.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a server")
	}
	dir := t.TempDir()
	bin := cairnBinary(t)
	env := append(os.Environ(), "CAIRN_SERVER=", "CAIRN_CONFIG="+filepath.Join(dir, "no-config.yaml"),
		"CAIRN_DATA_DIR="+filepath.Join(dir, "data"))
	srv := serveBinary(t, bin, env, "serve", "--allow-anonymous", "--addr", "127.0.0.1:0", "--shutdown-timeout", "1s")
	if _, errOut, code := runBinary(t, bin, append(env, "CAIRN_SERVER="+srv.URL), "apply", "-f", "../../examples/flags/flags.json"); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, errOut)
	}

	// post sends a create whose body arrives in two parts: the first once
	// the server's handler reads it (100 Continue: the server has the
	// request), the second when the returned writer is written and closed.
	post := func(name string) (io.WriteCloser, <-chan *http.Response, <-chan error) {
		body, w := io.Pipe()
		req, err := http.NewRequest("POST", srv.URL+"/apis/flipt.io/v1alpha1/namespaces/default/flags", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		resc, errc := make(chan *http.Response, 1), make(chan error, 1)
		go func() {
			res, err := (&http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}).Do(req)
			if err != nil {
				errc <- err
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			resc <- res
		}()
		if _, err := io.WriteString(w, `{"apiVersion":"flipt.io/v1alpha1","kind":"Flag","metadata":{"name":"`+name+`"},`); err != nil {
			t.Fatal(err)
		}
		return w, resc, errc
	}
	drained, drainedRes, drainedErr := post("drained")
	cut, _, cutErr := post("cut-off")

	if err := srv.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(srv.Stderr.String(), `"shutting down"`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shutdown logged after SIGTERM:\n%s", srv.Stderr.String())
		}
	}
	if res, err := (&http.Client{Transport: &http.Transport{}}).Get(srv.URL + "/healthz"); err == nil {
		res.Body.Close()
		t.Errorf("a new request after SIGTERM was answered %s; want the connection refused", res.Status)
	}
	if _, err := io.WriteString(drained, `"spec":{"enabled":true}}`); err != nil {
		t.Fatal(err)
	}
	drained.Close()
	select {
	case res := <-drainedRes:
		if res.StatusCode != http.StatusCreated {
			t.Errorf("the request in flight at SIGTERM: %s; want 201 Created", res.Status)
		}
	case err := <-drainedErr:
		t.Errorf("the request in flight at SIGTERM failed: %v", err)
	}

	err := srv.Cmd.Wait() // the cut-off request holds it until --shutdown-timeout
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("cairn serve with a request cut off exited with %v; want exit code 1", err)
	}
	if out := srv.Stderr.String(); !strings.Contains(out, "still in flight after --shutdown-timeout 1s were cut off") {
		t.Errorf("cairn serve's last words do not say requests were cut off:\n%s", out)
	}
	cut.Close()
	if err := <-cutErr; err == nil {
		t.Error("the request unfinished at --shutdown-timeout was answered")
	}
}
