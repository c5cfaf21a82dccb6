// Package s3test starts a real S3 server for tests: versitygw (Apache-2.0)
// in posix mode on a temporary directory, one per call. scripts/with-services
// builds it and exports its path as CAIRN_TEST_VERSITYGW; without it the
// calling test is skipped, or fails under CI=true.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// EnvVersityGW names the versitygw binary.
const EnvVersityGW = "CAIRN_TEST_VERSITYGW"

// Server is a running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT.
	Endpoint  string
	AccessKey string
	SecretKey string
	Region    string
	// Dir is the posix directory behind the buckets.
	Dir string
}

// Binary returns the versitygw binary, skipping t (failing it under
// CI=true) when there is none.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvVersityGW)
	if bin == "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s is not set: run the tests through scripts/with-services, which builds versitygw", EnvVersityGW)
		}
		t.Skipf("%s is not set: run the tests through scripts/with-services to build versitygw", EnvVersityGW)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v", EnvVersityGW, bin, err)
	}
	return bin
}

// Start starts a versitygw for t and stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	side := filepath.Join(dir, "meta")
	for _, d := range []string{data, side} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	s := &Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), AccessKey: "cairntestaccess", SecretKey: "cairntestsecret0123456789", Region: "us-east-1", Dir: data}
	var out bytes.Buffer
	cmd := exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region,
		"--port", "127.0.0.1:"+strconv.Itoa(port), "posix", "--sidecar", side, data)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %d within 15 s: %s", port, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Client returns a client of s.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := minio.New(s.Endpoint[len("http://"):], &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: s.Region, BucketLookup: minio.BucketLookupPath,
		Transport: http.DefaultTransport,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Bucket creates a bucket named name.
func (s *Server) Bucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Env returns the environment variables that give s's credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=" + s.Region}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
