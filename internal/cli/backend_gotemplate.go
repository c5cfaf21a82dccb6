package cli

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/backend/gotemplate/hubrest"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

func (a *app) backendGotemplateCommand() *cobra.Command {
	var listen, server, certFile, keyFile, clientCA, logLevel string
	cmd := &cobra.Command{
		Use:   "gotemplate --listen HOST:PORT --server URL",
		Short: "Serve the Go-template projection backend, reading instances from a hub's REST API",
		Long: `gotemplate serves the projection backend of seed 000 as an external storage
backend (context-only). Every hub also runs it in-process (alias gotemplate), so
this is for running it elsewhere. It reads the instances a projection references
through the REST API of the hub at --server and keeps nothing itself.

Register it with the gotemplate Type, so the hub resolves aliases and adds uses
edges for its instances, and with another alias than the in-process one:
  cairn backends register --url grpc://HOST:PORT --type ` + gotemplate.TypePath + `:` + cairn.CoreRevision + ` \
    --context-schema <(cairn backend gotemplate --print-context-schema) --alias gotemplate-remote`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" {
				return usageErrorf("backend gotemplate needs --server URL (the hub's REST API)")
			}
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return usageErrorf("--listen %q: want HOST:PORT: %v", listen, err)
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErrorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			tlsCfg, err := serverTLS(certFile, keyFile, clientCA)
			if err != nil {
				return err
			}
			c, err := client.New(server)
			if err != nil {
				return cairn.Errorf(cairn.CodeInvalid, "--server %q: %w", server, err)
			}
			srv := storagebackend.NewContextServer(gotemplate.New(hubrest.New(c)), storagebackend.Options{Logger: log, TLS: tlsCfg})
			ctx := cmd.Context()
			var lc net.ListenConfig
			lis, err := lc.Listen(ctx, "tcp", listen)
			if err != nil {
				return &cairn.Error{Code: cairn.CodeUnavailable, Msg: fmt.Sprintf("listen on %s: %v", listen, err), Err: err}
			}
			scheme := "grpc"
			if tlsCfg != nil {
				scheme = "grpcs"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "gotemplate backend serving at %s://%s, reading instances from %s\n", scheme, lis.Addr(), server)
			return srv.Serve(ctx, lis)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:5052", "address to listen on, HOST:PORT (port 0 picks a free one)")
	fl.StringVar(&server, "server", "", "URL of the hub's REST API, e.g. http://127.0.0.1:8080")
	fl.StringVar(&certFile, "tls-cert", "", "serve TLS with this certificate (PEM)")
	fl.StringVar(&keyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fl.StringVar(&clientCA, "client-ca", "", "require client certificates signed by this CA (PEM)")
	fl.StringVar(&logLevel, "log-level", "info", "debug (every call), info, warn or error; values are never logged")
	var printSchema bool
	fl.BoolVar(&printSchema, "print-context-schema", false, "print the projection context schema and exit")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if printSchema {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), gotemplate.ContextSchema)
			return err
		}
		return run(cmd, args)
	}
	return cmd
}
