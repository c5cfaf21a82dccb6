// Package grpc is the hub's client for external storage backends: it
// implements cairn.Backend over Capact's storage_backend gRPC protocol
// (proto/storage_backend.proto) and hub.BackendOpener, so the hub reaches any
// backend registered as {url, acceptValue, contextSchema}.
//
// A backend with acceptValue true is called through the
// ValueAndContextStorageBackend service, one with acceptValue false through
// ContextStorageBackend. The url is grpc:// or http://host:port (plaintext),
// grpcs:// or https://host:port, or plain host:port (TLS, or plaintext under
// Config.CapactURLs; see ParseURL and TLSFiles).
//
// The Opener keeps one connection per backend id and replaces it when the
// backend instance gets a new resource version (its url or settings may have
// changed). Every call has a deadline (Config.Timeout); the idempotent reads
// (GetValue, GetLockedBy, GetPreCreateValue) are retried a bounded number of
// times while the backend is Unavailable, writes never are. Errors carry
// cairn's codes and name the backend: `External backend "<id>": ...`.
package grpc

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cairn-dev/cairn"
	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
)

// Defaults of Config.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultReadAttempts = 3
	DefaultRetryBackoff = 100 * time.Millisecond
)

// maxMessageBytes is the largest answer taken from a backend, as
// sdk/storagebackend.MaxMessageBytes is the largest request its servers
// take: a value the hub accepts (REST takes 8 MiB bodies) must come back,
// which gRPC's default of 4 MiB refused.
const maxMessageBytes = 64 << 20

// Config configures an Opener.
type Config struct {
	// Timeout is the deadline of each call (each attempt of a retried
	// read). Default DefaultTimeout.
	Timeout time.Duration
	// ReadAttempts bounds the attempts of an idempotent read while the
	// backend answers Unavailable. Default DefaultReadAttempts; 1 disables
	// retries.
	ReadAttempts int
	// RetryBackoff is the wait before the first retry, doubled before each
	// next one. Default DefaultRetryBackoff.
	RetryBackoff time.Duration
	// TLS configures TLS per backend, keyed by backend id or alias (the id
	// wins when both are present). Backends without an entry are verified
	// against the system's roots.
	TLS map[string]TLSFiles
	// Logger receives one Debug record per call and a Warn per retry;
	// values and contexts are never logged. Nil discards.
	Logger *slog.Logger
	// DialOptions are appended to the Opener's own (tests, interceptors).
	DialOptions []grpclib.DialOption
	// CapactURLs reads urls as Capact's Local Hub does: a bare host:port is
	// plaintext rather than TLS (ParseCapactURL), and CapactE2EMockURL names
	// a backend that is never called.
	CapactURLs bool
}

// Opener opens (and caches) clients for external storage backends. It
// implements hub.BackendOpener and is safe for concurrent use.
type Opener struct {
	timeout      time.Duration
	readAttempts int
	backoff      time.Duration
	tls          map[string]*tls.Config
	log          *slog.Logger
	dialOptions  []grpclib.DialOption
	capactURLs   bool

	mu      sync.Mutex
	clients map[string]*Client // by backend id
	closed  bool
}

// New returns an Opener. It reads every TLS file now, so a bad one is
// reported at start rather than at the first call.
func New(cfg Config) (*Opener, error) {
	o := &Opener{
		timeout:      cfg.Timeout,
		readAttempts: cfg.ReadAttempts,
		backoff:      cfg.RetryBackoff,
		tls:          map[string]*tls.Config{},
		log:          cfg.Logger,
		dialOptions:  cfg.DialOptions,
		capactURLs:   cfg.CapactURLs,
		clients:      map[string]*Client{},
	}
	if o.timeout <= 0 {
		o.timeout = DefaultTimeout
	}
	if o.readAttempts <= 0 {
		o.readAttempts = DefaultReadAttempts
	}
	if o.backoff <= 0 {
		o.backoff = DefaultRetryBackoff
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for key, files := range cfg.TLS {
		c, err := files.load()
		if err != nil {
			errs = append(errs, fmt.Errorf("TLS configuration of backend %q: %w", key, err))
			continue
		}
		o.tls[key] = c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

// OpenBackend returns the client of a backend instance: the cached one
// unless the instance changed (resource version, url or acceptValue), in
// which case the old connection is closed and a new one made. It does no
// I/O: the connection is made by the first call.
func (o *Opener) OpenBackend(ctx context.Context, sb cairn.StorageBackend) (cairn.Backend, error) {
	if o.capactURLs && sb.URL == CapactE2EMockURL && !sb.Abstract {
		return capactMock{id: sb.ID}, nil
	}
	return o.client(sb)
}

func (o *Opener) client(sb cairn.StorageBackend) (*Client, error) {
	if sb.Abstract {
		return nil, backendErr(sb.ID, cairn.CodeInternal, "is abstract: the hub keeps its values itself, there is nothing to connect to", nil)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, backendErr(sb.ID, cairn.CodeUnavailable, "the backend client is closed", nil)
	}
	if c, ok := o.clients[sb.ID]; ok {
		if c.rv == sb.ResourceVersion && c.url == sb.URL && c.acceptValue == sb.AcceptValue {
			return c, nil
		}
		o.log.Info("backend instance changed; reconnecting", "backend", sb.ID, "resourceVersion", sb.ResourceVersion)
		delete(o.clients, sb.ID)
		c.close()
	}
	c, err := o.dial(sb)
	if err != nil {
		return nil, err
	}
	o.clients[sb.ID] = c
	return c, nil
}

func (o *Opener) dial(sb cairn.StorageBackend) (*Client, error) {
	parse := ParseURL
	if o.capactURLs {
		parse = ParseCapactURL
	}
	target, err := parse(sb.URL)
	if err != nil {
		return nil, backendErr(sb.ID, cairn.CodeInvalid, err.Error(), err)
	}
	creds := insecure.NewCredentials()
	tlsKey := cmp.Or(sb.Alias, sb.ID)
	clientCert := false
	if target.TLS {
		cfg, ok := o.tls[sb.ID]
		if ok {
			tlsKey = sb.ID
		} else if sb.Alias != "" {
			cfg, ok = o.tls[sb.Alias]
		}
		if !ok {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		clientCert = len(cfg.Certificates) > 0
		creds = credentials.NewTLS(cfg)
	}
	opts := append([]grpclib.DialOption{grpclib.WithTransportCredentials(creds),
		grpclib.WithDefaultCallOptions(grpclib.MaxCallRecvMsgSize(maxMessageBytes))}, o.dialOptions...)
	// The dns scheme is named so that nothing in the address is read as
	// another resolver's (unix:, xds:, passthrough:): a backend is a TCP
	// host and port, whoever registered it.
	conn, err := grpclib.NewClient("dns:///"+target.Addr, opts...)
	if err != nil {
		return nil, backendErr(sb.ID, cairn.CodeInvalid, fmt.Sprintf("url %q: %v", sb.URL, err), err)
	}
	c := &Client{
		o:           o,
		id:          sb.ID,
		rv:          sb.ResourceVersion,
		url:         sb.URL,
		target:      target,
		acceptValue: sb.AcceptValue,
		tlsKey:      tlsKey,
		clientCert:  clientCert,
		conn:        conn,
	}
	if sb.AcceptValue {
		c.value = pb.NewValueAndContextStorageBackendClient(conn)
	} else {
		c.context = pb.NewContextStorageBackendClient(conn)
	}
	return c, nil
}

// Close closes every connection. Clients handed out fail afterwards.
func (o *Opener) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	var errs []error
	for id, c := range o.clients {
		if err := c.close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to backend %q: %w", id, err))
		}
	}
	clear(o.clients)
	return errors.Join(errs...)
}

// backendErr names the backend in an error, as every error of this package does.
func backendErr(id string, code cairn.Code, msg string, err error) *cairn.Error {
	return &cairn.Error{Code: code, Msg: fmt.Sprintf("External backend %q: %s", id, msg), Err: err}
}

// tlsHint names the setting that usually fixes a failed TLS connection,
// from the words Go's crypto/tls and gRPC use for each failure. A backend
// that requires client certificates and refuses this one may close the
// connection before its alert arrives (TLS 1.3 sends it after the client's
// handshake is done), so a broken or reset connection gets that hint too.
func (c *Client) tlsHint(msg string) string {
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(msg, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("first record does not look like a TLS handshake"):
		return fmt.Sprintf("; if the backend serves plaintext, register its url as grpc://%s", c.target.Addr)
	case has("x509: certificate signed by unknown authority"):
		return fmt.Sprintf("; the backend's certificate is not signed by a CA cairn trusts: give the CA that signed it as caFile of %q in --backend-tls", c.tlsKey)
	case has("x509: certificate is valid for", "x509: certificate is not valid for any names"):
		return fmt.Sprintf("; the backend's certificate is for other names: set serverName of %q in --backend-tls to a name the certificate is for", c.tlsKey)
	case has("x509: certificate has expired or is not yet valid"):
		return "; the backend's certificate has expired (or is not valid yet): renew it"
	case !c.clientCert && has("tls: certificate required", "broken pipe", "connection reset"):
		return fmt.Sprintf("; if the backend requires a client certificate, set certFile and keyFile of %q in --backend-tls", c.tlsKey)
	case c.clientCert && has("remote error: tls:", "broken pipe", "connection reset"):
		return fmt.Sprintf("; if the backend requires client certificates, check that certFile of %q in --backend-tls is signed by a CA it trusts and still valid", c.tlsKey)
	case has("tls:", "handshake"):
		return fmt.Sprintf("; if the backend serves plaintext, register its url as grpc://%s", c.target.Addr)
	}
	return ""
}

// codeOf maps the protocol's gRPC codes to cairn's.
func codeOf(c codes.Code) cairn.Code {
	switch c {
	case codes.NotFound:
		return cairn.CodeNotFound
	case codes.AlreadyExists:
		return cairn.CodeAlreadyExists
	case codes.FailedPrecondition:
		return cairn.CodeLocked
	case codes.InvalidArgument:
		return cairn.CodeInvalid
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return cairn.CodeUnavailable
	default:
		// Unimplemented, Internal, Unknown, DataLoss, PermissionDenied,
		// Unauthenticated, OutOfRange: the backend or its setup is broken.
		return cairn.CodeInternal
	}
}

// MaxErrorText bounds the part of an error that a backend wrote (its gRPC
// status message) in what the hub shows and logs.
const MaxErrorText = cairn.MaxErrorText

// describe words a failed call's status for a user, with a hint where the
// cause is usually a setup mistake.
func (c *Client) describe(method string, err error) string {
	st := status.Convert(err)
	msg := st.Message()
	hintMsg := msg
	// The backend chose this text: it may be megabytes, or hold controls
	// that rewrite a terminal or a log line.
	msg = cairn.BoundText(msg, MaxErrorText)
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer within the deadline (%s): %s (gRPC DeadlineExceeded)", c.o.timeout, msg)
	case codes.Unavailable:
		hint := ""
		if c.target.TLS {
			hint = c.tlsHint(hintMsg)
		} else if strings.Contains(hintMsg, "preface") {
			hint = fmt.Sprintf("; if the backend serves TLS, register its url as grpcs://%s", c.target.Addr)
		}
		return fmt.Sprintf("unavailable at %s: %s (gRPC Unavailable)%s", c.target.Addr, msg, hint)
	case codes.Unimplemented:
		return fmt.Sprintf("does not implement %s (gRPC Unimplemented); is acceptValue (%t) right for it?", method, c.acceptValue)
	}
	return fmt.Sprintf("%s (gRPC %s)", msg, st.Code())
}
