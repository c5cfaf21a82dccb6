package s3_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/backend/s3/s3test"
)

func newBackend(t *testing.T, srv *s3test.Server, cfg s3.Config) *s3.Backend {
	t.Helper()
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
	opts := s3.Options{Config: cfg, Getenv: func(k string) string { return env[k] }}
	if srv.VirtualDomain != "" {
		opts.Transport = srv.Transport()
	}
	b, err := s3.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "conformance")
	for _, tc := range []struct{ name, addressing, prefix string }{
		{"path-style with prefix", "path", "cairn/values"},
		{"auto addressing without prefix", "auto", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.Run(t, backendtest.Harness{
				New: func(t *testing.T) cairn.Backend {
					return newBackend(t, srv, s3.Config{URL: srv.Endpoint, Bucket: "conformance", Prefix: tc.prefix, Region: srv.Region, Addressing: tc.addressing})
				},
				AcceptValue: true,
			})
		})
	}
}

// Virtual-hosted addressing: every request names the bucket in the host
// (conformance.s3.cairn.test), which the server must see.
func TestConformanceVirtualHosted(t *testing.T) {
	srv := s3test.StartVirtual(t, "s3.cairn.test")
	srv.Bucket(t, "conformance")
	var hosts sync.Map
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
			b, err := s3.New(s3.Options{
				Config:    s3.Config{URL: srv.Endpoint, Bucket: "conformance", Prefix: "v/", Region: srv.Region, Addressing: "virtual"},
				Getenv:    func(k string) string { return env[k] },
				Transport: recordHosts{srv.Transport(), &hosts},
			})
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		AcceptValue: true,
	})
	var seen []string
	hosts.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })
	if len(seen) == 0 {
		t.Fatal("no request was made")
	}
	for _, h := range seen {
		if !strings.HasPrefix(h, "conformance.s3.cairn.test:") {
			t.Errorf("a request went to host %q, not virtual-hosted", h)
		}
	}
}

// recordHosts notes the Host of every request.
type recordHosts struct {
	next  http.RoundTripper
	hosts *sync.Map
}

func (r recordHosts) RoundTrip(req *http.Request) (*http.Response, error) {
	r.hosts.Store(req.URL.Host, true)
	return r.next.RoundTrip(req)
}
