package cli

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
)

// loadKubeconfig reads the current context of a kubeconfig: its server and
// its user's token or client certificate (files or inline data).
func loadKubeconfig(path string) (clientContext, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return clientContext{}, cairn.Errorf(cairn.CodeInvalid, "--kubeconfig %s: %v", path, err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return clientContext{}, cairn.Errorf(cairn.CodeInvalid, "--kubeconfig %s: current-context %q names no context", path, cfg.CurrentContext)
	}
	cl, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return clientContext{}, cairn.Errorf(cairn.CodeInvalid, "--kubeconfig %s: context %q names no cluster %q", path, cfg.CurrentContext, kctx.Cluster)
	}
	x := clientContext{Name: cfg.CurrentContext, Server: cl.Server, CertificateAuthority: cl.CertificateAuthority}
	dir := filepath.Dir(path)
	x.caData = cl.CertificateAuthorityData
	if u, ok := cfg.AuthInfos[kctx.AuthInfo]; ok {
		x.Token = u.Token
		if u.TokenFile != "" && x.Token == "" {
			b, err := os.ReadFile(u.TokenFile)
			if err != nil {
				return clientContext{}, cairn.Errorf(cairn.CodeInvalid, "--kubeconfig %s: tokenFile: %v", path, err)
			}
			x.Token = strings.TrimSpace(string(b))
		}
		x.ClientCertificate, x.ClientKey = u.ClientCertificate, u.ClientKey
		x.certData, x.keyData = u.ClientCertificateData, u.ClientKeyData
	}
	for _, p := range []*string{&x.CertificateAuthority, &x.ClientCertificate, &x.ClientKey} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return x, nil
}

// credentials gives the client options for the server: the credentials of
// the context or kubeconfig it came from, else those of the kubeconfig
// `cairn serve` wrote in the data directory when it serves that very
// address (the admin of a local server). Impersonate-User is sent when --as
// was given, or when there are no credentials (an open server records the
// claimed name).
func (a *app) credentials() ([]client.Option, error) {
	x := a.target.creds
	if x == nil || (x.Token == "" && !x.hasClientCert()) {
		if local, err := loadKubeconfig(filepath.Join(a.dataDir, "kubeconfig")); err == nil && sameAddress(local.Server, a.target.url) {
			x = &local
		}
	}
	var opts []client.Option
	if x == nil || (x.Token == "" && !x.hasClientCert()) || a.asExplicit {
		opts = append(opts, client.WithActor(a.as))
	}
	if x == nil {
		return opts, nil
	}
	if x.Token != "" {
		opts = append(opts, client.WithToken(x.Token))
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	custom := false
	switch {
	case len(x.caData) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(x.caData) {
			return nil, cairn.Errorf(cairn.CodeInvalid, "certificate-authority-data: no PEM certificate in it")
		}
		tc.RootCAs, custom = pool, true
	case x.CertificateAuthority != "":
		pool, err := readPool(x.CertificateAuthority, "certificate-authority")
		if err != nil {
			return nil, err
		}
		tc.RootCAs, custom = pool, true
	}
	if x.hasClientCert() {
		kp, err := x.keyPair()
		if err != nil {
			return nil, err
		}
		tc.Certificates, custom = []tls.Certificate{kp}, true
	}
	if custom {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: tr}))
	}
	return opts, nil
}

func (x *clientContext) hasClientCert() bool {
	return x.ClientCertificate != "" || len(x.certData) > 0
}

// keyPair loads the client certificate and its key, each from the
// kubeconfig's inline data when it has it, else from its file.
func (x *clientContext) keyPair() (tls.Certificate, error) {
	read := func(data []byte, path, what string) ([]byte, error) {
		if len(data) > 0 {
			return data, nil
		}
		if path == "" {
			return nil, cairn.Errorf(cairn.CodeInvalid, "client certificate: no %s given", what)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "client %s %s: %v", what, path, err)
		}
		return b, nil
	}
	certPEM, err := read(x.certData, x.ClientCertificate, "certificate")
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := read(x.keyData, x.ClientKey, "key")
	if err != nil {
		return tls.Certificate{}, err
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		where := "client-certificate-data"
		if len(x.certData) == 0 {
			where = x.ClientCertificate
		}
		return tls.Certificate{}, cairn.Errorf(cairn.CodeInvalid, "client certificate %s: %v", where, err)
	}
	return kp, nil
}

// sameAddress: the two URLs name one host:port (http and https share the
// port of a default cairn serve).
func sameAddress(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return false
	}
	ha, pa, _ := net.SplitHostPort(ua.Host)
	hb, pb, _ := net.SplitHostPort(ub.Host)
	loop := func(h string) string {
		if h == "localhost" || h == "::1" {
			return "127.0.0.1"
		}
		return h
	}
	return pa != "" && pa == pb && loop(ha) == loop(hb)
}

// loginCommand stores a token in a context of the configuration file.
func loginCommand(env Env) *cobra.Command {
	path := configPath(env)
	var token, server, name string
	cmd := &cobra.Command{
		Use:   "login --token TOKEN [--server URL] [--context NAME]",
		Short: "Store a bearer token for a server (in a context of " + displayPath(path) + ")",
		Long: `login stores a bearer token in a context of the client configuration, as
kubectl keeps one in a kubeconfig: the context named by --context, else the
current one; with --server a context is created (named --context, default
"cairn") and made current. --token - reads the token from standard input, so
it stays out of the shell history. The file is written 0600.`,
		Example: `  cairn login --token "$(cat ~/.local/share/cairn/admin.token)"
  cairn login --server https://cairn.example.com:8443 --context prod --token - < token.txt`,
		Args:              usageArgs(cobra.NoArgs),
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "-" {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && line == "" {
					return usageErrorf("--token -: no token on standard input")
				}
				token = strings.TrimSpace(line)
			}
			if token == "" || strings.ContainsAny(token, " \t") {
				return usageErrorf("--token: give the token (or - to read it from standard input); it is empty or has spaces")
			}
			c, err := loadConfig(path)
			if err != nil {
				return err
			}
			if name == "" {
				name = c.CurrentContext
			}
			if server != "" {
				if _, err := client.New(server); err != nil {
					return err
				}
				if name == "" {
					name = "cairn"
				}
			}
			if name == "" {
				return usageErrorf("no context to store the token in: give --server URL (and --context NAME), or set one with cairn config set-context")
			}
			i := slices.IndexFunc(c.Contexts, func(x clientContext) bool { return x.Name == name })
			if i < 0 {
				if server == "" {
					return cairn.Errorf(cairn.CodeNotFound, "no context exists with the name %q in %s: give --server URL to create it", name, displayPath(path))
				}
				c.Contexts = append(c.Contexts, clientContext{Name: name})
				i = len(c.Contexts) - 1
			}
			if server != "" {
				c.Contexts[i].Server = server
				c.CurrentContext = name
			}
			c.Contexts[i].Token = token
			if err := saveConfig(path, c); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Token stored in context %q.\n", name)
			return err
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the bearer token; - reads it from standard input")
	cmd.Flags().StringVar(&server, "server", "", "the server's URL; creates or changes the context")
	cmd.Flags().StringVar(&name, "context", "", "the context to store the token in (default: the current one)")
	return cmd
}
