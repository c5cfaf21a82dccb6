package s3_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/s3"
)

// TestServiceErrorTextBounded: an S3 service's error message is its own
// choice (megabytes, controls that rewrite a terminal or a log line); the
// backend's errors carry it bounded and printable, the code kept. The
// service is a loopback HTTP server answering S3's XML error document
// (versitygw's messages are its own, not a test's).
func TestServiceErrorTextBounded(t *testing.T) {
	// XML carries no ESC; a carriage return (as a reference) and a bidi
	// override it does.
	hostile := "denied: tenant-b&#13;\u202e" + strings.Repeat("x", 100_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>` +
			hostile + `</Message><RequestId>1</RequestId></Error>`))
	}))
	defer srv.Close()
	env := map[string]string{"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
	b, err := s3.New(s3.Options{Config: s3.Config{URL: srv.URL, Bucket: "values", Region: "us-east-1", Addressing: "path"},
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"GetValue": func() error {
			_, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: "i", ResourceVersion: 1})
			return err
		},
		"OnCreate": func() error {
			_, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: "i", Value: []byte(`{}`)})
			return err
		},
		"GetLockedBy": func() error { _, err := b.GetLockedBy(ctx, cairn.GetLockedByRequest{InstanceID: "i"}); return err },
		"Check":       func() error { return b.Check(ctx) },
	}
	for name, call := range calls {
		err := call()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := err.Error()
		if len(msg) > 2048 || strings.ContainsAny(msg, "\r\u202e") {
			t.Errorf("%s: the error is %d bytes or has control characters: %q", name, len(msg), msg[:min(len(msg), 300)])
		}
		// Check asks with HEAD: the service's answer has no body.
		if name != "Check" && (!strings.Contains(msg, "more bytes") || !strings.Contains(msg, "denied: tenant-b")) {
			t.Errorf("%s: the error does not say it was cut, or lost the service's words: %q", name, msg[:min(len(msg), 300)])
		}
		if name != "Check" && !cairn.HasCode(err, cairn.CodeUnavailable) {
			t.Errorf("%s: code %s, want Unavailable", name, cairn.ErrorCode(err))
		}
	}
}
