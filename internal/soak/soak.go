// Package soak runs a mixed workload against a running cairn server for a
// while and checks, at the end, what must hold however long it runs: no
// acknowledged write lost and nothing refused written (in the hub, and in
// the repository of a Git backend the soak writes to), resource versions
// gapless and only growing, every watch saw every change, and the server's
// memory and goroutines bounded. It samples RSS, goroutines and latency
// over time for the report and the plot (see scripts/soak).
package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	restclient "github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/hub"
)

// Config says what to run and for how long.
type Config struct {
	Server   string        // base URL of the cairn server
	Duration time.Duration // of the workload
	Writers  int           // goroutines writing, each on a pool of its own instances
	Readers  int           // goroutines reading (REST gets and lists, GraphQL lists)
	Watchers int           // watch streams
	Pool     int           // instances per writer: the data set stays bounded
	Sample   time.Duration // how often RSS, goroutines and latency are sampled
	// GitInterval is the pause between the writes of the Git writer, which
	// creates, updates and deletes instances in a Git backend; negative:
	// no Git writes.
	GitInterval time.Duration
	GitPool     int // instances of the Git writer
	// GitDir is where the bare repository is created; the server must
	// reach it as file:// (run on this machine). Empty: a temporary
	// directory, removed when Run returns.
	GitDir string
	// Progress receives one line per sample; nil for none.
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.Writers <= 0 {
		c.Writers = 4
	}
	if c.Readers <= 0 {
		c.Readers = 2
	}
	if c.Watchers <= 0 {
		c.Watchers = 2
	}
	if c.Pool <= 0 {
		c.Pool = 25
	}
	if c.Sample <= 0 {
		c.Sample = time.Second
	}
	if c.GitInterval == 0 {
		c.GitInterval = 200 * time.Millisecond
	}
	if c.GitPool <= 0 {
		c.GitPool = 10
	}
}

// typeRef is the Type of the soak's instances; label marks them (and
// those of gitTypeRef).
var typeRef = cairn.TypeRef{Path: "cap.type.soak.counter", Revision: "0.1.0"}

const valueSchema = `{"type":"object","required":["writer","slot","n"],"properties":{"n":{"type":"integer","minimum":0}}}`

const (
	label     = "cairn.dev/soak" // its value is the run's id
	roleLabel = "cairn.dev/soak-writer"
)

// labels are those of an instance the soak writes for role (the writer).
func (r *run) labels(role string) map[string]string {
	return map[string]string{label: r.id, roleLabel: role}
}

// expectedKind is the error kind of a race whose outcome is correct.
const expectedKind = "value deleted meanwhile (expected race)"

// value is what a soak instance holds.
type value struct {
	Writer int `json:"writer"`
	Slot   int `json:"slot"`
	N      int `json:"n"`
}

// run is the state of one soak run.
type run struct {
	cfg   Config
	id    string // of the run, the value of label on its instances
	c     client.Client
	hc    *http.Client
	start time.Time

	mu   sync.Mutex
	ops  map[string]int
	errs map[string]int
	// examples keeps the first error message of each kind.
	examples map[string]string
	acks     []ack
	expects  map[string]expect
	latest   map[string]int64 // acknowledged Seq per id, for the monotonic-read check
	lat      []latency
	viol     []string

	git      *gitTarget        // nil without Git writes
	gitNames map[string]string // instance id to name, of the Git writer's instances
}

type latency struct {
	at   time.Duration
	op   string
	took time.Duration
}

// selector selects the run's instances: a run against a database that
// earlier runs used sees none of theirs.
func (r *run) selector() string { return label + "=" + r.id }

func (r *run) violation(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.viol) < 50 {
		r.viol = append(r.viol, fmt.Sprintf(format, a...))
	}
}

// done records one operation, its latency and its error kind.
func (r *run) done(op string, began time.Time, err error) {
	took := time.Since(began)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops[op]++
	r.lat = append(r.lat, latency{at: began.Sub(r.start), op: op, took: took})
	if err != nil {
		k := op + ": " + errKind(err)
		if r.errs[k] == 0 {
			r.examples[k] = err.Error()
		}
		r.errs[k]++
	}
}

func errKind(err error) string {
	if errors.Is(err, errDeletedMeanwhile) {
		return expectedKind
	}
	if code := cairn.ErrorCode(err); code != cairn.CodeInternal {
		return string(code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline exceeded"
	}
	return "other"
}

// Run runs the workload against cfg.Server and checks the invariants.
// The returned Report lists every violation; err is for a run that could
// not be carried out at all.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	rc, err := restclient.New(cfg.Server, restclient.WithActor("soak"))
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, id: strconv.FormatInt(time.Now().UnixNano(), 36), c: client.NewRemote(rc), hc: &http.Client{Timeout: 30 * time.Second},
		ops: map[string]int{}, errs: map[string]int{}, examples: map[string]string{}, expects: map[string]expect{}, latest: map[string]int64{},
		gitNames: map[string]string{}}
	if _, _, err := r.c.ApplyType(ctx, cairn.Type{Path: typeRef.Path, Revision: typeRef.Revision,
		JSONSchema: json.RawMessage(valueSchema)}); err != nil {
		return nil, fmt.Errorf("soak: register the Type: %w", err)
	}
	if cfg.GitInterval > 0 {
		dir, cleanup, err := gitDir(cfg)
		if err != nil {
			return nil, fmt.Errorf("soak: a directory for the Git repository: %w", err)
		}
		defer cleanup()
		if r.git, err = r.setupGit(ctx, dir); err != nil {
			return nil, err
		}
	}

	sampler := newSampler(r)
	baseline, err := sampler.scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("soak: read the server's metrics: %w", err)
	}
	r.start = time.Now()

	// Watchers start before the first write, from a list.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watchers := make([]*watcher, cfg.Watchers)
	var wwg sync.WaitGroup
	for i := range watchers {
		w := &watcher{r: r, name: fmt.Sprintf("watcher %d", i), seen: make(chan int64, 1)}
		if err := w.list(watchCtx); err != nil {
			return nil, fmt.Errorf("soak: %s: %w", w.name, err)
		}
		watchers[i] = w
		wwg.Add(1)
		go func() { defer wwg.Done(); w.loop(watchCtx) }()
	}

	sampleCtx, stopSample := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.loop(sampleCtx) }()

	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var lwg sync.WaitGroup
	for w := range cfg.Writers {
		lwg.Add(1)
		go func() { defer lwg.Done(); r.writer(ctx, loadCtx, w) }()
	}
	for i := range cfg.Readers {
		lwg.Add(1)
		go func() { defer lwg.Done(); r.reader(ctx, loadCtx, i) }()
	}
	if r.git != nil {
		lwg.Add(1)
		go func() { defer lwg.Done(); r.gitWriter(ctx, loadCtx) }()
	}
	lwg.Wait()
	stopSample()
	<-sampled

	// A last write every watcher must see: then each has seen all before it.
	marker, err := r.c.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "soak-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36), TypeRef: typeRef,
		Labels: r.labels("marker"), Value: json.RawMessage(`{"writer":-1,"slot":0,"n":0}`)}}})
	if err != nil {
		return nil, fmt.Errorf("soak: write the end marker: %w", err)
	}
	for _, w := range watchers {
		if !w.waitFor(ctx, marker[0].Instance.Seq, 30*time.Second) {
			r.violation("%s: did not see the end marker (at %d) within 30s: the watch stalled", w.name, marker[0].Instance.Seq)
		}
	}
	stopWatch()
	wwg.Wait()

	finals, err := r.finals(ctx)
	if err != nil {
		return nil, err
	}
	finals[marker[0].ID] = final{seq: marker[0].Instance.Seq, rvs: 1}
	for _, w := range watchers {
		for _, v := range checkWatch(w.name, w.events, r.acks, finals, 20) {
			r.violation("%s", v)
		}
	}
	for _, v := range checkFinal(r.expects, finals, 20) {
		r.violation("%s", v)
	}
	var gc *GitCheck
	if r.git != nil {
		files, err := gitFiles(r.git.bare)
		if err != nil {
			return nil, err
		}
		for _, v := range checkGit(r.git.backendID, r.gitNames, r.expects, finals, files, 20) {
			r.violation("%s", v)
		}
		gc = &GitCheck{Repository: r.git.bare, Backend: r.git.backendID, Instances: len(r.gitNames), Files: len(files)}
		for id := range r.gitNames {
			if !r.expects[id].deleted {
				gc.Live++
			}
		}
	}

	// Idle: what the load started must have ended.
	time.Sleep(2 * time.Second)
	end, err := sampler.scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("soak: read the server's metrics: %w", err)
	}
	if r.git != nil {
		r.cleanupGit(ctx)
	}
	rep := r.report(baseline, end, sampler.samples)
	rep.Git = gc
	return rep, nil
}

// writer works on its own pool of instances: create the absent, update the
// present (sometimes under a lock it takes, after checking that a write
// without the lock is refused), delete now and then, until until ends.
// Requests run on ctx, so none is cut off at the deadline with an unknown
// outcome.
func (r *run) writer(ctx, until context.Context, w int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	type slot struct {
		id  string
		n   int
		rvs int
	}
	slots := make([]slot, r.cfg.Pool)
	for until.Err() == nil {
		i := rng.IntN(len(slots))
		s := &slots[i]
		began := time.Now()
		switch p := rng.IntN(100); {
		case s.id == "":
			c, err := r.c.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				Name: fmt.Sprintf("soak-%d-%d-%d", w, i, began.UnixNano()), TypeRef: typeRef,
				Labels: r.labels("w" + strconv.Itoa(w)),
				Value:  mustJSON(value{Writer: w, Slot: i, N: 0})}}})
			if r.finish(ctx, "create", began, err) {
				return
			}
			if err == nil {
				*s = slot{id: c[0].ID, n: 0, rvs: 1}
				r.acked(ack{id: s.id, seq: c[0].Instance.Seq}, expect{n: 0, rvs: 1})
			}
		case p < 8:
			err := r.c.DeleteInstance(ctx, s.id, "")
			if r.finish(ctx, "delete", began, err) {
				return
			}
			if err == nil {
				r.acked(ack{id: s.id, deleted: true}, expect{deleted: true})
				*s = slot{}
			}
		case p < 18:
			owner := fmt.Sprintf("soak-writer-%d", w)
			err := r.c.LockInstances(ctx, []string{s.id}, owner)
			if r.finish(ctx, "lock", began, err) || err != nil {
				continue
			}
			// Another caller's write is refused and changes nothing.
			began = time.Now()
			_, err = r.c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: s.id, Value: mustJSON(value{Writer: w, Slot: i, N: -1})}})
			r.done("update-locked", began, nil)
			if !cairn.HasCode(err, cairn.CodeLocked) && ctx.Err() == nil {
				r.violation("instance %s: an update without its lock got %v, want Locked", s.id, err)
			}
			began = time.Now()
			up, err := r.c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: s.id, OwnerID: owner, Value: mustJSON(value{Writer: w, Slot: i, N: s.n + 1})}})
			if r.finish(ctx, "update", began, err) {
				return
			}
			if err == nil {
				s.n, s.rvs = s.n+1, s.rvs+1
				r.acked(ack{id: s.id, seq: up[0].Seq}, expect{n: s.n, rvs: s.rvs})
			}
			began = time.Now()
			err = r.c.UnlockInstances(ctx, []string{s.id}, owner)
			r.finish(ctx, "unlock", began, err)
		default:
			up, err := r.c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: s.id, Value: mustJSON(value{Writer: w, Slot: i, N: s.n + 1})}})
			if r.finish(ctx, "update", began, err) {
				return
			}
			if err == nil {
				s.n, s.rvs = s.n+1, s.rvs+1
				r.acked(ack{id: s.id, seq: up[0].Seq}, expect{n: s.n, rvs: s.rvs})
			}
		}
	}
}

// finish records an operation; it reports true when the run is over (the
// error is the end of the workload, not the server's).
func (r *run) finish(ctx context.Context, op string, began time.Time, err error) bool {
	if err != nil && ctx.Err() != nil {
		return true
	}
	r.done(op, began, err)
	return false
}

func (r *run) acked(a ack, x expect) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, a)
	r.expects[a.id] = x
	if a.deleted {
		delete(r.latest, a.id)
	} else {
		r.latest[a.id] = a.seq
	}
}

// reader lists through REST and GraphQL and reads single instances,
// checking that a read never shows an instance older than a write already
// acknowledged.
func (r *run) reader(ctx, until context.Context, n int) {
	rng := rand.New(rand.NewPCG(uint64(100+n), uint64(time.Now().UnixNano())))
	for until.Err() == nil {
		began := time.Now()
		switch rng.IntN(3) {
		case 0:
			_, err := r.c.List(ctx, restclient.TypeInstances, "", restclient.ListOptions{LabelSelector: r.selector()})
			if r.finish(ctx, "list", began, err) {
				return
			}
		case 1:
			err := r.graphqlList(ctx)
			if r.finish(ctx, "graphql-list", began, err) {
				return
			}
		default:
			id, seq := r.someAcked(rng)
			if id == "" {
				continue
			}
			inst, err := r.c.GetInstance(ctx, id, true)
			if cairn.HasCode(err, cairn.CodeNotFound) {
				err = nil // deleted since
			} else if err == nil && inst.Seq < seq {
				r.violation("instance %s: read at %d after a write at %d was acknowledged", id, inst.Seq, seq)
			}
			if r.finish(ctx, "get", began, err) {
				return
			}
		}
	}
}

func (r *run) someAcked(rng *rand.Rand) (string, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.acks) == 0 {
		return "", 0
	}
	a := r.acks[rng.IntN(len(r.acks))]
	return a.id, r.latest[a.id]
}

// graphqlList lists the instances through the Capact-style GraphQL API.
func (r *run) graphqlList(ctx context.Context) error {
	q := `{"query":"{ typeInstances(filter: {typeRef: {path: \"` + typeRef.Path + `\"}}) { id latestResourceVersion { resourceVersion spec { value } } } }"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(r.cfg.Server, "/")+"/graphql", strings.NewReader(q))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			TypeInstances []struct{ ID string } `json:"typeInstances"`
		} `json:"data"`
		Errors []struct{ Message string } `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("graphql: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("graphql: %d %v", resp.StatusCode, out.Errors)
	}
	raced := 0
	for _, e := range out.Errors {
		if strings.Contains(e.Message, "deleted while it was read") {
			raced++
		}
	}
	switch {
	case len(out.Errors) == 0:
		return nil
	case raced == len(out.Errors):
		return errDeletedMeanwhile
	}
	return fmt.Errorf("graphql: %v", out.Errors)
}

// errDeletedMeanwhile is the expected outcome of a list racing a delete:
// the value of an instance deleted between the list and the value read
// is reported as gone, for that instance only.
var errDeletedMeanwhile = errors.New("the value of an instance deleted while the list was read")

// finals reads every soak instance's final state (including the ones that
// were deleted: they must be gone).
func (r *run) finals(ctx context.Context) (map[string]final, error) {
	list, err := r.c.ListAll(ctx, restclient.TypeInstances, "", restclient.ListOptions{LabelSelector: r.selector()})
	if err != nil {
		return nil, fmt.Errorf("soak: final list: %w", err)
	}
	finals := map[string]final{}
	for id := range r.expects {
		finals[id] = final{gone: true}
	}
	for _, raw := range list.Items {
		id, _, err := identity(raw)
		if err != nil {
			return nil, fmt.Errorf("soak: final list: %w", err)
		}
		inst, err := r.c.GetInstance(ctx, id, true)
		if err != nil {
			return nil, fmt.Errorf("soak: final read of %s: %w", id, err)
		}
		var v value
		if err := json.Unmarshal(inst.Latest.Value, &v); err != nil {
			return nil, fmt.Errorf("soak: final value of %s: %w", id, err)
		}
		history, err := r.c.ResourceVersions(ctx, id, false)
		if err != nil {
			return nil, fmt.Errorf("soak: history of %s: %w", id, err)
		}
		for i, rv := range history {
			if rv.ResourceVersion != i+1 {
				r.violation("instance %s: resource version %d at position %d: the history has a gap or goes back", id, rv.ResourceVersion, i+1)
				break
			}
		}
		finals[id] = final{seq: inst.Seq, n: v.N, rvs: len(history), backend: inst.Backend.ID}
	}
	return finals, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// watcher follows the soak instances as a Kubernetes client would: watch
// from a list, resume from the last resourceVersion when the stream ends,
// relist on 410 Gone.
type watcher struct {
	r      *run
	name   string
	rv     int64
	known  map[string]bool
	events []event
	seen   chan int64 // the newest Seq, for waitFor
	mu     sync.Mutex
	latest int64
}

func (w *watcher) list(ctx context.Context) error {
	list, err := w.r.c.ListAll(ctx, restclient.TypeInstances, "", restclient.ListOptions{LabelSelector: w.r.selector()})
	if err != nil {
		return err
	}
	rv, err := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("list resourceVersion %q: %w", list.Metadata.ResourceVersion, err)
	}
	listed := map[string]bool{}
	relist := w.known != nil
	if relist {
		w.events = append(w.events, event{kind: "RELIST", seq: rv})
	}
	for _, raw := range list.Items {
		id, seq, err := identity(raw)
		if err != nil {
			return err
		}
		listed[id] = true
		if relist {
			w.events = append(w.events, event{kind: "LIST", id: id, seq: seq})
		}
	}
	for id := range w.known {
		if !listed[id] {
			w.events = append(w.events, event{kind: "LIST-DELETED", id: id, seq: rv})
		}
	}
	w.known, w.rv = listed, rv
	w.note(rv)
	return nil
}

func (w *watcher) loop(ctx context.Context) {
	for ctx.Err() == nil {
		ch, err := w.r.c.Watch(ctx, restclient.TypeInstances, "", restclient.ListOptions{LabelSelector: w.r.selector(), ResourceVersion: strconv.FormatInt(w.rv, 10)})
		if cairn.HasCode(err, cairn.CodeGone) {
			w.r.mu.Lock()
			w.r.errs["watch: relist after 410 Gone"]++
			w.r.mu.Unlock()
			if err := w.list(ctx); err != nil && ctx.Err() == nil {
				w.r.violation("%s: relist: %v", w.name, err)
				return
			}
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				w.r.violation("%s: watch: %v", w.name, err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		for ev := range ch {
			if ev.Type == "ERROR" {
				w.r.violation("%s: ERROR event: %s", w.name, ev.Object)
				continue
			}
			id, seq, err := identity(ev.Object)
			if err != nil {
				w.r.violation("%s: %v", w.name, err)
				continue
			}
			w.events = append(w.events, event{kind: ev.Type, id: id, seq: seq})
			if ev.Type == "DELETED" {
				delete(w.known, id)
			} else {
				w.known[id] = true
			}
			w.rv = seq
			w.note(seq)
		}
		if ctx.Err() == nil {
			w.r.mu.Lock()
			w.r.errs["watch: stream ended, resumed"]++
			w.r.mu.Unlock()
		}
	}
}

func (w *watcher) note(seq int64) {
	w.mu.Lock()
	w.latest = max(w.latest, seq)
	w.mu.Unlock()
	select {
	case w.seen <- seq:
	default:
	}
}

// waitFor waits until the watcher has seen seq.
func (w *watcher) waitFor(ctx context.Context, seq int64, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		done := w.latest >= seq
		w.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-w.seen:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// identity reads a TypeInstance's id and resourceVersion.
func identity(raw json.RawMessage) (string, int64, error) {
	var o struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", 0, fmt.Errorf("watch object: %w", err)
	}
	seq, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	if err != nil || o.Metadata.Name == "" {
		return "", 0, fmt.Errorf("watch object without a name or resourceVersion: %s", bytes.TrimSpace(raw))
	}
	return o.Metadata.Name, seq, nil
}
