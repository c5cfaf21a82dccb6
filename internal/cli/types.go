package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/store"
)

func (a *app) typesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "types",
		Short: "List, show and delete Types",
		Long:  "Types are named, revisioned JSON Schemas. Register them with cairn apply.",
		Example: `  cairn types list --prefix cap.type.database
  cairn types get cap.type.database.postgresql.config:0.1.0 -o yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.typesListCommand(), a.typesGetCommand(), a.typesDeleteCommand())
	return cmd
}

func (a *app) typesListCommand() *cobra.Command {
	var prefix, parent string
	cmd := &cobra.Command{
		Use:   "list [--prefix PATH] [--parent PATH]",
		Short: "List Types, sorted by path and revision (newest first)",
		Example: `  cairn types list
  cairn types list --prefix cap.type.database
  cairn types list --parent cap.core.type.hub.storage -o json`,
		Args: usageArgs(cobra.NoArgs),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			list, err := h.ListTypes(cmd.Context(), store.TypeFilter{PathPrefix: prefix, Parent: parent})
			if err != nil {
				return err
			}
			if list == nil {
				list = []cairn.Type{}
			}
			if printed, err := a.printData(cmd.OutOrStdout(), list); printed {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No Types found.")
				return nil
			}
			return a.typeTable(cmd.OutOrStdout(), list)
		}),
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "path prefix: the path itself and every path below it")
	cmd.Flags().StringVar(&parent, "parent", "", "parent node the Types list in additionalRefs")
	return cmd
}

func (a *app) typeTable(w io.Writer, list []cairn.Type) error {
	t := newTable(w, "PATH", "REVISION", "ADDITIONAL REFS", "REST KIND", "AGE")
	now := a.env.Now()
	for _, ty := range list {
		rest := ""
		if ty.Names != nil {
			rest = ty.Names.Kind + "." + ty.Group + "/" + ty.Version
		}
		t.row(ty.Path, ty.Revision, strings.Join(ty.AdditionalRefs, ","), rest, age(now, ty.CreatedAt))
	}
	return t.flush()
}

// typeRefArg parses the PATH:REVISION argument of types get and delete.
func typeRefArg(arg string) (cairn.TypeRef, error) {
	p, r := splitRef(arg)
	if p == "" || r == "" {
		return cairn.TypeRef{}, usageErrorf("%q: want PATH:REVISION, e.g. cap.type.database.postgresql.config:0.1.0", arg)
	}
	return cairn.TypeRef{Path: p, Revision: r}, nil
}

func (a *app) typesGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get PATH:REVISION",
		Short: "Show one Type revision (-o yaml or json for its JSON Schema)",
		Example: `  cairn types get cap.type.database.postgresql.config:0.1.0
  cairn types get cap.type.database.postgresql.config:0.1.0 -o yaml`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			ref, err := typeRefArg(args[0])
			if err != nil {
				return err
			}
			t, err := h.GetType(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), t); printed {
				return err
			}
			return a.typeTable(cmd.OutOrStdout(), []cairn.Type{t})
		}),
	}
}

func (a *app) typesDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "delete PATH:REVISION",
		Short:   "Delete a Type revision that no TypeInstance uses",
		Example: `  cairn types delete cap.type.database.postgresql.config:0.1.0`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			ref, err := typeRefArg(args[0])
			if err != nil {
				return err
			}
			if err := h.DeleteType(cmd.Context(), ref); err != nil {
				return err
			}
			return a.printResults(cmd.OutOrStdout(), []applyResult{{Kind: kindType, Ref: ref.String(), Action: "deleted"}})
		}),
	}
}

// versionInfo is what cairn version reports, from the build information Go
// embeds in every binary (no linker flags needed).
type versionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version of cairn",
		Example: "  cairn version -o json",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := versionInfo{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if bi, ok := debug.ReadBuildInfo(); ok {
				if bi.Main.Version != "" {
					v.Version = bi.Main.Version
				}
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						v.Revision = s.Value
					case "vcs.modified":
						v.Modified = s.Value == "true"
					}
				}
			}
			if printed, err := a.printData(cmd.OutOrStdout(), v); printed {
				return err
			}
			line := "cairn " + v.Version
			if v.Revision != "" {
				line += " (" + v.Revision
				if v.Modified {
					line += ", modified"
				}
				line += ")"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s\n", line, v.GoVersion, v.Platform)
			return err
		},
	}
}
