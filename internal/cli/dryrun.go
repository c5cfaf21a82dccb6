package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
)

// addDryRunFlag gives a write command kubectl's --dry-run. Both "server"
// and "client" run the hub's dry run (cairn.WithDryRun; in client mode the
// server's, as dryRun=All): every check of cairn's lives in the hub, so a
// dry run that never reached it could check nothing.
func addDryRunFlag(cmd *cobra.Command) {
	cmd.Flags().String("dry-run", "none", `"server" or "client" (a bare --dry-run is client, as in kubectl): run every check of the write (validation, policy, locks, conflicts) and change nothing, no backend called; "none": write`)
	// A bare --dry-run is kubectl's deprecated spelling of client; without
	// a default for it the flag would swallow the next argument.
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunBare
}

// dryRunBare is the value a bare --dry-run gets, as in kubectl.
const dryRunBare = "unchanged"

// dryRunContext puts a dry run in cmd's context when its --dry-run asks
// for one; the roots call it before every command.
func dryRunContext(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("dry-run")
	if f == nil {
		return nil
	}
	switch v := f.Value.String(); v {
	case "none":
		return nil
	case dryRunBare:
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: --dry-run is deprecated and can be replaced with --dry-run=client.")
		if err := f.Value.Set("client"); err != nil {
			return err
		}
		cmd.SetContext(cairn.WithDryRun(cmd.Context()))
		return nil
	case "server", "client":
		cmd.SetContext(cairn.WithDryRun(cmd.Context()))
		return nil
	default:
		return usageErrorf("--dry-run %q: want none, server or client", v)
	}
}

// noteDryRun says on standard error that a dry run changed nothing; the
// output above it shows what the write would have done.
func noteDryRun(cmd *cobra.Command) {
	if cairn.IsDryRun(cmd.Context()) {
		fmt.Fprintf(cmd.ErrOrStderr(), "dry run (--dry-run=%s): nothing was changed\n", cmd.Flags().Lookup("dry-run").Value)
	}
}
