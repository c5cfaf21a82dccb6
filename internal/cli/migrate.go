package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// migrateResult is what migrate prints.
type migrateResult struct {
	Store   string `json:"store"`
	Where   string `json:"where"`
	Version int    `json:"schemaVersion"`
}

func (a *app) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the metadata store's schema migrations and print its version",
		Long: `migrate brings the metadata store's schema to the version this cairn binary
knows and prints it: the embedded SQLite store in --data-dir, or the PostgreSQL
database of --database (or CAIRN_DATABASE).

cairn serve applies the same migrations at start-up, one step per transaction
under a lock, so replicas starting together migrate once. Run migrate first to
upgrade a shared database before rolling out a new cairn. A database migrated
by a newer cairn is refused: upgrade cairn instead.`,
		Example: `  cairn migrate
  cairn migrate --database 'postgres://cairn:secret@db:5432/cairn?sslmode=require'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			st, err := a.openStore(cmd.Context(), nil)
			if err != nil {
				return err
			}
			defer func() {
				if cerr := st.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("close the store %s: %w", st.Where, cerr)
				}
			}()
			res := migrateResult{Store: st.Kind, Where: st.Where, Version: st.Version}
			if done, err := a.printData(a.env.Stdout, res); done {
				return err
			}
			_, err = fmt.Fprintf(a.env.Stdout, "%s store %s: schema version %d\n", st.Kind, st.Where, st.Version)
			return err
		},
	}
}
