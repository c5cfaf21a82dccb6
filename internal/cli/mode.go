package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
)

// The CLI has two modes, chosen once per invocation before any command
// runs:
//
//   - client mode when a server is configured (--server URL, --context NAME,
//     $CAIRN_SERVER, or the current context of the configuration file): the
//     kubectl-like verbs (get, apply, create, replace, edit, delete,
//     describe, lock, unlock, api-resources) talk to that server through
//     api/rest/client and never open a store;
//   - local (offline) mode otherwise: the commands work on the store of
//     --data-dir (or --database) directly.
//
// Each mode has its own command tree, so a verb means one thing in each
// and the help of each shows only what works there. The commands that run
// on this machine in any case (serve, migrate, backend, version) and config
// exist in both.

// serverTarget is the server of client mode and where it was configured.
type serverTarget struct {
	url string
	// from says where url came from, for messages: "--server",
	// "$CAIRN_SERVER", `context "dev" of FILE`.
	from string
}

// sharedCommand reports whether a local command is also a command of
// client mode: it runs on this machine whatever the mode.
func sharedCommand(name string) bool {
	switch name {
	case "serve", "migrate", "backend", "version", "render":
		return true
	}
	return false
}

// localOnlyHint says what replaces a local command in client mode.
func localOnlyHint(name string) string {
	switch name {
	case "list":
		return "cairn get typeinstances (or get RESOURCE)"
	case "update":
		return "cairn edit typeinstance ID, cairn replace -f or cairn apply -f"
	case "types":
		return "cairn get types, cairn delete types PATH:REVISION"
	case "backends":
		return "cairn get backends (registering a backend works in local mode only)"
	}
	return "cairn api-resources and cairn --help"
}

// newRoot builds the command tree of the mode args and env select.
func newRoot(env Env, args []string) (*cobra.Command, error) {
	target, err := resolveServer(env, args)
	if err != nil {
		return nil, err
	}
	local := &app{env: env}
	lroot := local.rootCommand()
	if target.url == "" {
		// --server '' forces local mode; the flags must still parse.
		lroot.PersistentFlags().String("server", "", "server URL: run as a client of that cairn server (client mode) [$"+EnvServer+"]")
		lroot.PersistentFlags().String("context", "", "context of the configuration file whose server to use (client mode)")
		lroot.AddCommand(configCommand(env))
		lroot.Long += `

This is local mode. With a server (--server URL, $` + EnvServer + ` or the current context of
'cairn config') the CLI is a client of that server instead: see 'cairn --server URL --help'.`
		return lroot, nil
	}

	r := &remote{env: env, target: target}
	root := r.rootCommand()
	for _, c := range lroot.Commands() {
		name := c.Name()
		switch {
		case sharedCommand(name):
			lroot.RemoveCommand(c)
			adoptLocal(c, lroot)
			root.AddCommand(c)
		case hasCommand(root, name):
			// The client-mode verb of the same name replaces it.
		default:
			root.AddCommand(localOnly(name, target))
		}
	}
	root.AddCommand(configCommand(env))
	return root, nil
}

func hasCommand(root *cobra.Command, name string) bool {
	return slices.ContainsFunc(root.Commands(), func(c *cobra.Command) bool { return c.Name() == name })
}

// adoptLocal makes a command of the local tree work under the client-mode
// root: it gets the local root's persistent flags (--data-dir, --database,
// --strict, ...) and its checks, which cobra would otherwise only find on
// the local root.
func adoptLocal(c, lroot *cobra.Command) {
	c.PersistentFlags().AddFlagSet(lroot.PersistentFlags())
	own := c.PersistentPreRunE
	c.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := lroot.PersistentPreRunE(cmd, args); err != nil {
			return err
		}
		if own != nil {
			return own(cmd, args)
		}
		return nil
	}
}

// localOnly stands in for a local command in client mode, to say what to
// use instead rather than "unknown command".
func localOnly(name string, target serverTarget) *cobra.Command {
	return &cobra.Command{
		Use:                name,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("%q is a command of local mode, and the CLI is a client of %s (from %s); use %s, or run it offline with --server=''",
				name, target.url, target.from, localOnlyHint(name))
		},
	}
}

// resolveServer finds the server of client mode: --server, else the
// server of --context, else $CAIRN_SERVER, else the current context of the
// configuration file. An explicit empty --server means local mode. The flags
// are read before cobra parses them because they choose the command tree.
func resolveServer(env Env, args []string) (serverTarget, error) {
	server, hasServer := flagValue(args, "server")
	if hasServer {
		return serverTarget{url: server, from: "--server"}, nil
	}
	if name, ok := flagValue(args, "context"); ok {
		path := configPath(env)
		c, err := loadConfig(path)
		if err != nil {
			return serverTarget{}, err
		}
		x, found := c.context(name)
		if !found {
			return serverTarget{}, cairn.Errorf(cairn.CodeNotFound, "--context %q: no context exists with that name in %s", name, displayPath(path))
		}
		return serverTarget{url: x.Server, from: fmt.Sprintf("context %q of %s", name, path)}, nil
	}
	if s := env.Getenv(EnvServer); s != "" {
		return serverTarget{url: s, from: "$" + EnvServer}, nil
	}
	path := configPath(env)
	c, err := loadConfig(path)
	if err != nil {
		return serverTarget{}, err
	}
	if c.CurrentContext == "" {
		return serverTarget{}, nil
	}
	x, found := c.context(c.CurrentContext)
	if !found {
		return serverTarget{}, cairn.Errorf(cairn.CodeInvalid, "current-context %q of %s names no context; fix it with cairn config use-context", c.CurrentContext, path)
	}
	return serverTarget{url: x.Server, from: fmt.Sprintf("context %q of %s", x.Name, path)}, nil
}

// flagValue finds --name VALUE or --name=VALUE before a "--". The
// subcommand config set-context has a --server flag of its own; finding it
// here only makes that invocation build the client-mode tree, which has
// config too.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}
