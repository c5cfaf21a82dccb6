// Package cli implements the cairn command line: cobra commands that are
// clients of the hub. Everything a command needs (standard streams, the
// environment, the clock) comes in through Env, so the whole CLI runs
// in-process in tests; only cmd/cairn touches the real process.
package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// Env is what the CLI takes from the process it runs in.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads an environment variable (os.Getenv in the binary).
	Getenv func(string) string
	// Now is the clock used for ages; nil means time.Now.
	Now func() time.Time
}

// Environment variables the CLI reads.
const (
	EnvDataDir = "CAIRN_DATA_DIR"
	EnvStrict  = "CAIRN_STRICT"
)

// app holds the global flags and the environment of one invocation.
type app struct {
	env      Env
	dataDir  string
	database string // --database: PostgreSQL URL, empty for SQLite in dataDir
	strict   bool
	output   string
	as       string
	// backends holds the settings for reaching external storage backends.
	backends backendOptions
}

// Main runs the cairn command line with args (without the program name) and
// returns the process exit code. Errors are printed to env.Stderr.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Stdin == nil {
		env.Stdin = eofReader{}
	}
	root, err := newRoot(env, args)
	if err != nil {
		printError(env.Stderr, err)
		return ExitCode(err)
	}
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err = root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	printError(env.Stderr, err)
	return ExitCode(err)
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "cairn",
		Short: "cairn is a typed state hub for infrastructure",
		Long: `cairn keeps typed, versioned instances of infrastructure and configuration state
(Types and TypeInstances) and delegates where each value lives to a storage backend.

The commands work on the embedded SQLite store in --data-dir, or on the
PostgreSQL database of --database (several cairn serve replicas can share one).`,
		Example: `  cairn apply -f examples/quickstart
  cairn list --type 'cap.type.database.*'
  cairn describe 3f8a3c2e-...`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Unknown subcommands and stray arguments are usage errors.
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch a.output {
			case "table", "json", "yaml":
			default:
				return usageErrorf("--output %q: want table, json or yaml", a.output)
			}
			if a.dataDir == "" {
				return usageErrorf("no data directory: set --data-dir, %s, XDG_DATA_HOME or HOME", EnvDataDir)
			}
			cmd.SetContext(cairn.WithActor(cmd.Context(), a.as))
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })

	strict, strictErr := parseBoolEnv(a.env.Getenv(EnvStrict))
	f := root.PersistentFlags()
	f.StringVar(&a.dataDir, "data-dir", a.defaultDataDir(), "directory of the embedded store (cairn.db) [$"+EnvDataDir+"]")
	f.BoolVar(&a.strict, "strict", strict, "refuse instances of unregistered Types [$"+EnvStrict+"]")
	f.StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	f.StringVar(&a.as, "as", cmp.Or(a.env.Getenv("USER"), a.env.Getenv("LOGNAME")), "caller identity recorded as createdBy [$USER]")
	a.addBackendFlags(root)
	a.addStoreFlags(root)
	if strictErr != nil {
		// Report a malformed environment variable when a command runs, as a
		// usage error, rather than ignoring it.
		prev := root.PersistentPreRunE
		root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("strict") {
				return usageErrorf("%s=%q: %v", EnvStrict, a.env.Getenv(EnvStrict), strictErr)
			}
			return prev(cmd, args)
		}
	}

	root.AddCommand(
		a.applyCommand(),
		a.getCommand(),
		a.listCommand(),
		a.describeCommand(),
		a.updateCommand(),
		a.deleteCommand(),
		a.lockCommand(true),
		a.lockCommand(false),
		a.typesCommand(),
		a.versionCommand(),
		a.serveCommand(),
		a.migrateCommand(),
		a.backendsCommand(),
		a.backendServeCommand(),
		a.policyCommand(),
		a.proposalsCommand(),
		a.renderCommand(),
		a.tfCommand(),
	)
	root.AddCommand(stackCommands(func(ctx context.Context, fn func(stackAPI) error) error {
		return a.withHub(ctx, func(h *hub.Hub) error { return fn(hubStacks{h}) })
	}, &a.output, false)...)
	return root
}

func parseBoolEnv(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

// defaultDataDir follows the XDG base directory spec.
func (a *app) defaultDataDir() string {
	if d := a.env.Getenv(EnvDataDir); d != "" {
		return d
	}
	if d := a.env.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "cairn")
	}
	if h := a.env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "cairn")
	}
	return ""
}

// withHub opens the store (see openStore) and a hub on it for the duration
// of fn.
func (a *app) withHub(ctx context.Context, fn func(h *hub.Hub) error) (err error) {
	st, err := a.openStore(ctx, nil)
	if err != nil {
		return err
	}
	path := st.Where
	defer func() {
		if cerr := st.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close the store %s: %w", path, cerr)
		}
	}()
	backends, err := a.backendOpener(nil)
	if err != nil {
		return err
	}
	defer backends.Close()
	h, err := hub.New(ctx, hub.Config{Store: st, StoreKind: st.Kind, Strict: a.strict, Backends: a.withBackends(backends, nil)})
	if err != nil {
		return fmt.Errorf("start the hub on %s: %w", path, err)
	}
	if err := registerHubTypes(ctx, h); err != nil {
		return err
	}
	return fn(h)
}

// runE adapts a command body that needs the hub.
func (a *app) runE(fn func(cmd *cobra.Command, args []string, h *hub.Hub) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return a.withHub(cmd.Context(), func(h *hub.Hub) error { return fn(cmd, args, h) })
	}
}
