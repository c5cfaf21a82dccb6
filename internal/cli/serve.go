package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/access"
	"github.com/cairn-dev/cairn/api/graphql"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/terraform"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/internal/exepages"
	"github.com/cairn-dev/cairn/internal/groupwrite"
	"github.com/cairn-dev/cairn/store/postgres"
	"github.com/cairn-dev/cairn/web"
)

// EnvAddr is the environment variable for serve's --addr.
const EnvAddr = "CAIRN_ADDR"

// changeLogKeep is how many change-log entries serve keeps for watchers
// that reconnect; older positions get 410 Gone and list again.
const changeLogKeep = 100_000

func (a *app) serveCommand() *cobra.Command {
	var addr string
	var shutdownTimeout time.Duration
	var gql graphqlOptions
	var compat, logLevel string
	var gitSync gitSyncOptions
	var stacks stackControllerOptions
	var rec recoveryOptions
	var sec securityOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the hub over HTTP (Kubernetes-style REST API)",
		Long: `serve runs the hub on the embedded store in --data-dir, or on the
PostgreSQL database of --database (migrated at start-up, see cairn migrate;
replicas on one database share everything; a database it cannot reach yet is
waited for, with /readyz saying why), and serves its REST API, which
follows the Kubernetes API conventions: kubectl and client-go work against it
(kubectl --server http://ADDR).

Endpoints: the web console at /ui/ (/ redirects there; docs/web-console.md),
/apis (discovery and resources), /openapi/v3, /version,
/healthz (or /livez) and /readyz, and Prometheus metrics at /metrics. /graphql serves the
Capact Local Hub GraphQL API (and a query page to browsers). POST
/hooks/git/{backend} imports what was pushed to a Git backend's repository
outside cairn at once (push webhooks); --git-sync-interval polls them all.

--compat capact follows Capact's Local Hub where cairn is stricter by default,
so Capact's engine, CLI and backends work unchanged: a storage backend url
given as a bare host:port is plaintext (not TLS), a backend at Capact's
end-to-end mock url (e2e-test-backend-mock-url:50051) is never called, as in
Local Hub, the built-in backend is
presented on /graphql as cap.core.type.hub.storage.neo4j 0.1.0, an update may
give a context to an instance of the built-in backend, and a Type without
REST names and without "$schema" is draft-07 (see docs/graphql.md).`,
		Example: `  cairn serve
  cairn serve --addr 0.0.0.0:8080 --data-dir /var/lib/cairn
  cairn serve --addr 0.0.0.0:8080 --database 'postgres://cairn:secret@db:5432/cairn'
  kubectl --server http://127.0.0.1:8080 api-resources`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch compat {
			case "":
			case "capact":
				a.backends.capactURLs = true
			default:
				return usageErrorf("--compat %q: the only compatibility mode is capact", compat)
			}
			level, err := parseLogLevel(logLevel)
			if err != nil {
				return err
			}
			if gql.maxResponseBytes <= 0 {
				return usageErrorf("--graphql-max-response-bytes %d: must be a positive number of bytes", gql.maxResponseBytes)
			}
			if err := checkServeFlags(addr, shutdownTimeout, gitSync, stacks, rec, &sec); err != nil {
				return err
			}
			return a.serve(cmd.Context(), addr, shutdownTimeout, level, gql, compat == "capact", gitSync, stacks, rec, &sec)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", cmp.Or(a.env.Getenv(EnvAddr), "127.0.0.1:8080"), "address to listen on, HOST:PORT [$"+EnvAddr+"]")
	cmd.Flags().DurationVar(&shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to let requests finish on SIGINT/SIGTERM")
	cmd.Flags().BoolVar(&gql.introspection, "graphql-introspection", true, "allow GraphQL introspection (__schema, __type) at /graphql")
	cmd.Flags().Int64Var(&gql.maxResponseBytes, "graphql-max-response-bytes", graphql.DefaultMaxResponseBytes,
		"bound of one /graphql response, counted while it is resolved; over it the request stops and answers an error")
	addLogLevelFlag(cmd, &logLevel, "debug (every write, by whom), info, warn or error; values are never logged, and every request is in the audit log")
	cmd.Flags().StringVar(&compat, "compat", "", "follow another hub where cairn is stricter by default: capact (Capact's Local Hub)")
	a.addGitSyncFlags(cmd, &gitSync)
	a.addStackControllerFlags(cmd, &stacks)
	a.addRecoveryFlags(cmd, &rec)
	a.addSecurityFlags(cmd, &sec)
	return cmd
}

// graphqlOptions are serve's settings of /graphql.
type graphqlOptions struct {
	introspection    bool
	maxResponseBytes int64
}

func (a *app) serve(ctx context.Context, addr string, shutdownTimeout time.Duration, level slog.Level, gql graphqlOptions, capact bool, gitSync gitSyncOptions, stacks stackControllerOptions, rec recoveryOptions, sec *securityOptions) error {
	// Log lines are written in groups (at debug, the lines of the writes
	// of a group commit in one write to stderr instead of two each), in
	// order, and all of them before serve returns.
	logOut := groupwrite.New(a.env.Stderr)
	defer logOut.Flush()
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	if err := sec.checkAddr(addr); err != nil {
		return err
	}
	rbacPolicy, err := sec.policy()
	if err != nil {
		return err
	}
	// Every file a flag names is read before the store is opened (which
	// creates and migrates it): bad input changes nothing.
	if err := sec.load(ctx, log); err != nil {
		return err
	}
	if err := gitSync.load(); err != nil {
		return err
	}
	backends, err := a.backendOpener(log)
	if err != nil {
		return err
	}
	defer backends.Close()
	secure, err := a.transport(addr, sec, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &cairn.Error{Code: cairn.CodeUnavailable, Msg: fmt.Sprintf("listen on %s: %v", addr, err), Err: err}
	}
	// serve listens before the store is open: while it waits for its
	// database, the probes say why it is not ready and everything else
	// answers 503 (waitForStore). The API takes over once it is set up.
	var (
		api     atomic.Pointer[http.Handler]
		started atomic.Pointer[hub.Hub]
		waiting atomic.Pointer[string]
	)
	ready := make(chan struct{})
	// /livez only says the process serves (a liveness probe must not
	// restart a replica that waits for its database). /healthz, the older
	// combined check that scripts wait on before their first request, also
	// says start-up is over, as it did when serve listened only then.
	// /readyz also asks whether the store answers.
	probeMux := func(mux *http.ServeMux) {
		startedCheck := probeCheck{name: "started", check: func(context.Context) error {
			select {
			case <-ready:
				return nil
			default:
				return errors.New("starting")
			}
		}}
		probes(mux, log, "healthz", []probeCheck{{name: "ping"}, startedCheck})
		probes(mux, log, "livez", []probeCheck{{name: "ping"}})
		probes(mux, log, "readyz", []probeCheck{
			{name: "ping"},
			startedCheck,
			{name: "store", check: func(ctx context.Context) error {
				h := started.Load()
				if h == nil {
					if w := waiting.Load(); w != nil {
						return errors.New(*w)
					}
					return errors.New("opening the store")
				}
				if _, err := h.LastSeq(ctx); err != nil {
					return fmt.Errorf("store unavailable: %w", err)
				}
				return nil
			}, summary: "store unavailable"},
		})
	}
	startup := http.NewServeMux()
	probeMux(startup)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := api.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		if _, pattern := startup.Handler(r); pattern != "" {
			startup.ServeHTTP(w, r)
			return
		}
		notStarted(w)
	}), secure.tls, defaultLimits())
	// The server's own complaints (TLS handshakes that fail, bad requests
	// cut off) go to the structured log, not bare to stderr.
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelInfo)
	// Requests outlive the signal: in-flight writes finish during Shutdown;
	// watch streams, which never finish, are ended by StopWatches.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	if secure.conns != nil {
		srv.ConnContext = secure.conns.ConnContext // peer authentication
	}
	errc := make(chan error, 1)
	go func() {
		if secure.dual {
			errc <- srv.Serve(newDualListener(ln, secure.tls))
			return
		}
		if secure.tls != nil {
			errc <- srv.ServeTLS(ln, "", "") // the certificate comes from TLSConfig.GetCertificate
			return
		}
		errc <- srv.Serve(ln)
	}()
	defer srv.Close() // when start-up fails; after a Shutdown it does nothing

	st, err := a.waitForStore(ctx, ln.Addr().String(), log, &waiting) // migrates the schema (see cairn migrate)
	if err != nil || st == nil {
		return err // st == nil: stopped while waiting
	}
	defer st.Close()
	path := st.Where
	opener := a.withBackends(backends, log)
	h, err := hub.New(ctx, hub.Config{Store: st.Store, StoreKind: st.Kind, Strict: a.strict, Logger: log, Backends: opener, CapactCompat: capact, RBAC: rbacPolicy, WarmReadCache: true, SealedValues: st.Encryption.Seals})
	if err != nil {
		return fmt.Errorf("start the hub on %s: %w", path, err)
	}
	if err := registerHubTypes(ctx, h); err != nil {
		return err
	}

	if err := a.setupSecurity(ctx, secure, addr, sec, h, gitSync.secretFile != "", log); err != nil {
		return err
	}
	defer secure.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := rest.NewPrometheusMetrics(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if pg, ok := st.Raw.(*postgres.Store); ok {
		if err := registerPoolMetrics(reg, pg); err != nil {
			return err
		}
	}
	restAPI := rest.New(rest.Config{Hub: h, Logger: log, Metrics: metrics, AccessReviews: true, Version: rest.Version{
		Major: "1", Minor: "32", GitVersion: "v1.32.0-cairn", GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}})

	mux := http.NewServeMux()
	probeMux(mux)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/graphql", graphql.New(graphql.Config{Hub: h, Logger: log, Introspection: gql.introspection, Capact: capact, MaxResponseBytes: gql.maxResponseBytes}))
	stopSync, err := a.gitSync(ctx, h, opener, gitSync, mux, reg, log)
	if err != nil {
		return err
	}
	defer stopSync()
	mux.Handle(terraform.Prefix, terraform.New(terraform.Config{Hub: h, Logger: log}))
	secure.guard.Handle(mux)
	mux.Handle("/", restAPI)
	mux.Handle(web.Prefix, web.Handler()) // the web console
	mux.Handle("GET /{$}", web.Redirect())
	srv.RegisterOnShutdown(restAPI.StopWatches)
	var served http.Handler = secure.guard.Wrap(restFirst(mux, restAPI, access.ReviewPaths()))
	started.Store(h)
	api.Store(&served)

	go pruneChanges(baseCtx, h, log)
	stopStacks := startStackController(ctx, h, stacks, log)
	defer stopStacks()
	stopRecovery, err := startRecovery(ctx, h, rec, reg, log)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	defer stopRecovery()
	// The kubeconfig is there before /readyz says ready.
	kubeconfig, err := secure.writeKubeconfig(a.dataDir, ln.Addr().String())
	if err != nil {
		return err
	}
	close(ready)
	go releaseStartupPages(baseCtx, h.Warmed(), log)
	log.Info("serving", "addr", ln.Addr().String(), "dataDir", a.dataDir, "tls", secure.tls != nil)
	fmt.Fprintf(a.env.Stdout, "cairn serving on %s://%s (store %s)\n", secure.scheme, ln.Addr(), path)
	if secure.dual {
		fmt.Fprintf(a.env.Stdout, "and on https://%s with the self-signed certificate %s\n", ln.Addr(), secure.certFile)
	}
	fmt.Fprintf(a.env.Stdout, "admin token in %s; kubectl --kubeconfig %s get typeinstances\n", secure.adminFile, kubeconfig)
	switch {
	case sec.peerAuth():
		fmt.Fprintf(a.env.Stdout, "no authenticator configured: serving loopback; local processes of OS user %s are admin without credentials (peer authentication), others need the admin token; configure --token-auth-file, --client-ca or --oidc-issuer-url to require credentials from everyone\n", secure.peerUser)
	case sec.openLoopback():
		fmt.Fprintln(a.env.Stdout, "no authenticator configured: serving loopback to the admin token only (peer authentication is Linux-only; --allow-anonymous serves everyone as admin)")
	case !sec.configured() && !sec.allowAnonymous:
		fmt.Fprintln(a.env.Stdout, "no authenticator configured: serving loopback only, to the admin token")
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		if errors.Is(err, context.DeadlineExceeded) {
			// Their connections are closed; a write among them has
			// committed whole or not at all, and its client got no answer.
			srv.Close()
			msg := fmt.Sprintf("requests still in flight after --shutdown-timeout %s were cut off", shutdownTimeout)
			log.Warn("shut down: " + msg)
			return fmt.Errorf("shut down: %s", msg)
		}
		return fmt.Errorf("shut down: %w", err)
	}
	return nil
}

// releaseStartupPages gives back the pages of cairn's executable that only
// start-up used (package exepages), once start-up is over: the server
// listens, the read cache has loaded, and the work that starts with the
// server (the recovery lease, the stack controller's first pass) has had
// startupSettle to run.
func releaseStartupPages(ctx context.Context, warmed <-chan struct{}, log *slog.Logger) {
	select {
	case <-warmed:
	case <-ctx.Done():
		return
	}
	select {
	case <-time.After(startupSettle):
	case <-ctx.Done():
		return
	}
	r, err := exepages.Release()
	if err != nil {
		log.Warn("release the executable's start-up pages", "err", err)
		return
	}
	log.Info("released the executable's start-up pages", "segments", r.Segments,
		"residentBefore", mib(r.Before), "residentAfter", mib(r.After))
}

// startupSettle is how long after start-up the executable's start-up
// pages are released.
const startupSettle = 2 * time.Second

// mib formats n bytes in MiB with one decimal.
func mib(n int64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB" }

func pruneChanges(ctx context.Context, h *hub.Hub, log *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.PruneChanges(ctx, changeLogKeep); err != nil && ctx.Err() == nil {
				log.Error("prune the change log", "err", err)
			}
		}
	}
}

// connLimits cut slow clients off.
type connLimits struct {
	header      time.Duration // the request's headers (and the TLS handshake) must arrive within it
	request     time.Duration // the whole request, body included
	idle        time.Duration // a keep-alive connection waiting for the next request
	headerBytes int
}

// restFirst sends a REST request (a path under /api/, /apis/ or cup's
// /cup/) to api without consulting mux, where only its "/" pattern matches
// such a request: matching it against every pattern cost a twentieth of a
// read served from memory, and 7 allocations of a create. The paths in
// elsewhere (patterns mux has under /apis/: the access reviews), a
// CONNECT, and a path with dot segments go through mux, which cleans and
// redirects the last. A path with an empty segment (namespaces//flags) is
// api's to refuse: cleaned, it would name another resource (namespaces/flags).
func restFirst(mux *http.ServeMux, api http.Handler, elsewhere []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if r.Method != http.MethodConnect &&
			(strings.HasPrefix(p, "/apis/") || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, rest.CupPrefix+"/")) &&
			!strings.Contains(p, "/.") && !underAny(p, elsewhere) {
			api.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// underAny says whether p is one of paths or below one.
func underAny(p string, paths []string) bool {
	for _, q := range paths {
		if strings.HasPrefix(p, q) {
			return true
		}
	}
	return false
}

// defaultLimits: headers within 10 s, a body within 5 min, idle keep-alives
// closed after 2 min, headers at most 1 MiB. There is no write timeout,
// since a watch streams for as long as the client stays.
func defaultLimits() connLimits {
	return connLimits{header: 10 * time.Second, request: 5 * time.Minute, idle: 2 * time.Minute, headerBytes: 1 << 20}
}

func newHTTPServer(h http.Handler, tlsConf *tls.Config, l connLimits) *http.Server {
	return &http.Server{Handler: h, TLSConfig: tlsConf, ReadHeaderTimeout: l.header, ReadTimeout: l.request,
		IdleTimeout: l.idle, MaxHeaderBytes: l.headerBytes}
}
