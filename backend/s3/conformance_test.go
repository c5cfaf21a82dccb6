package s3_test

import (
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/backend/s3/s3test"
)

func newBackend(t *testing.T, srv *s3test.Server, cfg s3.Config) *s3.Backend {
	t.Helper()
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
	b, err := s3.New(s3.Options{Config: cfg, Getenv: func(k string) string { return env[k] }})
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
