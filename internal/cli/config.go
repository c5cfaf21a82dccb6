package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
)

// Environment variables of client mode.
const (
	// EnvServer is the server URL; it puts the CLI in client mode.
	EnvServer = "CAIRN_SERVER"
	// EnvConfig is the path of the client configuration file.
	EnvConfig = "CAIRN_CONFIG"
	// EnvEditor is the editor of cairn edit, before $EDITOR.
	EnvEditor = "CAIRN_EDITOR"
)

// clientConfig is the client configuration file: named servers
// (contexts) and the current one, as in a kubeconfig but with nothing
// beyond the server URL yet.
//
//	current-context: dev
//	contexts:
//	- name: dev
//	  server: http://127.0.0.1:8080
type clientConfig struct {
	CurrentContext string          `json:"current-context,omitempty"`
	Contexts       []clientContext `json:"contexts"`
}

type clientContext struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	// Credentials, as a kubeconfig's user: a bearer token (cairn login
	// --token) or a client certificate and key; the CA the server's
	// certificate is checked against.
	Token                string `json:"token,omitempty"`
	ClientCertificate    string `json:"client-certificate,omitempty"`
	ClientKey            string `json:"client-key,omitempty"`
	CertificateAuthority string `json:"certificate-authority,omitempty"`
	// A kubeconfig's inline data (certificate-authority-data and the
	// like), kept in memory and used instead of the files: written to
	// files they would outlive the command, a private key among them.
	caData, certData, keyData []byte
}

func (c *clientConfig) context(name string) (clientContext, bool) {
	i := slices.IndexFunc(c.Contexts, func(x clientContext) bool { return x.Name == name })
	if i < 0 {
		return clientContext{}, false
	}
	return c.Contexts[i], true
}

// configPath is $CAIRN_CONFIG, else config.yaml in the XDG configuration
// directory; "" when neither it nor HOME is known.
func configPath(env Env) string {
	if p := env.Getenv(EnvConfig); p != "" {
		return p
	}
	if d := env.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "cairn", "config.yaml")
	}
	if h := env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "cairn", "config.yaml")
	}
	return ""
}

// loadConfig reads the configuration file; a missing file is an empty
// configuration. Unknown fields are refused so a typo does not silently
// send commands elsewhere.
func loadConfig(path string) (*clientConfig, error) {
	c := &clientConfig{}
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "read the cairn configuration %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "the cairn configuration %s is not valid (want {current-context: NAME, contexts: [{name, server, token, certificate-authority, client-certificate, client-key}]}): %w", path, err)
	}
	for i, x := range c.Contexts {
		if x.Name == "" {
			return nil, cairn.Errorf(cairn.CodeInvalid, "the cairn configuration %s: contexts[%d] has no name", path, i)
		}
	}
	return c, nil
}

// saveConfig writes the configuration atomically (temporary file, then
// rename), readable by its owner only: it says which servers a user works
// with and may later hold credentials.
func saveConfig(path string, c *clientConfig) error {
	if path == "" {
		return cairn.Errorf(cairn.CodeInvalid, "no configuration file: set %s, XDG_CONFIG_HOME or HOME", EnvConfig)
	}
	if c.Contexts == nil {
		c.Contexts = []clientContext{}
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode the cairn configuration: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("write the cairn configuration %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write the cairn configuration %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the cairn configuration %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the cairn configuration %s: %w", path, err)
	}
	return nil
}

// configCommand manages the client configuration; it works the same in
// both modes, since it only touches the file.
func configCommand(env Env) *cobra.Command {
	path := configPath(env)
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Manage the servers the CLI talks to (contexts in " + displayPath(path) + ")",
		Long: `config manages the client configuration: named servers (contexts) and the
current one. With a current context every command that works with the hub
runs as a client of that server, as --server URL or $CAIRN_SERVER do (not
serve, migrate, backup, restore, backend, render, version, login, completion
and config, which work on this machine). The file is $CAIRN_CONFIG, else
$XDG_CONFIG_HOME/cairn/config.yaml, else ~/.config/cairn/config.yaml.`,
		Example: `  cairn config set-context dev --server http://127.0.0.1:8080
  cairn config use-context dev
  cairn config view`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
		// The configuration needs neither a store nor a server.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
	}

	var server, caFile, certFile, keyFile string
	setContext := &cobra.Command{
		Use:   "set-context NAME [--server URL] [--certificate-authority FILE] [--client-certificate FILE --client-key FILE]",
		Short: "Create or change a context",
		Long: `set-context creates the context NAME (--server is then required) or changes
what the flags give of an existing one. --certificate-authority is the CA the
server's certificate is checked against (a cairn serve with no --tls-cert
signs its own: its kubeconfig has it as certificate-authority-data);
--client-certificate and --client-key authenticate the CLI to a server of
--client-ca. File paths are stored absolute; a token is stored by cairn login.`,
		Example: `  cairn config set-context dev --server http://127.0.0.1:8080
  cairn config set-context prod --server https://cairn.example.com:8443 --certificate-authority ca.crt`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if server != "" {
				if _, err := client.New(server); err != nil {
					return err
				}
			}
			files := map[string]*string{"certificate-authority": &caFile, "client-certificate": &certFile, "client-key": &keyFile}
			for flag, p := range files {
				if *p == "" {
					continue
				}
				abs, err := filepath.Abs(*p)
				if err != nil {
					return usageErrorf("--%s %s: %v", flag, *p, err)
				}
				*p = abs
			}
			if caFile != "" {
				if _, err := readPool(caFile, "--certificate-authority"); err != nil {
					return &usageError{err: err}
				}
			}
			c, err := loadConfig(path)
			if err != nil {
				return err
			}
			verb := "modified"
			i := slices.IndexFunc(c.Contexts, func(x clientContext) bool { return x.Name == args[0] })
			if i < 0 {
				if server == "" {
					return usageErrorf("context %q is new: set-context needs --server URL", args[0])
				}
				c.Contexts = append(c.Contexts, clientContext{Name: args[0]})
				i, verb = len(c.Contexts)-1, "created"
			}
			x := &c.Contexts[i]
			for _, set := range []struct {
				to *string
				v  string
			}{{&x.Server, server}, {&x.CertificateAuthority, caFile}, {&x.ClientCertificate, certFile}, {&x.ClientKey, keyFile}} {
				if set.v != "" {
					*set.to = set.v
				}
			}
			if x.ClientCertificate != "" || x.ClientKey != "" {
				if x.ClientCertificate == "" || x.ClientKey == "" {
					return usageErrorf("a client certificate needs its key: give --client-certificate and --client-key")
				}
				if _, err := x.keyPair(); err != nil {
					return &usageError{err: err}
				}
			}
			if err := saveConfig(path, c); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Context %q %s.\n", args[0], verb)
			return err
		},
	}
	setContext.Flags().StringVar(&server, "server", "", "the server's URL, http://HOST:PORT or https://HOST:PORT")
	setContext.Flags().StringVar(&caFile, "certificate-authority", "", "PEM file of the CA that signed the server's certificate")
	setContext.Flags().StringVar(&certFile, "client-certificate", "", "PEM file of the client certificate to present")
	setContext.Flags().StringVar(&keyFile, "client-key", "", "PEM file of the client certificate's key")

	useContext := &cobra.Command{
		Use:     "use-context NAME",
		Short:   "Make a context the current one",
		Example: "  cairn config use-context dev",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := loadConfig(path)
			if err != nil {
				return err
			}
			if _, ok := c.context(args[0]); !ok {
				return cairn.Errorf(cairn.CodeNotFound, "no context exists with the name %q in %s", args[0], displayPath(path))
			}
			c.CurrentContext = args[0]
			if err := saveConfig(path, c); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Switched to context %q.\n", args[0])
			return err
		},
	}

	currentContext := &cobra.Command{
		Use:     "current-context",
		Short:   "Print the current context",
		Example: `  cairn config current-context`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := loadConfig(path)
			if err != nil {
				return err
			}
			if c.CurrentContext == "" {
				return cairn.Errorf(cairn.CodeNotFound, "current-context is not set in %s", displayPath(path))
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), c.CurrentContext)
			return err
		},
	}

	var output string
	var raw bool
	view := &cobra.Command{
		Use:   "view",
		Short: "Print the configuration",
		Long: `view prints the configuration file, with every token shown as REDACTED (as
kubectl config view does), so the output can be shown or pasted; --raw prints
the tokens too.`,
		Example: `  cairn config view
  cairn config view -o json
  cairn config view --raw`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := loadConfig(path)
			if err != nil {
				return err
			}
			if c.Contexts == nil {
				c.Contexts = []clientContext{}
			}
			if !raw {
				for i := range c.Contexts {
					if c.Contexts[i].Token != "" {
						c.Contexts[i].Token = "REDACTED"
					}
				}
			}
			var out []byte
			switch output {
			case "yaml":
				out, err = yaml.Marshal(c)
			case "json":
				out, err = json.MarshalIndent(c, "", "  ")
				out = append(out, '\n')
			default:
				return usageErrorf("--output %q: want yaml or json", output)
			}
			if err != nil {
				return fmt.Errorf("encode the configuration: %w", err)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	view.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	view.Flags().BoolVar(&raw, "raw", false, "print the tokens instead of REDACTED")

	cmd.AddCommand(setContext, useContext, currentContext, view)
	return cmd
}

func displayPath(path string) string {
	if path == "" {
		return "(no configuration file: set " + EnvConfig + " or HOME)"
	}
	return path
}
