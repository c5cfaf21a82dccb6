package cli

import (
	"fmt"

	"github.com/cairn-dev/cairn/atrest"

	"github.com/spf13/cobra"
)

// migrateResult is what migrate prints.
type migrateResult struct {
	Store   string `json:"store"`
	Where   string `json:"where"`
	Version int    `json:"schemaVersion"`
	// Reencrypted is set by --reencrypt.
	Reencrypted *reencryptResult `json:"reencrypted,omitempty"`
}

type reencryptResult struct {
	Instances int `json:"instances"`
	Values    int `json:"values"`
	Rewritten int `json:"rewritten"`
}

func (a *app) migrateCommand() *cobra.Command {
	var (
		reencrypt bool
		batch     int
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the metadata store's schema migrations and print its version",
		Long: `migrate brings the metadata store's schema to the version this cairn binary
knows and prints it: the embedded SQLite store in --data-dir, or the PostgreSQL
database of --database (or CAIRN_DATABASE).

cairn serve applies the same migrations at start-up, one step per transaction
under a lock, so replicas starting together migrate once. Run migrate first to
upgrade a shared database before rolling out a new cairn. A database migrated
by a newer cairn is refused: upgrade cairn instead.

With --reencrypt it then rewrites every value of the built-in backend that is
not stored the way --encryption-config writes it now: plaintext values of Types
the config encrypts, values under an older key after a new key was put first
(or encrypted values of Types the config now leaves in plaintext). It works in
batches of --batch instances, one short transaction each, while servers keep
serving; an interrupted run is resumed by running it again, since values
already current are skipped. Every key still in use must stay listed in the
config until the run has finished.`,
		Example: `  cairn migrate
  cairn migrate --database 'postgres://cairn:secret@db:5432/cairn?sslmode=require'
  cairn migrate --encryption-config /etc/cairn/encryption.yaml --reencrypt`,
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
			if reencrypt {
				p, err := atrest.Reencrypt(cmd.Context(), st.Raw, st.Encryption, batch, func(p atrest.Progress) {
					fmt.Fprintf(a.env.Stderr, "re-encrypt: %d instances, %d values looked at, %d rewritten\n", p.Instances, p.Values, p.Rewritten)
				})
				if err != nil {
					return fmt.Errorf("%w (run cairn migrate --reencrypt again to resume; %d values were rewritten)", err, p.Rewritten)
				}
				res.Reencrypted = &reencryptResult{Instances: p.Instances, Values: p.Values, Rewritten: p.Rewritten}
			}
			if done, err := a.printData(a.env.Stdout, res); done {
				return err
			}
			if _, err = fmt.Fprintf(a.env.Stdout, "%s store %s: schema version %d\n", st.Kind, st.Where, st.Version); err != nil {
				return err
			}
			if r := res.Reencrypted; r != nil {
				_, err = fmt.Fprintf(a.env.Stdout, "re-encrypted: %d of %d values rewritten (%d instances)\n", r.Rewritten, r.Values, r.Instances)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&reencrypt, "reencrypt", false, "rewrite every built-in value with the current write key of --encryption-config")
	cmd.Flags().IntVar(&batch, "batch", 100, "instances per transaction for --reencrypt")
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		if reencrypt && a.encryptionConfig == "" {
			return usageErrorf("--reencrypt needs --encryption-config (or $%s): the keys to write with", EnvEncryptionConfig)
		}
		if batch <= 0 {
			return usageErrorf("--batch %d: want a positive number of instances", batch)
		}
		return nil
	}
	return cmd
}
