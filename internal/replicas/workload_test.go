package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
)

// kind is what a workload operation does.
type kind string

const (
	opCreate     kind = "create"      // POST a flag
	opCreateRoot kind = "create-root" // POST typeinstances: a flag that uses an existing leaf
	opPut        kind = "put"         // PUT with metadata.resourceVersion and uid
	opPatch      kind = "patch"       // PATCH (merge) with a uid precondition
	opLock       kind = "lock"
	opUnlock     kind = "unlock"
	opDelete     kind = "delete" // DELETE typeinstances/{uid}
)

// outcome is what the client learnt about a write.
type outcome int

const (
	acked   outcome = iota // the server answered 2xx
	refused                // the server answered with a refusal (404, 409): nothing was written
	unknown                // no answer (the replica died): written or not
)

func (o outcome) String() string { return [...]string{"acked", "refused", "unknown"}[o] }

// op is one write a client sent, with what it learnt.
type op struct {
	Client  int
	Replica string
	Kind    kind
	Name    string
	UID     string // the target; for creates the created instance (from the answer)
	Leaf    string // create-root: the instance the new one uses
	Token   string // the value written: {"key": Token}
	Owner   string // the lock owner sent (lock, unlock, or lockOwner of a write)
	// BasedOn is the acknowledged write whose answer a PUT took its
	// resourceVersion from (rather than from a read).
	BasedOn *op
	Start   time.Time
	End     time.Time
	Outcome outcome
	Code    cairn.Code
	Err     string

	// From the answer to an acknowledged write (the object as the server
	// read it back).
	RespUID   string
	RespToken string
	RespGen   int
	RespSeq   int64
}

func (o *op) String() string {
	s := fmt.Sprintf("client %d via %s: %s %s", o.Client, o.Replica, o.Kind, o.Name)
	if o.UID != "" {
		s += " uid " + o.UID
	}
	if o.Token != "" {
		s += " token " + o.Token
	}
	if o.Owner != "" {
		s += " owner " + o.Owner
	}
	s += fmt.Sprintf(" [%s..%s] %s", o.Start.Format("15:04:05.000000"), o.End.Format("15:04:05.000000"), o.Outcome)
	if o.Code != "" {
		s += " " + string(o.Code)
	}
	return s
}

// workload is a bounded mix of writes by concurrent clients on a small set
// of names, so that they contend: creates of taken names, updates from
// stale reads, locks held by others, deletes of used or locked instances.
type workload struct {
	replicas []*replica
	clients  int
	ops      int // operations in all (an operation is one client step)
	flagPool int // names f00..
	pairPool int // leaf/root pairs u0-leaf, u0-root, ...
	seed     uint64

	// afterOp, when set, is called after every operation with the number
	// done so far (the crash test kills a replica from it).
	afterOp func(done int64)

	next   atomic.Int64
	mu     sync.Mutex
	log    []*op
	errors []string // unexpected answers
	// after the run
	elapsed time.Duration
}

func (w *workload) names() []string {
	var out []string
	for i := range w.flagPool {
		out = append(out, fmt.Sprintf("f%02d", i))
	}
	for i := range w.pairPool {
		out = append(out, fmt.Sprintf("u%d-leaf", i), fmt.Sprintf("u%d-root", i))
	}
	return out
}

// run runs the clients until ops operations were done.
func (w *workload) run(tb testing.TB, typ cairn.TypeRef) {
	tb.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range w.clients {
		wg.Go(func() { w.client(c, typ) })
	}
	wg.Wait()
	w.elapsed = time.Since(start)
	for _, e := range w.errors {
		tb.Error(e)
	}
}

// pick is the replica client c talks to: its own (clients alternate) while
// it lives, else the next live one, as a load balancer would fail over.
func (w *workload) pick(c int) *replica {
	for i := range w.replicas {
		r := w.replicas[(c+i)%len(w.replicas)]
		if !r.killed.Load() {
			return r
		}
	}
	return w.replicas[c%len(w.replicas)]
}

func (w *workload) unexpected(format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errors) < 20 {
		w.errors = append(w.errors, fmt.Sprintf(format, a...))
	}
}

func (w *workload) record(o *op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, o)
}

// clientState is what one client believes.
type clientState struct {
	id    int
	owner string
	rnd   *rand.Rand
	held  map[string]bool // uids this client locked and has not released
	n     int
}

func (w *workload) client(c int, typ cairn.TypeRef) {
	s := &clientState{id: c, owner: fmt.Sprintf("owner-%d", c), rnd: rand.New(rand.NewPCG(w.seed, uint64(c))), held: map[string]bool{}}
	names := w.names()
	for {
		done := w.next.Add(1)
		if done > int64(w.ops) {
			return
		}
		w.step(s, names, typ)
		if w.afterOp != nil {
			w.afterOp(done)
		}
	}
}

// step does one operation.
func (w *workload) step(s *clientState, names []string, typ cairn.TypeRef) {
	s.n++
	token := fmt.Sprintf("c%d-%d", s.id, s.n)
	name := names[s.rnd.IntN(len(names))]
	r := w.pick(s.id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	switch p := s.rnd.IntN(100); {
	case p < 20: // create
		if strings.HasSuffix(name, "-root") {
			w.createRoot(ctx, s, r, name, token, typ)
		} else {
			w.create(ctx, s, r, name, token)
		}
	case p < 40:
		w.put(ctx, s, r, name, token)
	case p < 55:
		w.patch(ctx, s, r, name, token)
	case p < 70:
		if len(s.held) >= 2 {
			w.unlock(ctx, s, r, "")
			return
		}
		w.lock(ctx, s, r, name)
	case p < 85:
		w.unlock(ctx, s, r, name)
	default:
		w.delete(ctx, s, r, name)
	}
}

// read GETs a flag through r; ok is false when there is none or the
// replica did not answer.
func (w *workload) read(ctx context.Context, s *clientState, r *replica, name string) (rest.Object, bool) {
	r.inflight.Add(1)
	raw, err := r.client.Get(ctx, flags, namespace, name)
	r.inflight.Add(-1)
	var obj rest.Object
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &obj); err != nil {
			w.unexpected("client %d: GET %s via %s: decode %s: %v", s.id, name, r.name, raw, err)
			return obj, false
		}
		return obj, true
	case cairn.HasCode(err, cairn.CodeNotFound):
	case isTransport(err) && r.killed.Load():
	default:
		w.unexpected("client %d: GET %s via %s: %v", s.id, name, r.name, err)
	}
	return obj, false
}

// isTransport reports an error of the connection rather than an answer.
func isTransport(err error) bool {
	var ce *cairn.Error
	return errors.As(err, &ce) && ce.Code == cairn.CodeUnavailable && ce.Err != nil
}

// send runs one write through r and records it.
func (w *workload) send(s *clientState, r *replica, o *op, fn func() (json.RawMessage, error)) (json.RawMessage, error) {
	o.Client, o.Replica = s.id, r.name
	r.inflight.Add(1)
	r.inflightWrites.Add(1)
	o.Start = time.Now()
	out, err := fn()
	o.End = time.Now()
	r.inflightWrites.Add(-1)
	r.inflight.Add(-1)
	switch code := cairn.ErrorCode(err); {
	case err == nil:
		o.Outcome = acked
	case isTransport(err):
		o.Outcome, o.Code, o.Err = unknown, code, err.Error()
		if !r.killed.Load() {
			w.unexpected("client %d: %s %s via live replica %s: no answer: %v", s.id, o.Kind, o.Name, r.name, err)
		}
	case code == cairn.CodeNotFound, code == cairn.CodeAlreadyExists, code == cairn.CodeConflict,
		code == cairn.CodeLocked, code == cairn.CodeUsedBy:
		o.Outcome, o.Code, o.Err = refused, code, err.Error()
	default:
		// Internal errors, 503s, invalid requests: none is expected.
		o.Outcome, o.Code, o.Err = unknown, code, err.Error()
		w.unexpected("client %d: %s %s via %s: unexpected answer: %v", s.id, o.Kind, o.Name, r.name, err)
	}
	w.record(o)
	return out, err
}

func value(token string) json.RawMessage {
	return json.RawMessage(`{"key":` + strconv.Quote(token) + `}`)
}

func tokenOf(spec json.RawMessage) string {
	var v struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(spec, &v)
	return v.Key
}

// fromObject fills an acknowledged op's answer from a served flag.
func (o *op) fromObject(raw json.RawMessage) error {
	var obj rest.Object
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("decode the answer %s: %w", raw, err)
	}
	seq, err := strconv.ParseInt(obj.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("the answer's resourceVersion %q: %w", obj.Metadata.ResourceVersion, err)
	}
	o.RespUID, o.RespToken, o.RespGen, o.RespSeq = obj.Metadata.UID, tokenOf(obj.Spec), int(obj.Metadata.Generation), seq
	return nil
}

func (w *workload) create(ctx context.Context, s *clientState, r *replica, name, token string) {
	o := &op{Kind: opCreate, Name: name, Token: token}
	obj := rest.Object{APIVersion: "flipt.io/v1alpha1", Kind: "Flag", Metadata: rest.ObjectMeta{Name: name}, Spec: value(token)}
	out, err := w.send(s, r, o, func() (json.RawMessage, error) { return r.client.Create(ctx, flags, namespace, obj) })
	if err == nil {
		if err := o.fromObject(out); err != nil {
			w.unexpected("client %d: create %s: %v", s.id, name, err)
		}
		o.UID = o.RespUID
	}
}

// createRoot creates name as a TypeInstance that uses its leaf, by id.
func (w *workload) createRoot(ctx context.Context, s *clientState, r *replica, name, token string, typ cairn.TypeRef) {
	leafName := strings.TrimSuffix(name, "-root") + "-leaf"
	leaf, ok := w.read(ctx, s, r, leafName)
	if !ok {
		w.create(ctx, s, r, leafName, token)
		return
	}
	o := &op{Kind: opCreateRoot, Name: name, Token: token, Leaf: leaf.Metadata.UID}
	doc := map[string]any{
		"apiVersion": rest.HubGroup + "/" + rest.HubVersion, "kind": "TypeInstance",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"typeRef": typ, "value": value(token), "uses": []string{leaf.Metadata.UID}},
	}
	out, err := w.send(s, r, o, func() (json.RawMessage, error) { return r.client.Create(ctx, client.TypeInstances, "", doc) })
	if err == nil {
		var ti rest.TypeInstanceObject
		if err := json.Unmarshal(out, &ti); err != nil {
			w.unexpected("client %d: create %s: decode %s: %v", s.id, name, out, err)
			return
		}
		seq, _ := strconv.ParseInt(ti.Metadata.ResourceVersion, 10, 64)
		o.UID, o.RespUID, o.RespToken, o.RespGen, o.RespSeq = ti.Metadata.UID, ti.Metadata.UID, tokenOf(ti.Spec.Value), ti.Status.ResourceVersion, seq
		if !slices.Contains(ti.Status.Uses, o.Leaf) {
			w.unexpected("client %d: created %s uses %v, want %s", s.id, name, ti.Status.Uses, o.Leaf)
		}
	}
}

func (s *clientState) lockOwner(uid string) string {
	if s.held[uid] {
		return s.owner
	}
	return ""
}

// put replaces the value, conditional on the resourceVersion just read.
func (w *workload) put(ctx context.Context, s *clientState, r *replica, name, token string) {
	cur, ok := w.read(ctx, s, r, name)
	if !ok {
		return
	}
	o := &op{Kind: opPut, Name: name, UID: cur.Metadata.UID, Token: token, Owner: s.lockOwner(cur.Metadata.UID)}
	cur.Spec, cur.Status = value(token), nil
	out, err := w.send(s, r, o, func() (json.RawMessage, error) {
		return r.client.Replace(ctx, flags, namespace, name, cur, client.WriteOptions{LockOwner: o.Owner})
	})
	if err != nil {
		return
	}
	if err := o.fromObject(out); err != nil {
		w.unexpected("client %d: put %s: %v", s.id, name, err)
		return
	}
	if s.rnd.IntN(2) == 0 {
		return
	}
	// Half the time, go on from the answer as Kubernetes clients do: the
	// next PUT carries the answer's resourceVersion, so it must be refused
	// if anything was written since this write.
	var next rest.Object
	if err := json.Unmarshal(out, &next); err != nil {
		w.unexpected("client %d: put %s: %v", s.id, name, err)
		return
	}
	s.n++
	chained := &op{Kind: opPut, Name: name, UID: o.UID, Token: fmt.Sprintf("c%d-%d", s.id, s.n), Owner: o.Owner, BasedOn: o}
	next.Spec, next.Status = value(chained.Token), nil
	out, err = w.send(s, r, chained, func() (json.RawMessage, error) {
		return r.client.Replace(ctx, flags, namespace, name, next, client.WriteOptions{LockOwner: chained.Owner})
	})
	if err == nil {
		if err := chained.fromObject(out); err != nil {
			w.unexpected("client %d: put %s: %v", s.id, name, err)
		}
	}
}

// patch merges a new value into whatever is current, as long as it is
// still the instance read (a uid precondition).
func (w *workload) patch(ctx context.Context, s *clientState, r *replica, name, token string) {
	cur, ok := w.read(ctx, s, r, name)
	if !ok {
		return
	}
	o := &op{Kind: opPatch, Name: name, UID: cur.Metadata.UID, Token: token, Owner: s.lockOwner(cur.Metadata.UID)}
	patch := []byte(`{"metadata":{"uid":` + strconv.Quote(cur.Metadata.UID) + `},"spec":` + string(value(token)) + `}`)
	out, err := w.send(s, r, o, func() (json.RawMessage, error) {
		return r.client.Patch(ctx, flags, namespace, name, client.MergePatch, patch, client.WriteOptions{LockOwner: o.Owner})
	})
	if err == nil {
		if err := o.fromObject(out); err != nil {
			w.unexpected("client %d: patch %s: %v", s.id, name, err)
		}
	}
}

func (w *workload) lock(ctx context.Context, s *clientState, r *replica, name string) {
	cur, ok := w.read(ctx, s, r, name)
	if !ok {
		return
	}
	o := &op{Kind: opLock, Name: name, UID: cur.Metadata.UID, Owner: s.owner}
	_, err := w.send(s, r, o, func() (json.RawMessage, error) { return nil, r.client.Lock(ctx, []string{o.UID}, s.owner) })
	if err == nil {
		s.held[o.UID] = true
	}
}

// unlock releases a lock this client holds (name "" or a coin flip), or
// tries to unlock name, which may be locked by someone else.
func (w *workload) unlock(ctx context.Context, s *clientState, r *replica, name string) {
	var uid string
	if len(s.held) > 0 && (name == "" || s.rnd.IntN(4) > 0) {
		held := make([]string, 0, len(s.held))
		for id := range s.held {
			held = append(held, id)
		}
		sort.Strings(held)
		uid, name = held[s.rnd.IntN(len(held))], ""
	} else {
		if name == "" {
			return
		}
		cur, ok := w.read(ctx, s, r, name)
		if !ok {
			return
		}
		uid = cur.Metadata.UID
	}
	o := &op{Kind: opUnlock, Name: name, UID: uid, Owner: s.owner}
	// Whatever the answer, this client no longer counts on the lock.
	delete(s.held, uid)
	_, _ = w.send(s, r, o, func() (json.RawMessage, error) { return nil, r.client.Unlock(ctx, []string{uid}, s.owner) })
}

func (w *workload) delete(ctx context.Context, s *clientState, r *replica, name string) {
	cur, ok := w.read(ctx, s, r, name)
	if !ok {
		return
	}
	o := &op{Kind: opDelete, Name: name, UID: cur.Metadata.UID, Owner: s.lockOwner(cur.Metadata.UID)}
	_, _ = w.send(s, r, o, func() (json.RawMessage, error) {
		return nil, r.client.Delete(ctx, client.TypeInstances, "", o.UID, client.WriteOptions{LockOwner: o.Owner})
	})
	if o.Outcome != refused {
		delete(s.held, o.UID) // gone, or perhaps gone
	}
}

// summary counts the recorded writes by kind and outcome.
func (w *workload) summary() string {
	type key struct {
		k kind
		o outcome
	}
	n := map[key]int{}
	codes := map[cairn.Code]int{}
	for _, o := range w.log {
		n[key{o.Kind, o.Outcome}]++
		if o.Outcome == refused {
			codes[o.Code]++
		}
	}
	var b strings.Builder
	for _, k := range []kind{opCreate, opCreateRoot, opPut, opPatch, opLock, opUnlock, opDelete} {
		fmt.Fprintf(&b, " %s %d/%d/%d", k, n[key{k, acked}], n[key{k, refused}], n[key{k, unknown}])
	}
	var cs []string
	for c, k := range codes {
		cs = append(cs, fmt.Sprintf("%s %d", c, k))
	}
	sort.Strings(cs)
	return "writes (acked/refused/unknown):" + b.String() + "; refusals: " + strings.Join(cs, ", ")
}

func (w *workload) count(o outcome) int {
	n := 0
	for _, x := range w.log {
		if x.Outcome == o {
			n++
		}
	}
	return n
}

// latencies summarizes the writes' latencies by kind: median and maximum.
func (w *workload) latencies() string {
	by := map[kind][]time.Duration{}
	for _, o := range w.log {
		by[o.Kind] = append(by[o.Kind], o.End.Sub(o.Start))
	}
	var b strings.Builder
	for _, k := range []kind{opCreate, opCreateRoot, opPut, opPatch, opLock, opUnlock, opDelete} {
		ds := by[k]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		fmt.Fprintf(&b, " %s p50 %v p90 %v max %v;", k, ds[len(ds)/2].Round(time.Millisecond/10), ds[len(ds)*9/10].Round(time.Millisecond/10), ds[len(ds)-1].Round(time.Millisecond/10))
	}
	return "write latencies:" + strings.TrimSuffix(b.String(), ";")
}
