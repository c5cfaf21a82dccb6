package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
)

// backendServing holds what every `cairn backend ...` service shares: where
// it listens, its TLS, its log level, and a --print-context-schema flag.
type backendServing struct {
	listen, certFile, keyFile, clientCA, logLevel string
	printSchema                                   bool
}

// addFlags adds the shared flags; schemaHelp describes --print-context-schema.
func (s *backendServing) addFlags(cmd *cobra.Command, defaultListen, schemaHelp string) {
	fl := cmd.Flags()
	fl.StringVar(&s.listen, "listen", defaultListen, "address to listen on, HOST:PORT (port 0 picks a free one)")
	fl.StringVar(&s.certFile, "tls-cert", "", "serve TLS with this certificate (PEM)")
	fl.StringVar(&s.keyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fl.StringVar(&s.clientCA, "client-ca", "", "require client certificates signed by this CA (PEM)")
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
	if _, _, err := net.SplitHostPort(s.listen); err != nil {
		return nil, nil, usageErrorf("--listen %q: want HOST:PORT: %v", s.listen, err)
	}
	level, err := parseLogLevel(s.logLevel)
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
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
	if tlsCfg != nil {
		return lis, "grpcs", nil
	}
	return lis, "grpc", nil
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
