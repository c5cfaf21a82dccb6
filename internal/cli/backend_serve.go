package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/file"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

func (a *app) backendServeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backend",
		Short: "Run a storage backend service",
		Long: `backend runs one of cairn's example storage backends as a gRPC service that
speaks the storage_backend protocol. Register it with 'cairn backends register'.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.backendFileCommand(), a.backendGotemplateCommand())
	return cmd
}

func (a *app) backendFileCommand() *cobra.Command {
	var dir, source string
	var sv backendServing
	cmd := &cobra.Command{
		Use:   "file --dir DIR --listen HOST:PORT",
		Short: "Serve the file storage backend: values and locks in files under DIR",
		Long: `file serves a storage backend that keeps each TypeInstance's values in files,
one per resource version, DIR/<id>/<version>.json, and its lock in DIR/<id>/lock.
Writes are atomic (temporary file, then rename).

With --source SRC it takes only a context instead, {"file": "<path in SRC>"}, and
a TypeInstance's value is that file's content (register it without
--accept-value and with the context schema 'cairn backend file --print-context-schema' shows).

It serves plaintext unless --tls-cert and --tls-key are given; --client-ca then
requires client certificates signed by that CA. Without --client-ca it listens
on loopback only and, on Linux, serves only local processes of its own OS user
(--allow-anonymous: anyone, on any address). It runs until SIGINT or
SIGTERM, then lets calls in flight finish. Health: grpc.health.v1.`,
		Example: `  cairn backend file --dir ./values --listen 127.0.0.1:5051
  cairn backends register --url grpc://127.0.0.1:5051 --accept-value --alias files`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usageErrorf("backend file needs --dir")
			}
			log, tlsCfg, err := sv.setUp(cmd)
			if err != nil {
				return err
			}
			fb, err := file.New(file.Config{Dir: dir, Source: source})
			if err != nil {
				return cairn.Errorf(cairn.CodeInvalid, "%w", err)
			}
			defer fb.Close()
			opts := storagebackend.Options{Logger: log, TLS: tlsCfg}
			var srv *storagebackend.Server
			if fb.AcceptValue() {
				srv = storagebackend.NewValueServer(fb, opts)
			} else {
				srv = storagebackend.NewContextServer(fb, opts)
			}
			ctx := cmd.Context()
			lis, scheme, err := sv.listenOn(ctx, tlsCfg)
			if err != nil {
				return err
			}
			addr := lis.Addr().String()
			register := "--accept-value"
			if !fb.AcceptValue() {
				register = "--context-schema FILE (see --help)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "file backend serving %s at %s://%s\n", dir, scheme, addr)
			fmt.Fprintf(cmd.OutOrStdout(), "register it with: cairn backends register --url %s://%s %s\n", scheme, addr, register)
			// Serve stops gracefully when ctx ends: main cancels it on
			// SIGINT and SIGTERM.
			return srv.Serve(ctx, lis)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "", "directory for values and locks (created if missing)")
	fl.StringVar(&source, "source", "", "context-only mode: values are the files under this directory that contexts name")
	// A flag rather than a subcommand so the schema is where the mode is.
	sv.addFlags(cmd, "127.0.0.1:5051", "print the context schema of the --source mode and exit")
	cmd.RunE = sv.printingSchema(file.ContextSchema, cmd.RunE)
	return cmd
}

// serverTLS builds the server's TLS configuration from PEM files; nil when
// none is asked for.
func serverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		if clientCA != "" {
			return nil, usageErrorf("--client-ca needs --tls-cert and --tls-key")
		}
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "--tls-cert %s / --tls-key %s: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fileError(clientCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, cairn.Errorf(cairn.CodeInvalid, "--client-ca %s: no PEM certificate in it", clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
