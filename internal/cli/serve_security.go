package cli

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/auth/authn"
	"github.com/cairn-dev/cairn/auth/peer"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// securityOptions are serve's flags for TLS, authentication, audit and limits.
type securityOptions struct {
	tlsCert, tlsKey  string
	clientCA         string
	tokenFile        string
	oidc             authn.OIDCConfig
	oidcCAFile       string
	allowAnonymous   bool
	metricsAnonymous bool
	auditPath        string
	auditLevel       string
	auditMaxMB       int
	auditBackups     int
	ratePerUser      float64
	burst            int
	rbacFiles        []string

	// What load read from the files and the issuer the flags name.
	tokens      *authn.TokenFile
	clientCerts *authn.ClientCerts
	oidcAuth    *authn.OIDC
	tlsPair     *keyPair
}

// load reads the files the flags name (tokens, CAs, the TLS pair) and the
// OIDC issuer's discovery document, so that bad input is refused before
// the store is opened or anything is written to the data directory.
func (o *securityOptions) load(ctx context.Context, log *slog.Logger) error {
	if o.tokenFile != "" {
		tf, err := authn.ReadTokenFile(o.tokenFile)
		if err != nil {
			return usageErrorf("--token-auth-file: %w", err)
		}
		o.tokens = tf
	}
	if o.clientCA != "" {
		certs, err := authn.ReadClientCA(o.clientCA)
		if err != nil {
			return usageErrorf("--client-ca: %w", err)
		}
		o.clientCerts = certs
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usageErrorf("--tls-cert and --tls-key go together")
	}
	if o.tlsCert != "" {
		kp := &keyPair{cert: o.tlsCert, key: o.tlsKey, log: log}
		if err := kp.load(); err != nil {
			return usageErrorf("--tls-cert/--tls-key: %w", err)
		}
		o.tlsPair = kp
	}
	if o.auditPath != "" && o.auditPath != "-" {
		if dir := filepath.Dir(o.auditPath); !isDir(dir) {
			return usageErrorf("--audit-log-path %s: directory %s does not exist", o.auditPath, dir)
		}
	}
	if o.oidc.IssuerURL != "" {
		if o.oidcCAFile != "" {
			pool, err := readPool(o.oidcCAFile, "--oidc-ca-file")
			if err != nil {
				return usageErrorf("%w", err)
			}
			o.oidc.HTTPClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
		oc, err := authn.NewOIDC(ctx, o.oidc)
		if err != nil {
			return err
		}
		o.oidcAuth = oc
	}
	return nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func (a *app) addSecurityFlags(cmd *cobra.Command, o *securityOptions) {
	f := cmd.Flags()
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS (and HTTP/2) with this PEM certificate; reloaded when the file changes")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&o.clientCA, "client-ca", "", "authenticate TLS client certificates signed by these PEM CAs (CN = user, O = groups)")
	f.StringVar(&o.tokenFile, "token-auth-file", "", `authenticate bearer tokens listed in this CSV file: token,user,uid,"group1,group2"`)
	f.StringVar(&o.oidc.IssuerURL, "oidc-issuer-url", "", "authenticate OIDC ID tokens of this issuer (its discovery document and JWKS)")
	f.StringVar(&o.oidc.ClientID, "oidc-client-id", "", "the audience OIDC ID tokens must be issued for")
	f.StringVar(&o.oidc.UsernameClaim, "oidc-username-claim", "sub", "the ID token claim naming the user")
	f.StringVar(&o.oidc.UsernamePrefix, "oidc-username-prefix", "", "prefix of OIDC user names (e.g. oidc:); default: the issuer URL and # unless the claim is email; - : none")
	f.StringVar(&o.oidc.GroupsClaim, "oidc-groups-claim", "", "the ID token claim holding the user's groups")
	f.StringVar(&o.oidc.GroupsPrefix, "oidc-groups-prefix", "", "prefix of OIDC group names")
	f.StringVar(&o.oidcCAFile, "oidc-ca-file", "", "PEM CA the OIDC issuer's certificate is signed by (default: the system's)")
	f.BoolVar(&o.allowAnonymous, "allow-anonymous", false, "serve requests without credentials as cairn-admin (insecure; needed to bind a non-loopback address without an authenticator; on Linux a loopback server with no authenticator and no --rbac-file serves local processes of its own OS user so without it)")
	f.BoolVar(&o.metricsAnonymous, "metrics-anonymous", false, "serve /metrics without authorization")
	f.StringVar(&o.auditPath, "audit-log-path", "", "audit log file, one audit.k8s.io/v1 Event per line (default <data-dir>/audit.log; - : none)")
	f.StringVar(&o.auditLevel, "audit-level", "Metadata", "audit level: None, Metadata or Request (Request adds the object's kind and metadata, never values)")
	f.IntVar(&o.auditMaxMB, "audit-log-maxsize", 100, "rotate the audit log at this many megabytes")
	f.IntVar(&o.auditBackups, "audit-log-maxbackup", 5, "rotated audit logs to keep")
	f.Float64Var(&o.ratePerUser, "max-requests-per-user", 0, "sustained requests per second allowed to one user (0: no limit); over it: 429 with Retry-After")
	f.StringArrayVar(&o.rbacFiles, "rbac-file", nil, "YAML/JSON file of rbac.authorization.k8s.io/v1 Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (--- between documents) added to the default roles; repeatable")
	f.IntVar(&o.burst, "max-requests-burst", 100, "requests one user may make at once above --max-requests-per-user")
}

// parseAuditLevel parses --audit-level.
func parseAuditLevel(s string) (audit.Level, error) {
	level, err := audit.ParseLevel(s)
	if err != nil {
		return level, usageErrorf("--audit-level: %v", err)
	}
	return level, nil
}

// configured reports whether an authenticator beyond the admin token is set.
func (o *securityOptions) configured() bool {
	return o.clientCA != "" || o.tokenFile != "" || o.oidc.IssuerURL != ""
}

// openLoopback reports whether nothing about access was configured: no
// authenticator and no --rbac-file. checkAddr lets that happen on a
// loopback address only, and there local processes of the server's own OS
// user are served without credentials as cairn-admin (peer authentication,
// where the platform supports it: peer.Supported), so loopback development
// and the tools that talk to a plain `cairn serve` keep working; other local
// users need the admin token.
func (o *securityOptions) openLoopback() bool {
	return !o.allowAnonymous && !o.configured() && len(o.rbacFiles) == 0
}

// peerAuth reports whether local peers are authenticated (openLoopback on
// a platform that can look them up).
func (o *securityOptions) peerAuth() bool { return o.openLoopback() && peer.Supported() }

// policy is what the flags add to the default RBAC policy.
func (o *securityOptions) policy() (rbac.Policy, error) {
	var p rbac.Policy
	for _, f := range o.rbacFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return p, usageErrorf("--rbac-file: %w", err)
		}
		for i, doc := range strings.Split("\n"+string(b), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if err := p.Parse([]byte(doc)); err != nil {
				return rbac.Policy{}, usageErrorf("--rbac-file %s, document %d: %w", f, i+1, err)
			}
		}
	}
	binding, groups := "cairn-allow-anonymous", []string{cairn.Unauthenticated}
	switch {
	case o.allowAnonymous:
	case o.peerAuth():
		// With nothing configured, the only ones authenticated are local
		// peers and holders of the admin token, both admins; a name one
		// of them acts as (kubectl --as jane) is only a name to record,
		// so it keeps their rights, as before the guard.
		binding, groups = "cairn-loopback-peers", []string{authn.PeersGroup, cairn.Authenticated}
	default:
		return p, nil
	}
	var subjects []rbacv1.Subject
	for _, g := range groups {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
	}
	return p.Merge(rbac.Policy{ClusterRoleBindings: []rbacv1.ClusterRoleBinding{{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.AdminRole},
		Subjects:   subjects,
	}}}), nil
}

// checkAddr refuses to serve a non-loopback address with nobody to
// authenticate but the local admin token, unless --allow-anonymous.
func (o *securityOptions) checkAddr(addr string) error {
	if o.configured() || o.allowAnonymous {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("--addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return usageErrorf("--addr %s is not a loopback address and no authenticator is configured: give --token-auth-file, --client-ca or --oidc-issuer-url (or --allow-anonymous to serve everyone as admin)", addr)
}

// security is what serve runs with.
type security struct {
	guard     *access.Guard
	tls       *tls.Config
	audit     *audit.Writer
	scheme    string
	adminFile string
	// dual: no certificate was given; plain HTTP and TLS (a self-signed
	// certificate) share the port.
	dual     bool
	certFile string
	// peerUser is who local processes of the server's OS user are, when
	// peer authentication is on (the server then sets conns' ConnContext).
	peerUser string
	conns    *peer.Conns
}

func (s *security) Close() {
	if s.audit != nil {
		s.audit.Close()
	}
}

// transport sets up how serve's listener is served, before the store is
// open (serve answers its probes while it waits for the store): TLS (the
// given certificate, or a self-signed one beside plain HTTP) and peer
// authentication's connection tracking.
func (a *app) transport(addr string, o *securityOptions, log *slog.Logger) (*security, error) {
	s := &security{scheme: "http"}
	if o.peerAuth() {
		name := strconv.Itoa(os.Getuid())
		if u, err := user.Current(); err == nil && u.Username != "" {
			name = u.Username
		}
		s.peerUser, s.conns = name, &peer.Conns{}
	}
	if o.tlsPair != nil {
		s.tls = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: o.tlsPair.get, NextProtos: []string{"h2", "http/1.1"}}
		s.scheme, s.certFile = "https", o.tlsCert
	} else {
		host, _, _ := net.SplitHostPort(addr)
		cert, key, err := selfSignedPair(a.dataDir, host)
		if err != nil {
			return nil, err
		}
		kp := &keyPair{cert: cert, key: key, log: log}
		if err := kp.load(); err != nil {
			return nil, err
		}
		s.tls = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get, NextProtos: []string{"h2", "http/1.1"}}
		s.scheme, s.certFile, s.dual = "http", cert, true
	}
	if o.clientCerts != nil {
		s.tls.ClientCAs = o.clientCerts.Pool()
		s.tls.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return s, nil
}

// setupSecurity builds the authenticators (admin token first) and the
// audit writer into s, which transport made.
func (a *app) setupSecurity(ctx context.Context, s *security, addr string, o *securityOptions, authz access.Authorizer, webhooksChecked bool, log *slog.Logger) error {
	tokens := o.tokens
	if tokens == nil {
		tokens = &authn.TokenFile{}
	}
	adminToken, adminFile, err := a.adminToken(log)
	if err != nil {
		return err
	}
	s.adminFile = adminFile
	tokens.Add(adminToken, cairn.User{Name: "admin", UID: "admin", Groups: []string{rbac.AdminsGroup}})
	chain := &authn.Chain{Tokens: []authn.TokenAuthenticator{tokens}}
	if s.conns != nil {
		uid := strconv.Itoa(os.Getuid())
		chain.Peer = &authn.Peer{UID: os.Getuid(), User: cairn.User{Name: s.peerUser, UID: uid, Groups: []string{authn.PeersGroup}}}
	}
	if o.oidcAuth != nil {
		chain.Tokens = append(chain.Tokens, o.oidcAuth)
	}
	if o.clientCerts != nil {
		chain.Certs = o.clientCerts
	}
	level, err := parseAuditLevel(o.auditLevel)
	if err != nil {
		return err
	}
	if o.auditPath != "-" && level != audit.LevelNone {
		path := o.auditPath
		if path == "" {
			path = filepath.Join(a.dataDir, "audit.log")
		}
		if s.audit, err = audit.Open(path, int64(o.auditMaxMB)<<20, o.auditBackups); err != nil {
			return err
		}
	}
	var public []string
	if webhooksChecked {
		// Only the pushes: their signature is their credential. The sync
		// status (GET) shows what was synced and needs RBAC.
		public = append(public, "POST /hooks/")
	}
	if o.metricsAnonymous {
		public = append(public, "/metrics")
	}
	// The web console's pages are public; what they show comes from the
	// API. "/" and "/ui" only redirect a browser there.
	public = append(public, "/ui/", "GET /ui", "GET /{$}")
	// Where local callers are trusted without credentials, web pages must
	// not borrow that trust (access.Guard.browserRefusal).
	var serverHosts []string
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		serverHosts = []string{host}
	}
	s.guard = access.New(access.Config{Authn: chain, Authz: authz, Audit: s.audit, AuditLevel: level,
		RatePerUser: o.ratePerUser, Burst: o.burst, Public: public, Logger: log,
		HostCheck: o.openLoopback(), ServerHosts: serverHosts})
	if o.allowAnonymous {
		log.Warn("--allow-anonymous: requests without credentials are served as cairn-admin; anyone who reaches this server can read and change everything")
		fmt.Fprintln(a.env.Stderr, "WARNING: --allow-anonymous: anyone who reaches this server is admin")
	}
	return nil
}

// adminToken reads <data-dir>/admin.token, creating it (0600) on first
// start. An existing one that others may read is made 0600: whoever reads
// it is admin.
func (a *app) adminToken(log *slog.Logger) (token, path string, err error) {
	path = filepath.Join(a.dataDir, "admin.token")
	b, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", "", fmt.Errorf("admin token %s is empty: remove it to have a new one written", path)
		}
		st, err := os.Stat(path)
		if err != nil {
			return "", "", fmt.Errorf("admin token: %w", err)
		}
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", "", fmt.Errorf("admin token %s is readable by others (mode %04o) and could not be made 0600: %w", path, perm, err)
			}
			log.Warn("the admin token was readable by others: made it 0600; if others could read it, remove it and restart to have a new one written",
				"path", path, "mode", fmt.Sprintf("%04o", perm))
		}
		return tok, path, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.MkdirAll(a.dataDir, 0o700); err != nil {
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("admin token: %w", err)
	}
	return tok, path, nil
}

// writeKubeconfig writes <data-dir>/kubeconfig for the admin token and the
// address served, so kubectl --kubeconfig (and cairn --kubeconfig) work.
func (s *security) writeKubeconfig(dataDir, addr string) (string, error) {
	tok, err := os.ReadFile(s.adminFile)
	if err != nil {
		return "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	// Always https: kubectl sends a token only over TLS.
	cluster := &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(host, port)}
	pem, err := os.ReadFile(s.certFile)
	if err != nil {
		return "", err
	}
	cluster.CertificateAuthorityData = pem
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cairn"] = cluster
	cfg.AuthInfos["cairn-admin"] = &clientcmdapi.AuthInfo{Token: strings.TrimSpace(string(tok))}
	cfg.Contexts["cairn"] = &clientcmdapi.Context{Cluster: "cairn", AuthInfo: "cairn-admin", Namespace: "default"}
	cfg.CurrentContext = "cairn"
	path := filepath.Join(dataDir, "kubeconfig")
	// An existing file keeps its mode when rewritten: make it private
	// before the token goes in, not after.
	if err := os.Chmod(path, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, os.Chmod(path, 0o600)
}

func readPool(path, flag string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", flag, path)
	}
	return pool, nil
}

// keyPair serves the certificate of two files and reloads them when either
// changes, checking at most once a second, so a renewed certificate is used
// without a restart.
type keyPair struct {
	cert, key string
	log       *slog.Logger

	mu      sync.Mutex
	current *tls.Certificate
	mtime   time.Time
	checked time.Time
}

func (k *keyPair) stamp() (time.Time, error) {
	var latest time.Time
	for _, p := range []string{k.cert, k.key} {
		st, err := os.Stat(p)
		if err != nil {
			return time.Time{}, err
		}
		if st.ModTime().After(latest) {
			latest = st.ModTime()
		}
	}
	return latest, nil
}

func (k *keyPair) load() error {
	mt, err := k.stamp()
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	c, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		return fmt.Errorf("TLS certificate %s / key %s: %w", k.cert, k.key, err)
	}
	k.mu.Lock()
	k.current, k.mtime, k.checked = &c, mt, time.Now()
	k.mu.Unlock()
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	cur, due := k.current, time.Since(k.checked) >= time.Second
	if due {
		k.checked = time.Now()
	}
	mt := k.mtime
	k.mu.Unlock()
	if due {
		if now, err := k.stamp(); err == nil && !now.Equal(mt) {
			// A half-written pair fails to load: keep serving the old one.
			if err := k.load(); err != nil {
				k.log.Warn("TLS certificate changed but does not load; serving the previous one", "err", err)
			} else {
				k.log.Info("TLS certificate reloaded", "cert", k.cert)
				k.mu.Lock()
				cur = k.current
				k.mu.Unlock()
			}
		}
	}
	return cur, nil
}
