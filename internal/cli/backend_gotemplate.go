package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/sdk/storagebackend"
)

func (a *app) backendGotemplateCommand() *cobra.Command {
	var server string
	var sv backendServing
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
		Example: `  cairn backend gotemplate --listen 127.0.0.1:5052 --server http://127.0.0.1:8080`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server == "" {
				return usageErrorf("backend gotemplate needs --server URL (the hub's REST API)")
			}
			log, tlsCfg, err := sv.setUp(cmd)
			if err != nil {
				return err
			}
			c, err := client.New(server)
			if err != nil {
				return cairn.Errorf(cairn.CodeInvalid, "--server %q: %w", server, err)
			}
			srv := storagebackend.NewContextServer(gotemplate.New(c), storagebackend.Options{Logger: log, TLS: tlsCfg})
			ctx := cmd.Context()
			lis, scheme, err := sv.listenOn(ctx, tlsCfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "gotemplate backend serving at %s://%s, reading instances from %s\n", scheme, lis.Addr(), server)
			return srv.Serve(ctx, lis)
		},
	}
	sv.addFlags(cmd, "127.0.0.1:5052", "print the projection context schema and exit")
	cmd.Flags().StringVar(&server, "server", "", "URL of the hub's REST API, e.g. http://127.0.0.1:8080")
	cmd.RunE = sv.printingSchema(gotemplate.ContextSchema, cmd.RunE)
	return cmd
}
