package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
)

// The CLI has two modes, chosen once per invocation before any command
// runs, and one command tree:
//
//   - server mode when a server is configured (--server URL, --context NAME,
//     $CAIRN_SERVER, or the current context of the configuration file): the
//     commands talk to that server's REST API and never open a store;
//   - local mode otherwise: the commands work on a hub over the store of
//     --data-dir (or --database), in this process.
//
// A command is written once, against the invocation's client (app.c); the
// modes differ only in which client that is (see openClient). serve,
// migrate, backup, restore, backend, version and config run on this
// machine in either.

// serverTarget is the server of server mode and where it was configured.
type serverTarget struct {
	url string
	// from says where url came from, for messages: "--server",
	// "$CAIRN_SERVER", `context "dev" of FILE`.
	from string
	// creds are the credentials of the context or kubeconfig the server
	// came from; nil: none given (see app.credentials).
	creds *clientContext
}

// newRoot builds the command tree for the mode args and env select.
func newRoot(env Env, args []string) (*app, *cobra.Command, error) {
	if len(args) > 0 && args[0] == cobra.ShellCompRequestCmd {
		// A completion: its last argument is the word being typed, not a
		// value yet (--context d<Tab>), and a configuration that does not
		// resolve completes what needs no server rather than failing.
		target, err := resolveServer(env, args[:len(args)-1])
		a := &app{env: env, target: target, targetErr: err}
		return a, a.rootCommand(), nil
	}
	target, err := resolveServer(env, args)
	if err != nil {
		return nil, nil, err
	}
	a := &app{env: env, target: target}
	return a, a.rootCommand(), nil
}

// resolveServer finds the server of client mode: --server, else the
// server of --context, else $CAIRN_SERVER, else the current context of the
// configuration file. An explicit empty --server means local mode. The flags
// are read before cobra parses them because they choose the command tree.
func resolveServer(env Env, args []string) (serverTarget, error) {
	server, hasServer := flagValue(args, "server")
	if kc, ok := flagValue(args, "kubeconfig"); ok {
		x, err := loadKubeconfig(kc)
		if err != nil {
			return serverTarget{}, err
		}
		if hasServer {
			x.Server = server
		}
		return serverTarget{url: x.Server, from: "--kubeconfig " + kc, creds: &x}, nil
	}
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
		return serverTarget{url: x.Server, from: fmt.Sprintf("context %q of %s", name, path), creds: &x}, nil
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
	return serverTarget{url: x.Server, from: fmt.Sprintf("context %q of %s", x.Name, path), creds: &x}, nil
}

// flagValue finds --name VALUE or --name=VALUE before a "--". The
// subcommand config set-context has a --server flag of its own; finding it
// here only makes that invocation build the client-mode tree, which has
// config too.
func flagValue(args []string, name string) (value string, found bool) {
	// The last occurrence counts, as in cobra's parse (and kubectl's): an
	// alias that gives --server is overridden by another --server.
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			value, found = v, true
		} else if a == "--"+name && i+1 < len(args) {
			value, found = args[i+1], true
			i++
		}
	}
	return value, found
}
