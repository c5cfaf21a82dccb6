package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// probeCheck is one named check of a health endpoint; nil check: always ok.
type probeCheck struct {
	name  string
	check func(ctx context.Context) error
	// summary, when set, is answered in place of the check's error, which
	// is logged: the probes answer everyone, without credentials, and a
	// store's error names its hosts, users and databases (the API server
	// withholds every reason so).
	summary string
}

// probes serves a health endpoint the way the Kubernetes API server serves
// /livez and /readyz: the endpoint runs every check and answers "ok", or
// with ?verbose one "[+]name ok" line per check and "<endpoint> check
// passed"; /<endpoint>/<name> runs one check; ?exclude=name skips one. A
// failing check answers 503 (cairn's readiness contract, which load
// balancers read) naming the check and why.
func probes(mux *http.ServeMux, log *slog.Logger, endpoint string, checks []probeCheck) {
	run := func(w http.ResponseWriter, r *http.Request, selected []probeCheck) {
		q := r.URL.Query()
		_, verbose := q["verbose"]
		var b strings.Builder
		failed := false
		for _, c := range selected {
			if slices.Contains(q["exclude"], c.name) {
				fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.name)
				continue
			}
			if c.check != nil {
				if err := c.check(r.Context()); err != nil {
					failed = true
					if c.summary != "" {
						log.WarnContext(r.Context(), endpoint+" check failed", "check", c.name, "err", err)
						fmt.Fprintf(&b, "[-]%s failed: %s (reason withheld: see the server's log)\n", c.name, c.summary)
						continue
					}
					fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
					continue
				}
			}
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "%s%s check failed\n", b.String(), endpoint)
			return
		}
		if verbose {
			fmt.Fprintf(w, "%s%s check passed\n", b.String(), endpoint)
			return
		}
		fmt.Fprintln(w, "ok")
	}
	mux.HandleFunc("GET /"+endpoint, func(w http.ResponseWriter, r *http.Request) { run(w, r, checks) })
	for _, c := range checks {
		mux.HandleFunc("GET /"+endpoint+"/"+c.name, func(w http.ResponseWriter, r *http.Request) { run(w, r, []probeCheck{c}) })
	}
}
