package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backup"
	"github.com/cairn-dev/cairn/controller/recovery"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

func (a *app) backupCommand() *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Write the metadata store to a backup file, online and consistent",
		Long: `backup writes everything the metadata store holds to FILE: Types, every
instance with all its resource versions, labels, annotations, status,
relations and lock, the values kept by the built-in backend, and the
change-log position. The store is that of --data-dir (the embedded SQLite
file) or --database (PostgreSQL); it is read in one snapshot while servers on
it go on serving, so the file is consistent without stopping anything. The
store is read as it is, never created or migrated: a missing store, and one
at an older schema version than this binary's, are refused (back it up with
the cairn that serves it, before an upgrade's cairn migrate).

The file is JSON lines with a version header and a SHA-256 trailer; cairn
restore checks both. It holds the built-in backend's values, which may be
secrets: it is created readable by its owner only. Values kept by other
backends (Git, external gRPC services) are not in it; back those up where
they live. See docs/reliability.md.`,
		Example: `  cairn backup --to cairn-$(date +%F).bak
  cairn backup --database "$CAIRN_DATABASE" --to - | gzip > cairn.bak.gz`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if to == "" {
				return usageErrorf("backup: --to FILE is required (- for standard output)")
			}
			ctx := cmd.Context()
			st, err := a.openStoreAsIs(ctx)
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			defer func() {
				if cerr := st.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("close the store %s: %w", st.Where, cerr)
				}
			}()
			snap, ok := st.Raw.(store.Snapshotter)
			if !ok {
				return cairn.Errorf(cairn.CodeInvalid, "backup: the %s store cannot take snapshots", st.Kind)
			}
			src := backup.Source{Store: st.Kind, SchemaVersion: st.Version}
			var sum backup.Summary
			if to == "-" {
				if sum, err = backup.Write(ctx, snap, a.env.Stdout, src); err != nil {
					return err
				}
				_, err = fmt.Fprintf(a.env.Stderr, "%s\n", backupLine(sum, st.Kind, st.Where, "standard output"))
				return err
			}
			if sum, err = writeFileAtomic(to, func(w io.Writer) (backup.Summary, error) { return backup.Write(ctx, snap, w, src) }); err != nil {
				return err
			}
			if done, err := a.printData(a.env.Stdout, sum); done {
				return err
			}
			_, err = fmt.Fprintf(a.env.Stdout, "%s\n", backupLine(sum, st.Kind, st.Where, to))
			return err
		},
	}
	c.Flags().StringVar(&to, "to", "", "the backup file to write (replaced only once complete); - for standard output")
	return c
}

func backupLine(s backup.Summary, kind, where, to string) string {
	return fmt.Sprintf("backed up %d Types and %d instances (%d resource versions, %d built-in values) at change-log position %d of the %s store %s to %s",
		s.Types, s.Instances, s.ResourceVersions, s.Values, s.Position, kind, where, to)
}

// writeFileAtomic writes path through a temporary file in the same
// directory, synced and renamed into place only when write succeeds, so
// path never holds a partial backup. The file is readable by its owner only.
func writeFileAtomic(path string, write func(io.Writer) (backup.Summary, error)) (backup.Summary, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return backup.Summary{}, fmt.Errorf("backup: create %s: %w", path, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return backup.Summary{}, fmt.Errorf("backup: %w", err)
	}
	sum, err := write(f)
	if err != nil {
		return backup.Summary{}, err
	}
	if err := f.Sync(); err != nil {
		return backup.Summary{}, fmt.Errorf("backup: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return backup.Summary{}, fmt.Errorf("backup: close %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return backup.Summary{}, fmt.Errorf("backup: %w", err)
	}
	ok = true
	return sum, nil
}

func (a *app) restoreCommand() *cobra.Command {
	var (
		from  string
		force bool
	)
	c := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Load a backup file into an empty metadata store",
		Long: `restore loads a file written by cairn backup into the metadata store of
--data-dir or --database. It reads and checks the whole file first (format
version, every record, counts, SHA-256) and then loads it in one transaction:
a damaged or partial file, or any failure on the way, changes nothing.

The target must be empty (a new data directory or database); --force replaces
whatever it holds. Stop the cairn servers on the target first: their caches
do not know about the restore, so a restore into a store a server is serving
(one holds its recovery lease) is refused; a server killed without stopping
holds it for up to 3 × its --recovery-interval. Leases in the backup are
restored released.

The change log of the restored store starts far beyond every position the
backed-up store handed out, so a client that resumes a watch with a
resourceVersion from before the restore gets 410 Gone and lists again, as
Kubernetes clients do. A backup of one store kind restores into the other
(SQLite to PostgreSQL and back); PostgreSQL keeps timestamps to the
microsecond.`,
		Example: `  cairn --data-dir /var/lib/cairn-new restore --from cairn-2026-11-23.bak
  cairn restore --database "$CAIRN_DATABASE" --from cairn.bak --force`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if from == "" {
				return usageErrorf("restore: --from FILE is required")
			}
			f, err := os.Open(from)
			if err != nil {
				code := cairn.CodeInvalid
				if errors.Is(err, os.ErrNotExist) {
					code = cairn.CodeNotFound
				}
				return &cairn.Error{Code: code, Msg: fmt.Sprintf("restore: %v", err), Err: err}
			}
			defer f.Close()
			// Check the file before the store is opened (and, for a new
			// data directory, created).
			if _, err := backup.Verify(f); err != nil {
				return fmt.Errorf("restore from %s: %w", from, err)
			}
			ctx := cmd.Context()
			st, err := a.openStore(ctx, nil)
			if err != nil {
				return err
			}
			defer func() {
				if cerr := st.Close(); cerr != nil && err == nil {
					err = fmt.Errorf("close the store %s: %w", st.Where, cerr)
				}
			}()
			if err := refuseServedStore(ctx, st.Raw, st.Where); err != nil {
				return err
			}
			sum, err := backup.Restore(ctx, st.Raw, f, backup.RestoreOptions{Force: force, BuiltinType: hub.BuiltinTypeRef(st.Kind), LeaseType: hub.LeaseTypeRef().Path})
			if err != nil {
				return fmt.Errorf("restore from %s into %s: %w", from, st.Where, err)
			}
			if done, err := a.printData(a.env.Stdout, sum); done {
				return err
			}
			_, err = fmt.Fprintf(a.env.Stdout, "restored %d Types and %d instances (%d resource versions, %d built-in values) from %s into the %s store %s; the change log restarts at %d, so watches from before get 410 Gone and list again\n",
				sum.Types, sum.Instances, sum.ResourceVersions, sum.Values, from, st.Kind, st.Where, sum.RestartedAt)
			return err
		},
	}
	c.Flags().StringVar(&from, "from", "", "the backup file to load")
	c.Flags().BoolVar(&force, "force", false, "replace the content of a store that is not empty")
	return c
}

// refuseServedStore refuses a restore into a store a cairn server is
// serving, --force or not: its caches would go on serving, and its writes
// building on, what the restore replaced. Every server runs the recovery
// controller, whose lease one of them holds and renews while it runs; one
// that stops releases it and another takes it over at once (a killed one's
// expires).
func refuseServedStore(ctx context.Context, st store.Reader, where string) error {
	l, err := hub.ReadLease(ctx, st, recovery.LeaseName)
	if err != nil {
		return fmt.Errorf("restore: read the recovery lease of %s: %w", where, err)
	}
	now := time.Now()
	if l.HandingOverAt(now) {
		// Given up by a server that stopped: another one still running
		// takes it within hub.LeaseHandover; look again after that.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(l.ReleaseTime.Add(hub.LeaseHandover).Sub(now)):
		}
		if l, err = hub.ReadLease(ctx, st, recovery.LeaseName); err != nil {
			return fmt.Errorf("restore: read the recovery lease of %s: %w", where, err)
		}
		now = time.Now()
	}
	if !l.HeldAt(now) {
		return nil
	}
	return cairn.Errorf(cairn.CodeConflict,
		"restore: a cairn server is serving this store (%s holds its recovery lease, renewed %s ago): stop every cairn serve on %s first, their caches would not see the restore; a server that was killed holds the lease until %s",
		l.Holder, now.Sub(l.RenewTime).Round(time.Second), where, l.RenewTime.Add(l.Duration()).Local().Format(time.RFC3339))
}
