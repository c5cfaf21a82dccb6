package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/peer"
)

// backendServing holds what every `cairn backend ...` service shares: where
// it listens, its TLS, its log level, and a --print-context-schema flag.
type backendServing struct {
	listen, certFile, keyFile, clientCA, logLevel string
	printSchema                                   bool
	// allowAnonymous serves callers without a client certificate on any
	// address, whoever they are.
	allowAnonymous bool
	log            *slog.Logger
}

// addFlags adds the shared flags; schemaHelp describes --print-context-schema.
func (s *backendServing) addFlags(cmd *cobra.Command, defaultListen, schemaHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&s.listen, "listen", defaultListen, "address to listen on, HOST:PORT (port 0 picks a free one)")
	fl.StringVar(&s.certFile, "tls-cert", "", "serve TLS with this certificate (PEM)")
	fl.StringVar(&s.keyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fl.StringVar(&s.clientCA, "client-ca", "", "require client certificates signed by this CA (PEM); without it only loopback is served, to local processes of this OS user (Linux)")
	fl.BoolVar(&s.allowAnonymous, "allow-anonymous", false, "serve callers without a client certificate on any address, whoever they are (insecure: they read and write every value)")
	addLogLevelFlag(cmd, &s.logLevel, "debug (every call), info, warn or error; values are never logged")
	fl.BoolVar(&s.printSchema, "print-context-schema", false, schemaHelp)
}

// printingSchema wraps run so that --print-context-schema prints schema
// and exits instead.
func (s *backendServing) printingSchema(schema string, run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if s.printSchema {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), schema)
			return err
		}
		return run(cmd, args)
	}
}

// setUp checks the flags and returns the logger and the TLS configuration
// (nil for plaintext).
func (s *backendServing) setUp(cmd *cobra.Command) (*slog.Logger, *tls.Config, error) {
	host, _, err := net.SplitHostPort(s.listen)
	if err != nil {
		return nil, nil, usageErrorf("--listen %q: want HOST:PORT: %v", s.listen, err)
	}
	if s.clientCA == "" && !s.allowAnonymous && !loopbackHost(host) {
		// A backend authenticates callers only by client certificate: on
		// another address anyone who reaches it reads and writes values.
		return nil, nil, usageErrorf("--listen %s is not a loopback address and no --client-ca is given: anyone who reaches it could read and write every value; give --tls-cert, --tls-key and --client-ca (or --allow-anonymous)", s.listen)
	}
	level, err := parseLogLevel(s.logLevel)
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	s.log = log
	tlsCfg, err := serverTLS(s.certFile, s.keyFile, s.clientCA)
	if err != nil {
		return nil, nil, err
	}
	return log, tlsCfg, nil
}

// listenOn opens the listener and says which URL scheme registers it.
func (s *backendServing) listenOn(ctx context.Context, tlsCfg *tls.Config) (net.Listener, string, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", s.listen)
	if err != nil {
		return nil, "", &cairn.Error{Code: cairn.CodeUnavailable, Msg: fmt.Sprintf("listen on %s: %v", s.listen, err), Err: err}
	}
	scheme := "grpc"
	if tlsCfg != nil {
		scheme = "grpcs"
	}
	if s.clientCA != "" || s.allowAnonymous {
		return lis, scheme, nil
	}
	// Loopback without client certificates: only processes of this OS
	// user, as cairn serve's peer authentication; another user of the
	// machine could otherwise read every value (and, through a projection,
	// every instance the backend can read).
	if !peer.Supported() {
		s.log.Warn("no --client-ca: every local process may call this backend (peer authentication is Linux-only)", "addr", lis.Addr().String())
		return lis, scheme, nil
	}
	uid := os.Getuid()
	s.log.Info("no --client-ca: serving local processes of this OS user only (peer authentication)", "addr", lis.Addr().String(), "uid", uid)
	return &peer.Listener{Listener: lis, UID: uid, Refused: func(client net.Addr, err error) {
		s.log.Warn("connection refused: not a local process of this OS user", "client", client.String(), "reason", err.Error())
	}}, scheme, nil
}

// loopbackHost reports whether host (of HOST:PORT) is localhost or a
// loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// addLogLevelFlag adds --log-level (default info) to a command that serves.
func addLogLevelFlag(cmd *cobra.Command, level *string, help string) {
	cmd.Flags().StringVar(level, "log-level", "info", help)
}

// parseLogLevel reads the value of --log-level.
func parseLogLevel(s string) (slog.Level, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s)); err != nil {
		return 0, usageErrorf("--log-level %q: want debug, info, warn or error", s)
	}
	return level, nil
}
