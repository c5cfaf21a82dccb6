package storagebackend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
)

// MaxMessageBytes is the largest request the server takes, and the largest
// answer the hub's client (backend/grpc) takes: values the hub accepts
// (REST takes bodies of 8 MiB) must cross the protocol, which gRPC's
// default of 4 MiB refused.
const MaxMessageBytes = 64 << 20

// Options configure a Server. The zero value serves plaintext and logs
// nothing.
type Options struct {
	// Logger receives one record per call (Debug when it succeeds, Info
	// when the backend refused it, Error when it failed) and the server's
	// lifecycle (Info). Nil discards.
	Logger *slog.Logger
	// TLS, when not nil, makes the server speak TLS. To require client
	// certificates set ClientAuth and ClientCAs.
	TLS *tls.Config
	// ShutdownTimeout bounds how long calls in flight may run once shutdown
	// starts; after it they are cancelled. Default 10s.
	ShutdownTimeout time.Duration
	// ServerOptions are appended to the server's own options.
	ServerOptions []grpc.ServerOption
}

// Server serves one backend over gRPC.
type Server struct {
	grpc            *grpc.Server
	health          *health.Server
	log             *slog.Logger
	shutdownTimeout time.Duration
	service         string
}

// NewValueServer returns a server for a backend that stores values
// (service storage_backend.ValueAndContextStorageBackend).
func NewValueServer(b ValueBackend, opts Options) *Server {
	s := newServer(opts, pb.ValueAndContextStorageBackend_ServiceDesc.ServiceName)
	pb.RegisterValueAndContextStorageBackendServer(s.grpc, &valueService{b: b})
	return s
}

// NewContextServer returns a server for a backend that derives values from
// contexts (service storage_backend.ContextStorageBackend).
func NewContextServer(b ContextBackend, opts Options) *Server {
	s := newServer(opts, pb.ContextStorageBackend_ServiceDesc.ServiceName)
	pb.RegisterContextStorageBackendServer(s.grpc, &contextService{b: b})
	return s
}

func newServer(opts Options, service string) *Server {
	s := &Server{
		log:             opts.Logger,
		shutdownTimeout: opts.ShutdownTimeout,
		service:         service,
		health:          health.NewServer(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.shutdownTimeout <= 0 {
		s.shutdownTimeout = 10 * time.Second
	}
	so := []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.intercept), grpc.MaxRecvMsgSize(MaxMessageBytes)}
	if opts.TLS != nil {
		so = append(so, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	s.grpc = grpc.NewServer(append(so, opts.ServerOptions...)...)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	// "" is the server as a whole, the service name is the backend; both
	// are NOT_SERVING until Serve runs.
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(service, healthpb.HealthCheckResponse_NOT_SERVING)
	return s
}

// ServiceName is the full gRPC service name the server implements.
func (s *Server) ServiceName() string { return s.service }

// Serve serves on lis until ctx is done, then stops gracefully: health
// checks answer NOT_SERVING, new calls are refused, and calls in flight get
// Options.ShutdownTimeout to finish. It returns nil after a shutdown asked
// for through ctx, and the listener's error otherwise. lis is closed.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(s.service, healthpb.HealthCheckResponse_SERVING)
	s.log.InfoContext(ctx, "storage backend serving", "service", s.service, "addr", lis.Addr().String())

	served := make(chan error, 1)
	go func() { served <- s.grpc.Serve(lis) }()
	select {
	case err := <-served:
		s.health.Shutdown()
		return fmt.Errorf("serve %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}

	s.log.InfoContext(ctx, "storage backend shutting down", "timeout", s.shutdownTimeout.String())
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(s.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.log.WarnContext(ctx, "calls still running after the shutdown timeout; cancelling them")
		s.grpc.Stop()
		<-stopped
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve %s: %w", lis.Addr(), err)
	}
	s.log.InfoContext(ctx, "storage backend stopped")
	return nil
}

// ListenAndServe listens on addr (host:port) and serves until ctx is done
// or the process receives SIGINT or SIGTERM, then stops gracefully.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, lis)
}

// Stop stops the server at once, failing calls in flight. Tests use it to
// simulate a backend that dies.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.grpc.Stop()
}

// instanceRequest is implemented by every request that names an instance.
type instanceRequest interface{ GetTypeInstanceId() string }

// revisionRequest is implemented by requests that name a resource version.
type revisionRequest interface{ GetResourceVersion() uint32 }

type newRevisionRequest interface{ GetNewResourceVersion() uint32 }

// intercept logs each call without its payload, turns backend errors into
// the protocol's status codes and a panic into Internal.
func (s *Server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			s.log.ErrorContext(ctx, "storage backend panicked", "method", info.FullMethod, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "%s: the backend failed unexpectedly", info.FullMethod)
		}
	}()
	resp, err = handler(ctx, req)
	err = toStatus(err)

	attrs := []any{"method", info.FullMethod, "duration", time.Since(start).String()}
	if r, ok := req.(instanceRequest); ok {
		attrs = append(attrs, "instance", r.GetTypeInstanceId())
	}
	if r, ok := req.(revisionRequest); ok {
		attrs = append(attrs, "resourceVersion", r.GetResourceVersion())
	}
	if r, ok := req.(newRevisionRequest); ok {
		attrs = append(attrs, "resourceVersion", r.GetNewResourceVersion())
	}
	code := status.Code(err)
	attrs = append(attrs, "code", code.String())
	switch code {
	case codes.OK:
		s.log.DebugContext(ctx, "call", attrs...)
	case codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.InvalidArgument, codes.Canceled, codes.DeadlineExceeded:
		s.log.InfoContext(ctx, "call refused", append(attrs, "err", err.Error())...)
	default:
		s.log.ErrorContext(ctx, "call failed", append(attrs, "err", err.Error())...)
	}
	return resp, err
}

// toStatus maps a backend's error onto the protocol's gRPC codes. An error
// that already is a gRPC status passes through.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var code codes.Code
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	default:
		code = codeOf(cairn.ErrorCode(err))
	}
	return status.Error(code, err.Error())
}

func codeOf(c cairn.Code) codes.Code {
	switch c {
	case cairn.CodeNotFound:
		return codes.NotFound
	case cairn.CodeAlreadyExists:
		return codes.AlreadyExists
	case cairn.CodeLocked:
		return codes.FailedPrecondition
	case cairn.CodeInvalid:
		return codes.InvalidArgument
	case cairn.CodeUnavailable:
		return codes.Unavailable
	case cairn.CodeConflict, cairn.CodeUsedBy:
		return codes.Aborted
	default:
		return codes.Internal
	}
}
