package storagebackend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// stub is a backend whose answers the test sets per method.
type stub struct {
	mu     sync.Mutex
	err    error
	block  chan struct{} // when set, OnCreate waits for it or ctx
	panics bool
	seen   []any
}

func (s *stub) record(req any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, req)
	if s.panics {
		panic("boom")
	}
	return s.err
}

func (s *stub) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	return json.RawMessage(`{"password":"hunter2"}`), s.record(req)
}

func (s *stub) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, s.record(req)
}

func (s *stub) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	return nil, s.record(req)
}
func (s *stub) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error { return s.record(req) }
func (s *stub) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	return s.record(req)
}
func (s *stub) GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error) {
	return "", s.record(req)
}
func (s *stub) OnLock(ctx context.Context, req cairn.OnLockRequest) error     { return s.record(req) }
func (s *stub) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error { return s.record(req) }
func (s *stub) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return json.RawMessage(`"derived"`), s.record(req)
}

type running struct {
	conn   *grpc.ClientConn
	stop   context.CancelFunc
	served chan error
}

func start(t *testing.T, srv *storagebackend.Server) *running {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stop: cancel, served: make(chan error, 1)}
	go func() { r.served <- srv.Serve(ctx, lis) }()
	r.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		r.conn.Close()
		<-r.served
	})
	return r
}

func TestErrorsBecomeProtocolCodes(t *testing.T) {
	tests := []struct {
		err  error
		want codes.Code
	}{
		{cairn.Errorf(cairn.CodeNotFound, "no such instance"), codes.NotFound},
		{cairn.Errorf(cairn.CodeAlreadyExists, "revision exists"), codes.AlreadyExists},
		{cairn.Errorf(cairn.CodeLocked, "locked by alice"), codes.FailedPrecondition},
		{cairn.Errorf(cairn.CodeInvalid, "bad context"), codes.InvalidArgument},
		{cairn.Errorf(cairn.CodeUnavailable, "vault is down"), codes.Unavailable},
		{errors.New("disk on fire"), codes.Internal},
		{status.Error(codes.ResourceExhausted, "quota"), codes.ResourceExhausted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
	}
	b := &stub{}
	r := start(t, storagebackend.NewValueServer(b, storagebackend.Options{}))
	client := pb.NewValueAndContextStorageBackendClient(r.conn)
	for _, tt := range tests {
		b.mu.Lock()
		b.err = tt.err
		b.mu.Unlock()
		_, err := client.OnUpdate(t.Context(), &pb.OnUpdateValueAndContextRequest{TypeInstanceId: "i1", NewResourceVersion: 2})
		if status.Code(err) != tt.want || !strings.Contains(status.Convert(err).Message(), strings.TrimPrefix(tt.err.Error(), "rpc error: code = ResourceExhausted desc = ")) {
			t.Errorf("backend error %v: got %v, want code %s with the message", tt.err, err, tt.want)
		}
	}
}

func TestPanicBecomesInternal(t *testing.T) {
	var logs bytes.Buffer
	b := &stub{panics: true}
	r := start(t, storagebackend.NewValueServer(b, storagebackend.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
	_, err := pb.NewValueAndContextStorageBackendClient(r.conn).OnLock(t.Context(), &pb.OnLockRequest{TypeInstanceId: "i1", LockedBy: "a"})
	if status.Code(err) != codes.Internal {
		t.Errorf("error %v, want Internal", err)
	}
	if !strings.Contains(logs.String(), "storage backend panicked") {
		t.Errorf("panic not logged: %s", logs.String())
	}
	// The server survives.
	b.mu.Lock()
	b.panics = false
	b.mu.Unlock()
	if _, err := pb.NewValueAndContextStorageBackendClient(r.conn).OnUnlock(t.Context(), &pb.OnUnlockRequest{TypeInstanceId: "i1"}); err != nil {
		t.Errorf("after a panic: %v", err)
	}
}

// TestNoSecretsInLogs: values and contexts may be secrets; the log has the
// method, instance and outcome of every call and none of the payload.
func TestNoSecretsInLogs(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := &stub{}
	r := start(t, storagebackend.NewValueServer(b, storagebackend.Options{Logger: log}))
	client := pb.NewValueAndContextStorageBackendClient(r.conn)
	ctx := t.Context()
	if _, err := client.OnCreate(ctx, &pb.OnCreateValueAndContextRequest{TypeInstanceId: "inst-1", Value: []byte(`{"password":"hunter2"}`), Context: []byte(`{"token":"s.abc123"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.GetValue(ctx, &pb.GetValueRequest{TypeInstanceId: "inst-1", ResourceVersion: 1, Context: []byte(`{"token":"s.abc123"}`)}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.err = cairn.Errorf(cairn.CodeLocked, "locked")
	b.mu.Unlock()
	_, _ = client.OnUpdate(ctx, &pb.OnUpdateValueAndContextRequest{TypeInstanceId: "inst-1", NewResourceVersion: 2, NewValue: []byte(`{"password":"hunter3"}`)})
	out := logs.String()
	for _, secret := range []string{"hunter2", "hunter3", "s.abc123"} {
		if strings.Contains(out, secret) {
			t.Errorf("log contains %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"/storage_backend.ValueAndContextStorageBackend/OnCreate", `"instance":"inst-1"`, `"code":"FailedPrecondition"`, `"resourceVersion":2`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

func TestContextServer(t *testing.T) {
	b := &stub{}
	r := start(t, storagebackend.NewContextServer(b, storagebackend.Options{}))
	client := pb.NewContextStorageBackendClient(r.conn)
	resp, err := client.GetPreCreateValue(t.Context(), &pb.GetPreCreateValueRequest{Context: []byte(`{"name":"web"}`)})
	if err != nil || string(resp.Value) != `"derived"` {
		t.Fatalf("GetPreCreateValue = %v, %v", resp, err)
	}
	owner := "alice"
	if _, err := client.OnDeleteRevision(t.Context(), &pb.OnDeleteRevisionRequest{TypeInstanceId: "i", ResourceVersion: 3, OwnerId: &owner}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	got := b.seen[len(b.seen)-1].(cairn.OnDeleteRevisionRequest)
	b.mu.Unlock()
	if got.InstanceID != "i" || got.ResourceVersion != 3 || got.OwnerID != "alice" || got.Context != nil {
		t.Errorf("request = %+v", got)
	}
	// The value service is not there.
	_, err = pb.NewValueAndContextStorageBackendClient(r.conn).GetValue(t.Context(), &pb.GetValueRequest{TypeInstanceId: "i"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("value service on a context server: %v, want Unimplemented", err)
	}
}

func health(t *testing.T, conn *grpc.ClientConn, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health check of %q: %v", service, err)
	}
	return resp.Status
}

// TestGracefulShutdown: on cancel, health turns NOT_SERVING, a call in
// flight completes, and Serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	b := &stub{block: make(chan struct{})}
	srv := storagebackend.NewValueServer(b, storagebackend.Options{ShutdownTimeout: 5 * time.Second})
	r := start(t, srv)
	for _, svc := range []string{"", srv.ServiceName()} {
		if s := health(t, r.conn, svc); s != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q = %s", svc, s)
		}
	}
	// A health watcher (as a load balancer would keep) sees the change.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := healthpb.NewHealthClient(r.conn).Watch(watchCtx, &healthpb.HealthCheckRequest{Service: srv.ServiceName()})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch = %v, %v", m, err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := pb.NewValueAndContextStorageBackendClient(r.conn).OnCreate(context.Background(), &pb.OnCreateValueAndContextRequest{TypeInstanceId: "i", Value: []byte(`1`)})
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the call reach the handler
	r.stop()
	if m, err := watch.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch after shutdown began = %v, %v; want NOT_SERVING", m, err)
	}
	stopWatch()
	select {
	case err := <-r.served:
		t.Fatalf("Serve returned (%v) before the call in flight finished", err)
	default:
	}
	close(b.block)
	if err := <-inFlight; err != nil {
		t.Errorf("the call in flight failed: %v", err)
	}
	if err := <-r.served; err != nil {
		t.Errorf("Serve = %v, want nil after a requested shutdown", err)
	}
	r.served <- nil // for the cleanup
}

// TestShutdownTimeout: a call that does not finish is cancelled once the
// shutdown timeout passes.
func TestShutdownTimeout(t *testing.T) {
	b := &stub{block: make(chan struct{})} // never closed
	r := start(t, storagebackend.NewValueServer(b, storagebackend.Options{ShutdownTimeout: 200 * time.Millisecond}))
	inFlight := make(chan error, 1)
	go func() {
		_, err := pb.NewValueAndContextStorageBackendClient(r.conn).OnCreate(context.Background(), &pb.OnCreateValueAndContextRequest{TypeInstanceId: "i"})
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	r.stop()
	select {
	case err := <-r.served:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the shutdown timeout")
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("stopped after %s, before the shutdown timeout", d)
	}
	if err := <-inFlight; err == nil {
		t.Error("the hanging call succeeded")
	}
	r.served <- nil
}

// TestListenAndServeStopsOnSIGTERM: a backend built on the SDK shuts down
// gracefully when its process gets SIGTERM.
func TestListenAndServeStopsOnSIGTERM(t *testing.T) {
	// Find a free port; the tiny window before ListenAndServe takes it is
	// acceptable on loopback.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	srv := storagebackend.NewValueServer(&stub{}, storagebackend.Options{})
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe(context.Background(), addr) }()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// SERVING means Serve runs, so the signal handler is installed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never SERVING: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ListenAndServe = %v after SIGTERM, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not stop on SIGTERM")
	}
}
