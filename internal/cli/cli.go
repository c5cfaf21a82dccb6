// Package cli implements the cairn command line: cobra commands that are
// clients of the hub. Everything a command needs (standard streams, the
// environment, the clock) comes in through Env, so the whole CLI runs
// in-process in tests; only cmd/cairn touches the real process.
package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
	cairnclient "github.com/cairn-dev/cairn/client"
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
	// Username names the OS user running the command, for when neither
	// $USER nor $LOGNAME is set (containers, cron, systemd units); nil or ""
	// means unknown.
	Username func() string
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
	// encryptionConfig is --encryption-config: the file encrypting the
	// built-in backend's values at rest, empty for none.
	encryptionConfig string
	// sqliteSync is --sqlite-synchronous: normal or full.
	sqliteSync string
	strict     bool
	output     string
	as         string
	// asExplicit: --as was given; with credentials, only then is the
	// server asked to impersonate (Impersonate-User).
	asExplicit bool
	// backends holds the settings for reaching external storage backends.
	backends backendOptions

	// target is the server of server mode; its url is empty in local mode.
	target serverTarget
	// targetErr is why the server of a completion could not be resolved;
	// the completion then asks no hub.
	targetErr error
	// c is the invocation's client: of the server in server mode, of a hub
	// on the local store in local mode. Set before a command that needs it
	// runs (see needsClient).
	c cairnclient.Client
	// hub is the hub of local mode, nil in server mode: for the commands
	// whose two modes still differ (stack, trace, tf).
	hub *hub.Hub
	// closers release what opening c took (the local store), after the
	// command.
	closers []func() error
	// quietHub silences the local hub's warnings on stderr, for a command
	// that reports what they would say itself (backends recover).
	quietHub atomic.Bool
}

// warnHandler writes the local hub's warnings to stderr unless muted.
type warnHandler struct {
	slog.Handler
	mute *atomic.Bool
}

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.mute.Load() && h.Handler.Enabled(ctx, l)
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(as), h.mute}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name), h.mute}
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
	a, root, err := newRoot(env, args)
	if err != nil {
		printError(env.Stderr, err)
		return ExitCode(err)
	}
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	err = root.ExecuteContext(ctx)
	err = errors.Join(a.hint(err), a.close())
	if err == nil {
		return 0
	}
	printError(env.Stderr, err)
	return ExitCode(err)
}

// close releases what the invocation opened, newest first.
func (a *app) close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	a.closers = nil
	return errors.Join(errs...)
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (a *app) rootCommand() *cobra.Command {
	a.output = "table"
	root := &cobra.Command{
		Use:   "cairn",
		Short: "cairn is a typed state hub for infrastructure",
		Long: `cairn keeps typed, versioned instances of infrastructure and configuration state
(Types and TypeInstances) and delegates where each value lives to a storage backend.

Every command works the same in both modes:
  - local mode (the default): on the embedded SQLite store in --data-dir, or on
    the PostgreSQL database of --database (several cairn serve replicas can
    share one);
  - server mode: as a client of a cairn server, named by --server URL, $` + EnvServer + `,
    --context NAME or the current context of 'cairn config'; --server='' forces
    local mode.`,
		Example: `  cairn apply -f examples/quickstart
  cairn get typeinstances
  cairn list --type 'cap.type.database.*'
  cairn --server http://127.0.0.1:8080 policy explain cap.type.aws.auth.credentials`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Unknown subcommands and stray arguments are usage errors.
		Args:              usageArgs(cobra.NoArgs),
		RunE:              func(cmd *cobra.Command, args []string) error { return cmd.Help() },
		PersistentPostRun: func(cmd *cobra.Command, args []string) { noteDryRun(cmd) },
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			switch a.output {
			case "table", "json", "yaml":
			default:
				return usageErrorf("--output %q: want table, json or yaml", a.output)
			}
			if cmd.Annotations[noOutput] == "true" && cmd.Flags().Changed("output") {
				return usageErrorf("%s prints what it did, one line per object, and takes no --output", cmd.Name())
			}
			a.asExplicit = cmd.Flags().Changed("as")
			cmd.SetContext(cairn.WithActor(cmd.Context(), a.as))
			if err := dryRunContext(cmd); err != nil {
				return err
			}
			if !needsClient(cmd) {
				if a.dataDir == "" {
					return usageErrorf("no data directory: set --data-dir, %s, XDG_DATA_HOME or HOME", EnvDataDir)
				}
				return nil
			}
			if a.target.url != "" {
				// Settings of the hub this process would run: in server
				// mode the server has its own, so setting them is a mistake.
				for _, name := range []string{"strict", "database", "backend-timeout", "backend-tls"} {
					if cmd.Flags().Changed(name) {
						return usageErrorf("--%s configures the hub of local mode; the server at %s (from %s) has its own settings", name, a.target.url, a.target.from)
					}
				}
			}
			return a.openClient(cmd.Context())
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })

	strict, strictErr := parseBoolEnv(a.env.Getenv(EnvStrict))
	f := root.PersistentFlags()
	// Read by resolveServer before parsing, since they choose the mode;
	// declared so they parse and show in the help.
	f.String("server", "", "server URL, http://HOST:PORT: run as a client of that cairn server [$"+EnvServer+"]; '' for local mode")
	f.String("context", "", "context of the configuration file whose server to use")
	f.String("kubeconfig", "", "kubeconfig whose current context gives the server and its credentials (token or client certificate)")
	f.StringVar(&a.dataDir, "data-dir", a.defaultDataDir(), "directory of the embedded store (cairn.db) [$"+EnvDataDir+"]")
	f.BoolVar(&a.strict, "strict", strict, "refuse instances of unregistered Types [$"+EnvStrict+"]")
	f.StringVarP(&a.output, "output", "o", "table", "output format: table, json or yaml")
	f.StringVar(&a.as, "as", a.defaultActor(), "caller identity recorded as createdBy [$USER]")
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

	// -o table|json|yaml is every command's, except where a resource
	// command has kubectl's -o of its own (get, edit, ...); one that prints
	// no object (apply, delete, lock, ...) refuses it rather than ignore it.
	k := &kube{app: a}
	for _, c := range k.commands() {
		if c.Flags().Lookup("output") == nil {
			c.Annotations = map[string]string{noOutput: "true"}
		}
		root.AddCommand(c)
	}
	root.AddCommand(
		a.listCommand(),
		a.updateCommand(),
		a.typesCommand(),
		a.backendsCommand(),
		a.policyCommand(),
		a.proposalsCommand(),
		a.versionCommand(),
		a.migrateCommand(),
		a.backupCommand(),
		a.restoreCommand(),
		a.renderCommand(),
		a.tfCommand(),
		a.serveCommand(),
		a.backendServeCommand(),
		configCommand(a.env),
		loginCommand(a.env),
	)
	root.AddCommand(stackCommands(func(ctx context.Context, fn func(stackAPI) error) error {
		if a.hub != nil {
			return fn(hubStacks{a.hub}) // local mode
		}
		return fn(restStacks{a.c.Client})
	}, &a.output, false)...)
	root.AddCommand(installCommands(func(ctx context.Context, fn func(installAPI) error) error {
		if a.hub != nil {
			return fn(newHubInstalls(a.hub)) // local mode
		}
		return fn(restInstalls{a.c.Client})
	}, &a.output, false)...)
	k.registerCompletions(root)
	usageCompletion(root)
	return root
}

// usageCompletion adds cobra's completion command now rather than when the
// command line runs, so that its argument errors are usage errors (exit 2)
// like every other command's: an unknown shell printed the help and exited
// 0, an argument to a script's command exited 1.
func usageCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args = usageArgs(cobra.NoArgs)
		c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		for _, shell := range c.Commands() {
			shell.Args = usageArgs(cobra.NoArgs)
		}
	}
}

// noOutput annotates a command that refuses --output.
const noOutput = "cairn.dev/no-output"

// needsClient says whether cmd works with the hub (through a.c), rather
// than running on this machine alone (serve, migrate, backup, restore, backend, version,
// config, help).
func needsClient(cmd *cobra.Command) bool {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	if !top.HasParent() {
		return false // the root: help
	}
	switch top.Name() {
	case "serve", "migrate", "backup", "restore", "backend", "version", "config", "login", "render", "help", "completion", "__complete":
		return false
	}
	return true
}

func parseBoolEnv(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

// defaultActor is who a write is recorded as when --as is not given: $USER,
// else $LOGNAME, else the OS user running the command.
func (a *app) defaultActor() string {
	if u := cmp.Or(a.env.Getenv("USER"), a.env.Getenv("LOGNAME")); u != "" {
		return u
	}
	if a.env.Username != nil {
		return a.env.Username()
	}
	return ""
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

// openClient gives the invocation its client: of the server in server
// mode; in local mode, of a hub on the store (see openStore) that lives
// until the command ends.
func (a *app) openClient(ctx context.Context) error {
	if a.target.url != "" {
		opts, err := a.credentials()
		if err != nil {
			return cairn.Errorf(cairn.CodeInvalid, "the credentials of %s: %w", a.target.from, err)
		}
		c, err := client.New(a.target.url, opts...)
		if err != nil {
			return cairn.Errorf(cairn.CodeInvalid, "the server from %s: %w", a.target.from, err)
		}
		a.c = cairnclient.NewRemote(c)
		return nil
	}
	if a.dataDir == "" {
		return usageErrorf("no data directory: set --data-dir, %s, XDG_DATA_HOME or HOME", EnvDataDir)
	}
	h, err := a.openHub(ctx)
	if err != nil {
		return err
	}
	a.hub = h
	a.c = cairnclient.NewLocal(h, client.WithActor(a.as))
	return nil
}

// openHub opens the store and a hub on it, closed with the invocation.
func (a *app) openHub(ctx context.Context) (*hub.Hub, error) {
	st, err := a.openStore(ctx, nil)
	if err != nil {
		return nil, err
	}
	path := st.Where
	a.closers = append(a.closers, func() error {
		if err := st.Close(); err != nil {
			return fmt.Errorf("close the store %s: %w", path, err)
		}
		return nil
	})
	backends, err := a.backendOpener(nil)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() error { backends.Close(); return nil })
	// No read cache: a one-shot command reads a few objects, and loading
	// every instance first to answer them from memory costs seconds on a
	// large store (13.8 s for one get among 100,000; the store answers it in
	// milliseconds, as consistently).
	// Warnings reach the user: in local mode they are about this command
	// (a deleted value left in a backend that is down, a failed rollback),
	// and no server log keeps them. The hub never logs values.
	log := slog.New(warnHandler{slog.NewTextHandler(a.env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, at slog.Attr) slog.Attr {
			if len(groups) == 0 && at.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return at
		}}), &a.quietHub})
	h, err := hub.New(ctx, hub.Config{Store: st.Store, StoreKind: st.Kind, Strict: a.strict, Logger: log, Backends: a.withBackends(backends, nil), NoReadCache: true, SealedValues: st.Encryption.Seals})
	if err != nil {
		return nil, fmt.Errorf("start the hub on %s: %w", path, err)
	}
	if err := registerHubTypes(ctx, h); err != nil {
		return nil, err
	}
	return h, nil
}

// runE adapts a command body that needs the invocation's client.
func (a *app) runE(fn func(cmd *cobra.Command, args []string, h cairnclient.Client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return fn(cmd, args, a.c) }
}

// withClient runs fn with the invocation's client.
func (a *app) withClient(fn func(h cairnclient.Interface) error) error { return fn(a.c) }
