package grpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// credsType marks a password secret at the top and one inside an object.
var credsType = cairn.TypeRef{Path: "cap.type.app.creds", Revision: "0.1.0"}

const credsSchema = `{"type":"object","additionalProperties":false,"required":["user"],
 "properties":{"user":{"type":"string"},"password":{"type":"string","x-cairn-secret":true},
  "admin":{"type":"object","properties":{"token":{"type":"string","x-cairn-secret":true}}}}}`

// secret is what the backend holds under the marked fields; no error or
// log line may show it.
const secret = "s3cret-T0KEN"

// readBackEnv is a hubEnv with credsType registered, one instance of it
// in namespace team-a stored in the backend, a viewer of team-a (who may
// not get backends) and a log the test reads.
type readBackEnv struct {
	*hubEnv
	id     string
	viewer context.Context
	log    *bytes.Buffer
}

func newReadBackEnv(t *testing.T) *readBackEnv {
	t.Helper()
	var log bytes.Buffer
	e := newHubEnv(t, grpcbackend.Config{ReadAttempts: 1, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	// The hub's own log, where withheld texts go.
	h, err := hub.New(e.ctx, hub.Config{Store: e.st, Backends: opener(t, grpcbackend.Config{ReadAttempts: 1}),
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	if _, err := e.h.CreateType(e.ctx, cairn.Type{Path: credsType.Path, Revision: credsType.Revision, JSONSchema: json.RawMessage(credsSchema)}); err != nil {
		t.Fatal(err)
	}
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "db", Namespace: "team-a", TypeRef: credsType, Backend: &hub.BackendInput{ID: e.bid},
		Value: json.RawMessage(`{"user":"app","password":"` + secret + `","admin":{"token":"` + secret + `"}}`),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "view", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.ViewerRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "vic"}}}
	if _, err := e.h.CreateRBAC(e.ctx, bind); err != nil {
		t.Fatal(err)
	}
	return &readBackEnv{hubEnv: e, id: out[0].ID, log: &log,
		viewer: cairn.WithUser(e.ctx, cairn.User{Name: "vic", Groups: []string{cairn.Authenticated}})}
}

// answer makes the backend answer v for the instance's version 1.
func (e *readBackEnv) answer(v string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.dir, e.id, "1.json"), []byte(v), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// reads are every hub read that returns the instance's value.
func (e *readBackEnv) reads() map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"GetInstance": func(ctx context.Context) error { _, err := e.h.GetInstance(ctx, e.id, true); return err },
		"GetInstanceByName": func(ctx context.Context) error {
			_, err := e.h.GetInstanceByName(ctx, credsType.Path, "team-a", "db", true)
			return err
		},
		"ListInstancesWith": func(ctx context.Context) error {
			_, _, err := e.h.ListInstancesWith(ctx, store.InstanceFilter{TypePath: credsType.Path}, hub.ListOptions{Values: true})
			return err
		},
		"ResourceVersions": func(ctx context.Context) error { _, err := e.h.ResourceVersions(ctx, e.id, true); return err },
		"ResourceVersion":  func(ctx context.Context) error { _, err := e.h.ResourceVersion(ctx, e.id, 1, true); return err },
		"Values": func(ctx context.Context) error {
			inst, err := e.h.GetInstance(ctx, e.id, false)
			if err != nil {
				return err
			}
			_, err = e.h.Values(ctx, []hub.ValueRef{{Instance: inst, Version: inst.Latest}})
			return err
		},
		// An update without a value carries the backend's over.
		"UpdateInstances": func(ctx context.Context) error {
			_, err := e.h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: e.id, Labels: map[string]string{"x": "y"}}})
			return err
		},
	}
}

// TestValueReadBackMustMatchItsType: a backend that answers a value of
// another shape than its Type's schema (a secret moved under a field the
// schema does not mark, a scalar where a marked object belongs) would have
// its secrets shown to viewers, since redaction follows the schema's paths.
// Every read refuses such a value, naming the instance, the backend (to
// whoever may get it) and the first violation, never the value.
func TestValueReadBackMustMatchItsType(t *testing.T) {
	e := newReadBackEnv(t)
	// What the backend holds now reads back, redacted for the viewer.
	list, _, err := e.h.ListInstancesWith(e.viewer, store.InstanceFilter{TypePath: credsType.Path}, hub.ListOptions{Values: true})
	if err != nil || len(list) != 1 || strings.Contains(string(list[0].Latest.Value), secret) {
		t.Fatalf("list of a valid value = %v, %v; want it redacted", list, err)
	}
	for _, tc := range []struct {
		name, answer, field string
	}{
		{"a secret under a field the Type does not have", `{"user":"app","note":"` + secret + `"}`, "spec/value"},
		{"a scalar where a marked object belongs", `{"user":"app","admin":"` + secret + `"}`, "spec/value/admin"},
		{"another type at the top", `"` + secret + `"`, "spec/value"},
		// Under a secret field only the field is named: the path below it
		// would spell the secret object's keys.
		{"a wrong shape inside a secret", `{"user":"app","password":{"` + secret + `":1}}`, "spec/value/password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.answer(tc.answer)
			e.log.Reset()
			for name, read := range e.reads() {
				err := read(e.ctx)
				wantCode(t, err, cairn.CodeInternal)
				wantContains(t, err, e.id, e.bid, "does not match its Type "+credsType.String(), tc.field+" ", "the value is not served")
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: the error shows the value: %v", name, err)
				}
				// The viewer learns what is wrong, not which backend.
				err = read(e.viewer)
				wantCode(t, err, cairn.CodeInternal)
				wantContains(t, err, e.id, tc.field+" ", "the value is not served", "reference ")
				if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), e.bid) {
					t.Errorf("%s as a viewer: the error shows the value or the backend: %v", name, err)
				}
			}
			if strings.Contains(e.log.String(), secret) {
				t.Errorf("the log shows the value: %s", e.log)
			}
		})
	}
}

// TestBackendErrorText: a backend's own error text is its choice (another
// tenant's data, control characters that rewrite a terminal, megabytes):
// it reaches those who may get the backend bounded and printable, and
// those who may not not at all (the code kept, a reference the server logs
// the text under).
func TestBackendErrorText(t *testing.T) {
	e := newReadBackEnv(t)
	text := "tenant-b row: " + secret + "\x1b[2J\r\u202e" + strings.Repeat("x", 100_000)
	e.faults.setHook(func(_ context.Context, method string, _ int, _ string) error {
		if method == "GetValue" {
			return errors.New(text)
		}
		return nil
	})
	_, err := e.h.GetInstance(e.ctx, e.id, true)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if len(msg) > 2048 || strings.ContainsAny(msg, "\x1b\r\u202e") || !strings.Contains(msg, "more bytes") {
		t.Fatalf("the admin's error is %d bytes, has control characters or does not say it was cut: %q", len(msg), msg[:min(len(msg), 300)])
	}
	wantContains(t, err, e.bid, e.id, "tenant-b row: "+secret)
	e.log.Reset()
	_, err = e.h.GetInstance(e.viewer, e.id, true)
	wantCode(t, err, cairn.CodeUnavailable)
	wantContains(t, err, "storage backend", "reference ")
	if strings.Contains(err.Error(), "tenant-b") || strings.Contains(err.Error(), e.bid) || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the viewer sees the backend's text or the backend: %v", err)
	}
	ref := err.Error()[strings.LastIndex(err.Error(), "reference ")+len("reference "):]
	if !strings.Contains(e.log.String(), ref) || !strings.Contains(e.log.String(), "tenant-b row") {
		t.Errorf("the log has no line with reference %s and the backend's text: %s", ref, e.log)
	}
}

// TestNoClientForBackendWithheld: a hub without a client for the backend's
// url says so to whoever may get the backend, and to a viewer names
// neither the url nor the backend, as for the backend's own errors.
func TestNoClientForBackendWithheld(t *testing.T) {
	e := newReadBackEnv(t)
	h, err := hub.New(e.ctx, hub.Config{Store: e.st, Logger: slog.New(slog.NewJSONHandler(e.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.GetInstance(e.ctx, e.id, true)
	wantCode(t, err, cairn.CodeUnavailable)
	wantContains(t, err, e.bid, "no client is configured for url", "127.0.0.1")
	_, err = h.GetInstance(e.viewer, e.id, true)
	wantCode(t, err, cairn.CodeUnavailable)
	wantContains(t, err, "storage backend", "reference ")
	if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), e.bid) || strings.Contains(err.Error(), "url") {
		t.Errorf("the viewer sees the backend or its url: %v", err)
	}
}
