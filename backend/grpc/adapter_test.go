package grpc_test

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	grpcbackend "github.com/cairn-dev/cairn/backend/grpc"
	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

// raw is a ValueAndContextStorageBackend written directly against the
// generated code, without the SDK, so tests see exactly what crosses the
// wire and can answer with any status.
type raw struct {
	pb.UnimplementedValueAndContextStorageBackendServer
	mu    sync.Mutex
	calls map[string]int
	last  map[string]any
	// answer returns the error for the nth call (1-based) of a method.
	answer func(ctx context.Context, method string, n int) error
	// reply is returned by GetValue / OnCreate / GetLockedBy when set.
	value, context []byte
	lockedBy       *string
}

func newRaw() *raw { return &raw{calls: map[string]int{}, last: map[string]any{}} }

func (r *raw) record(ctx context.Context, method string, req any) error {
	r.mu.Lock()
	r.calls[method]++
	n := r.calls[method]
	r.last[method] = req
	answer := r.answer
	r.mu.Unlock()
	if answer != nil {
		return answer(ctx, method, n)
	}
	return nil
}

func (r *raw) count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

func (r *raw) lastReq(method string) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[method]
}

func (r *raw) GetValue(ctx context.Context, req *pb.GetValueRequest) (*pb.GetValueResponse, error) {
	if err := r.record(ctx, "GetValue", req); err != nil {
		return nil, err
	}
	return &pb.GetValueResponse{Value: r.value}, nil
}

func (r *raw) OnCreate(ctx context.Context, req *pb.OnCreateValueAndContextRequest) (*pb.OnCreateResponse, error) {
	if err := r.record(ctx, "OnCreate", req); err != nil {
		return nil, err
	}
	return &pb.OnCreateResponse{Context: r.context}, nil
}

func (r *raw) OnUpdate(ctx context.Context, req *pb.OnUpdateValueAndContextRequest) (*pb.OnUpdateResponse, error) {
	if err := r.record(ctx, "OnUpdate", req); err != nil {
		return nil, err
	}
	return &pb.OnUpdateResponse{}, nil
}

func (r *raw) OnDelete(ctx context.Context, req *pb.OnDeleteValueAndContextRequest) (*pb.OnDeleteResponse, error) {
	if err := r.record(ctx, "OnDelete", req); err != nil {
		return nil, err
	}
	return &pb.OnDeleteResponse{}, nil
}

func (r *raw) GetLockedBy(ctx context.Context, req *pb.GetLockedByRequest) (*pb.GetLockedByResponse, error) {
	if err := r.record(ctx, "GetLockedBy", req); err != nil {
		return nil, err
	}
	return &pb.GetLockedByResponse{LockedBy: r.lockedBy}, nil
}

// serveRaw serves r on loopback with a plain grpc.Server.
func serveRaw(t *testing.T, r *raw) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpclib.NewServer()
	pb.RegisterValueAndContextStorageBackendServer(s, r)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url    string
		addr   string
		tls    bool // as ParseURL reads it
		capTLS bool // as ParseCapactURL reads it
		err    string
	}{
		{url: "grpc://127.0.0.1:5051", addr: "127.0.0.1:5051"},
		{url: "grpc://backend.example:443/", addr: "backend.example:443"},
		{url: "http://127.0.0.1:5051", addr: "127.0.0.1:5051"},
		{url: "grpcs://vault-backend:5051", addr: "vault-backend:5051", tls: true, capTLS: true},
		{url: "https://vault-backend:5051", addr: "vault-backend:5051", tls: true, capTLS: true},
		{url: "vault-backend:5051", addr: "vault-backend:5051", tls: true},
		{url: "[::1]:5051", addr: "[::1]:5051", tls: true},
		{url: "", err: "url is empty"},
		{url: "ftp://x:1", err: `scheme "ftp" is not supported`},
		{url: "grpc://x", err: "want host:port"},
		{url: "grpc://:80", err: "the host is missing"},
		{url: "grpc://x:1/path", err: "without user, path, query or fragment"},
		{url: "just-a-host", err: "want host:port"},
		// gRPC reads a target's scheme as a resolver: a bare unix: or
		// unix-abstract: "host:port" would dial a local socket.
		{url: "unix:/run/cairn/serve.sock", err: `port "/run/cairn/serve.sock" is not a number`},
		{url: "unix-abstract:cairn", err: `port "cairn" is not a number`},
		{url: "backend:grpc", err: `port "grpc" is not a number`},
		{url: "grpc://backend:99999", err: `port "99999" is not a number from 1 to 65535`},
		{url: "backend:0", err: `port "0" is not a number from 1 to 65535`},
		{url: "dns:5051", addr: "dns:5051", tls: true},
	}
	for _, tt := range tests {
		for _, capact := range []bool{false, true} {
			parse, name, tls := grpcbackend.ParseURL, "ParseURL", tt.tls
			if capact {
				parse, name, tls = grpcbackend.ParseCapactURL, "ParseCapactURL", tt.capTLS
			}
			got, err := parse(tt.url)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("%s(%q) error %v, want %q", name, tt.url, err, tt.err)
				}
				continue
			}
			if err != nil || got.Addr != tt.addr || got.TLS != tls {
				t.Errorf("%s(%q) = %+v, %v; want addr %s tls %t", name, tt.url, got, err, tt.addr, tls)
			}
		}
	}
}

// TestOptionalFields checks that nil documents and empty owners travel as
// absent optional fields, and absent answers come back as nil.
func TestOptionalFields(t *testing.T) {
	r := newRaw()
	b := open(t, opener(t, grpcbackend.Config{}), storage("grpc://"+serveRaw(t, r), true))
	ctx := t.Context()
	id := uuid.NewString()

	newCtx, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if newCtx != nil {
		t.Errorf("OnCreate returned context %q for an absent field", newCtx)
	}
	req := r.lastReq("OnCreate").(*pb.OnCreateValueAndContextRequest)
	if req.Context != nil || string(req.Value) != `{"a":1}` || req.TypeInstanceId != id {
		t.Errorf("OnCreate request = %v: want value sent, context absent", req)
	}
	r.context = []byte(`{"path":"kv/x"}`)
	newCtx, err = b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`1`), Context: json.RawMessage(`{}`)})
	if err != nil || string(newCtx) != `{"path":"kv/x"}` {
		t.Errorf("OnCreate = %s, %v; want the returned context", newCtx, err)
	}
	if req := r.lastReq("OnCreate").(*pb.OnCreateValueAndContextRequest); req.Context == nil || string(req.Context) != `{}` {
		t.Errorf("context {} was not sent as present: %v", req)
	}

	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 7, NewValue: json.RawMessage(`2`)}); err != nil {
		t.Fatal(err)
	}
	up := r.lastReq("OnUpdate").(*pb.OnUpdateValueAndContextRequest)
	if up.OwnerId != nil || up.Context != nil || up.NewResourceVersion != 7 {
		t.Errorf("OnUpdate request = %v: want owner and context absent, revision 7", up)
	}
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 8, OwnerID: "bob"}); err != nil {
		t.Fatal(err)
	}
	if up := r.lastReq("OnUpdate").(*pb.OnUpdateValueAndContextRequest); up.OwnerId == nil || *up.OwnerId != "bob" {
		t.Errorf("OnUpdate owner = %v, want bob", up.OwnerId)
	}
	if err := b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	if del := r.lastReq("OnDelete").(*pb.OnDeleteValueAndContextRequest); del.OwnerId != nil || del.Context != nil {
		t.Errorf("OnDelete request = %v: want owner and context absent", del)
	}

	v, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	if err != nil || v != nil {
		t.Errorf("GetValue with an absent value = %q, %v; want nil", v, err)
	}
	owner, err := b.GetLockedBy(ctx, cairn.GetLockedByRequest{InstanceID: id})
	if err != nil || owner != "" {
		t.Errorf("GetLockedBy with locked_by absent = %q, %v", owner, err)
	}
	alice := "alice"
	r.lockedBy = &alice
	if owner, _ := b.GetLockedBy(ctx, cairn.GetLockedByRequest{InstanceID: id}); owner != "alice" {
		t.Errorf("GetLockedBy = %q, want alice", owner)
	}
	// A value backend has no GetPreCreateValue call.
	if v, err := b.GetPreCreateValue(ctx, cairn.GetPreCreateValueRequest{Context: json.RawMessage(`{}`)}); v != nil || err != nil {
		t.Errorf("GetPreCreateValue on a value backend = %q, %v; want nil, nil", v, err)
	}
}

// TestCodes checks the mapping of every protocol code and that each error
// names the backend and the instance.
func TestCodes(t *testing.T) {
	tests := []struct {
		code codes.Code
		want cairn.Code
	}{
		{codes.NotFound, cairn.CodeNotFound},
		{codes.AlreadyExists, cairn.CodeAlreadyExists},
		{codes.FailedPrecondition, cairn.CodeLocked},
		{codes.InvalidArgument, cairn.CodeInvalid},
		{codes.Unavailable, cairn.CodeUnavailable},
		{codes.DeadlineExceeded, cairn.CodeUnavailable},
		{codes.Internal, cairn.CodeInternal},
		{codes.Unknown, cairn.CodeInternal},
		{codes.PermissionDenied, cairn.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			r := newRaw()
			r.answer = func(context.Context, string, int) error { return status.Error(tt.code, "the backend says no") }
			sb := storage("grpc://"+serveRaw(t, r), true)
			b := open(t, opener(t, grpcbackend.Config{ReadAttempts: 1}), sb)
			id := uuid.NewString()
			_, err := b.OnUpdate(t.Context(), cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2})
			wantCode(t, err, tt.want)
			for _, part := range []string{`External backend "` + sb.ID + `"`, id, "the backend says no", "resource version 2"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
		})
	}
}

// TestRetries: reads are retried while Unavailable, writes never.
func TestRetries(t *testing.T) {
	r := newRaw()
	r.answer = func(_ context.Context, method string, n int) error {
		if n <= 2 {
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil
	}
	r.value = []byte(`"ok"`)
	b := open(t, opener(t, grpcbackend.Config{ReadAttempts: 3, RetryBackoff: time.Millisecond}), storage("grpc://"+serveRaw(t, r), true))
	ctx := t.Context()
	id := uuid.NewString()

	v, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	if err != nil || string(v) != `"ok"` || r.count("GetValue") != 3 {
		t.Errorf("GetValue = %s, %v after %d calls; want success on the 3rd", v, err, r.count("GetValue"))
	}
	if _, err := b.GetLockedBy(ctx, cairn.GetLockedByRequest{InstanceID: id}); err != nil || r.count("GetLockedBy") != 3 {
		t.Errorf("GetLockedBy: %v after %d calls; want success on the 3rd", err, r.count("GetLockedBy"))
	}
	_, err = b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`1`)})
	wantCode(t, err, cairn.CodeUnavailable)
	if n := r.count("OnCreate"); n != 1 {
		t.Errorf("OnCreate called %d times; writes must not be retried", n)
	}
	err = b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: id})
	wantCode(t, err, cairn.CodeUnavailable)
	if n := r.count("OnDelete"); n != 1 {
		t.Errorf("OnDelete called %d times; writes must not be retried", n)
	}

	// Bounded: a backend that stays unavailable gets ReadAttempts calls.
	down := newRaw()
	down.answer = func(context.Context, string, int) error { return status.Error(codes.Unavailable, "down") }
	b = open(t, opener(t, grpcbackend.Config{ReadAttempts: 2, RetryBackoff: time.Millisecond}), storage("grpc://"+serveRaw(t, down), true))
	_, err = b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	wantCode(t, err, cairn.CodeUnavailable)
	if n := down.count("GetValue"); n != 2 {
		t.Errorf("GetValue called %d times, want 2", n)
	}
	// Other codes are not retried.
	nf := newRaw()
	nf.answer = func(context.Context, string, int) error { return status.Error(codes.NotFound, "gone") }
	b = open(t, opener(t, grpcbackend.Config{RetryBackoff: time.Millisecond}), storage("grpc://"+serveRaw(t, nf), true))
	_, err = b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	wantCode(t, err, cairn.CodeNotFound)
	if n := nf.count("GetValue"); n != 1 {
		t.Errorf("GetValue called %d times on NotFound, want 1", n)
	}
}

// TestDeadline: a backend that hangs gets cut off at the configured
// deadline, which travels to the server (its context ends too).
func TestDeadline(t *testing.T) {
	r := newRaw()
	serverSaw := make(chan error, 1)
	r.answer = func(ctx context.Context, _ string, _ int) error {
		<-ctx.Done()
		serverSaw <- ctx.Err()
		return ctx.Err()
	}
	b := open(t, opener(t, grpcbackend.Config{Timeout: 200 * time.Millisecond, ReadAttempts: 1}), storage("grpc://"+serveRaw(t, r), true))
	start := time.Now()
	_, err := b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`1`)})
	elapsed := time.Since(start)
	wantCode(t, err, cairn.CodeUnavailable)
	if err == nil || !strings.Contains(err.Error(), "no answer within the deadline (200ms)") {
		t.Errorf("error %v does not explain the deadline", err)
	}
	if elapsed > 3*time.Second {
		t.Errorf("call took %s with a 200ms deadline", elapsed)
	}
	select {
	case e := <-serverSaw:
		if e == nil {
			t.Error("server context did not end")
		}
	case <-time.After(5 * time.Second):
		t.Error("the deadline did not reach the server")
	}
}

// TestReconnectsWhenTheBackendChanges: one connection per backend id, kept
// while the instance's resource version is the same, replaced when it moves
// (here: to a new url).
func TestReconnectsWhenTheBackendChanges(t *testing.T) {
	first, second := newRaw(), newRaw()
	first.value, second.value = []byte(`"first"`), []byte(`"second"`)
	o := opener(t, grpcbackend.Config{})
	sb := storage("grpc://"+serveRaw(t, first), true)
	b1 := open(t, o, sb)
	if b2 := open(t, o, sb); b1 != b2 {
		t.Error("the same backend instance got a second client")
	}
	get := func(b cairn.Backend) string {
		v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: uuid.NewString(), ResourceVersion: 1})
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if got := get(b1); got != `"first"` {
		t.Fatalf("value = %s", got)
	}
	sb.ResourceVersion, sb.URL = 2, "grpc://"+serveRaw(t, second)
	b3 := open(t, o, sb)
	if b3 == b1 {
		t.Fatal("a changed backend instance kept its old client")
	}
	if got := get(b3); got != `"second"` {
		t.Errorf("value after the change = %s, want the new backend's", got)
	}
	// The old connection is closed: a straggler fails rather than talk to
	// the old url.
	if _, err := b1.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: "x", ResourceVersion: 1}); err == nil {
		t.Error("the replaced client still works")
	}
}

func TestBadURLIsInvalid(t *testing.T) {
	o := opener(t, grpcbackend.Config{})
	sb := storage("ftp://127.0.0.1:1", true)
	_, err := o.OpenBackend(t.Context(), sb)
	wantCode(t, err, cairn.CodeInvalid)
	if err == nil || !strings.Contains(err.Error(), `External backend "`+sb.ID+`"`) || !strings.Contains(err.Error(), `scheme "ftp"`) {
		t.Errorf("error %v", err)
	}
}

// TestURLIsNeverAResolverTarget: a backend url names a TCP host and port,
// in both readings; gRPC would dial "unix:PATH" as a local socket (and any
// scheme it has a resolver for its way), reaching what listens only there.
func TestURLIsNeverAResolverTarget(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "b.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets: %v", err)
	}
	serveOn(t, lis, fileBackend(t), true, storagebackend.Options{})
	for _, capact := range []bool{false, true} {
		o := opener(t, grpcbackend.Config{CapactURLs: capact, ReadAttempts: 1, Timeout: 2 * time.Second})
		for _, url := range []string{"unix:" + sock, "unix://" + sock, "grpc://unix:" + sock} {
			b, err := o.OpenBackend(t.Context(), storage(url, true))
			if err == nil {
				_, err = b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`1`)})
				t.Errorf("capact %t: url %q was dialed (OnCreate: %v); want it refused as invalid", capact, url, err)
				continue
			}
			wantCode(t, err, cairn.CodeInvalid)
		}
	}
}

// TestWrongService: a backend registered with the wrong acceptValue answers
// Unimplemented, and the error says what to look at.
func TestWrongService(t *testing.T) {
	fb, err := file.New(file.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, fb, true, storagebackend.Options{})
	b := open(t, opener(t, grpcbackend.Config{}), storage("grpc://"+s.addr, false))
	_, err = b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Context: json.RawMessage(`{}`)})
	wantCode(t, err, cairn.CodeInternal)
	if err == nil || !strings.Contains(err.Error(), "does not implement /storage_backend.ContextStorageBackend/OnCreate") ||
		!strings.Contains(err.Error(), "is acceptValue (false) right") {
		t.Errorf("error %v", err)
	}
}

func TestClosedOpener(t *testing.T) {
	o, err := grpcbackend.New(grpcbackend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = o.OpenBackend(t.Context(), storage("grpc://127.0.0.1:1", true))
	wantCode(t, err, cairn.CodeUnavailable)
}

// TestCapactURLs: a backend registered the Capact way (bare host:port,
// plaintext) is reached only when the Opener reads urls as Capact does;
// otherwise the url means TLS and the plaintext server refuses the handshake.
func TestCapactURLs(t *testing.T) {
	r := newRaw()
	r.value = []byte(`"v"`)
	addr := serveRaw(t, r)
	for _, capact := range []bool{false, true} {
		o := opener(t, grpcbackend.Config{CapactURLs: capact, ReadAttempts: 1})
		b := open(t, o, storage(addr, true))
		v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: "x", ResourceVersion: 1})
		switch {
		case capact && (err != nil || string(v) != `"v"`):
			t.Errorf("capact: GetValue = %s, %v; want \"v\"", v, err)
		case !capact && err == nil:
			t.Errorf("default: GetValue over a bare host:port reached a plaintext server; want TLS to fail")
		}
	}
}

// TestLargeValues: a value the hub accepts (REST takes 8 MiB bodies) crosses
// the protocol both ways; gRPC's default 4 MiB message limit refused it on
// the way in (the SDK's server) and on the way back (the hub's client).
func TestLargeValues(t *testing.T) {
	s := serve(t, fileBackend(t), true, storagebackend.Options{})
	b := open(t, opener(t, grpcbackend.Config{ReadAttempts: 1}), storage("grpc://"+s.addr, true))
	value := json.RawMessage(`{"blob":"` + strings.Repeat("x", 7<<20) + `"}`)
	id := uuid.NewString()
	if _, err := b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: id, Value: value}); err != nil {
		t.Fatalf("create a 7 MiB value: %.300v", err)
	}
	got, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	if err != nil {
		t.Fatalf("read a 7 MiB value: %.300v", err)
	}
	if len(got) != len(value) {
		t.Errorf("read %d bytes, stored %d", len(got), len(value))
	}
}
