package replicas

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/store/postgres"
)

// checker runs the invariant checks on the database after a workload. Each
// check counts what it looked at; failures go to tb.Errorf (at most a few
// per check, with the operations involved).
type checker struct {
	tb  testing.TB
	ctx context.Context
	typ cairn.TypeRef
	w   *workload

	// What the database holds, read through cairn's store (store.Reader) on
	// a connection pool of the test's own, and with plain SQL.
	st      *postgres.Store
	conn    *pgx.Conn
	insts   map[string]cairn.Instance // flags by uid
	tokens  map[string][]string       // uid -> token of resource version i+1
	tokenAt map[string]versionRef     // token -> where it is
	changes map[string][]store.Change // uid -> its changes in order
	lastSeq int64

	checked []string // "name: n items"
	failed  map[string]int

	// Create answers that showed a later state, and those that showed
	// another instance.
	laterCreateAnswers, otherCreateAnswers int
}

const checkValues = "every version of a built-in instance has its value, and no value is without its version"

type versionRef struct {
	uid string
	rv  int
}

func newChecker(tb testing.TB, db database, typ cairn.TypeRef, w *workload) *checker {
	tb.Helper()
	st, err := postgres.Open(context.Background(), db.schema.DSN, postgres.WithSchema(db.schema.Name), postgres.WithMaxConns(2))
	if err != nil {
		tb.Fatalf("open the database for the checks: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return &checker{tb: tb, ctx: context.Background(), typ: typ, w: w, st: st, conn: db.conn(tb), failed: map[string]int{}}
}

// fail reports one violation of check.
func (c *checker) fail(check, format string, a ...any) {
	c.tb.Helper()
	c.failed[check]++
	if c.failed[check] <= 5 {
		c.tb.Errorf("INVARIANT %q violated: %s", check, fmt.Sprintf(format, a...))
	}
}

func (c *checker) done(check string, n int, unit string) {
	c.checked = append(c.checked, fmt.Sprintf("%s (%d %s)", check, n, unit))
}

// load reads the final state.
func (c *checker) load() {
	c.tb.Helper()
	list, err := c.st.ListInstances(c.ctx, store.InstanceFilter{TypePath: c.typ.Path, Namespace: namespace})
	if err != nil {
		c.tb.Fatalf("list instances: %v", err)
	}
	c.insts = map[string]cairn.Instance{}
	c.tokens = map[string][]string{}
	c.tokenAt = map[string]versionRef{}
	for _, in := range list {
		c.insts[in.ID] = in
		vs, err := c.st.ResourceVersions(c.ctx, in.ID)
		if err != nil {
			c.tb.Fatalf("resource versions of %s: %v", in.ID, err)
		}
		for _, v := range vs {
			raw, err := c.st.Value(c.ctx, in.ID, v.ResourceVersion)
			if err != nil {
				c.fail(checkValues, "instance %s version %d: %v", in.ID, v.ResourceVersion, err)
				continue
			}
			tok := tokenOf(raw)
			c.tokens[in.ID] = append(c.tokens[in.ID], tok)
			if prev, dup := c.tokenAt[tok]; dup {
				c.fail("every acknowledged update is present", "token %s written twice: %s v%d and %s v%d", tok, prev.uid, prev.rv, in.ID, v.ResourceVersion)
			}
			c.tokenAt[tok] = versionRef{in.ID, v.ResourceVersion}
		}
	}
	c.changes = map[string][]store.Change{}
	var after int64
	for {
		cs, err := c.st.Changes(c.ctx, after, 1000)
		if err != nil {
			c.tb.Fatalf("read the change log after %d: %v", after, err)
		}
		if len(cs) == 0 {
			break
		}
		for _, ch := range cs {
			if ch.Seq <= after {
				c.fail("the change log is ordered", "change %d after %d", ch.Seq, after)
			}
			after = ch.Seq
			if ch.TypeRef.Path == c.typ.Path && ch.Namespace == namespace {
				c.changes[ch.InstanceID] = append(c.changes[ch.InstanceID], ch)
			}
		}
	}
	if c.lastSeq, err = c.st.LastSeq(c.ctx); err != nil {
		c.tb.Fatalf("last seq: %v", err)
	}
	if c.lastSeq != after {
		c.fail("the change log is ordered", "LastSeq %d, but the last change read is %d", c.lastSeq, after)
	}
	c.resolveCreates()
}

// resolveCreates checks each acknowledged create's answer against the
// database: the answer is the object as the create's own transaction stored
// it (hub.Created.Instance), so it must show the value the client wrote and
// name the instance whose version 1 holds that value — never a later change
// by another client, nor another instance that took the name after a delete.
func (c *checker) resolveCreates() {
	const check = "a create's answer is what that create stored"
	for _, o := range c.w.log {
		if !isCreate(o.Kind) || o.Outcome != acked {
			continue
		}
		if o.RespToken != o.Token {
			c.laterCreateAnswers++
			c.fail(check, "%s: the answer shows value %q, not the one written", o, o.RespToken)
		}
		at, found := c.tokenAt[o.Token]
		switch {
		case found && at.rv == 1:
			if at.uid != o.UID {
				c.otherCreateAnswers++
				c.fail(check, "%s: the answer names %s, the value is version 1 of %s", o, o.UID, at.uid)
			}
			o.UID = at.uid
		case found:
			c.fail("nothing refused was written, nothing appeared that no client wrote", "%s: its value is version %d of %s", o, at.rv, at.uid)
		}
	}
}

// run runs every check and logs the summary.
func (c *checker) run() {
	c.tb.Helper()
	c.load()
	c.rows()
	c.changeLog()
	c.creates()
	c.updates()
	c.deletes()
	c.nothingUnwritten()
	c.realTimeVersions()
	c.realTimeChangeLog()
	c.locks()
	c.uses()
	for _, s := range c.checked {
		c.tb.Logf("checked: %s", s)
	}
	total := 0
	for _, n := range c.failed {
		total += n
	}
	c.tb.Logf("SUMMARY: %d operations, %d writes sent (%d acknowledged, %d refused, %d unknown) in %v; %d invariants checked, %d violations; final state: %d instances, %d versions, %d changes",
		c.w.ops, len(c.w.log), c.w.count(acked), c.w.count(refused), c.w.count(unknown), c.w.elapsed.Round(time.Millisecond),
		len(c.checked), total, len(c.insts), c.versionCount(), c.changeCount())
	c.tb.Logf("%s", c.w.summary())
	c.tb.Logf("%s", c.w.latencies())
}

func (c *checker) versionCount() int {
	n := 0
	for _, t := range c.tokens {
		n += len(t)
	}
	return n
}

func (c *checker) changeCount() int {
	n := 0
	for _, cs := range c.changes {
		n += len(cs)
	}
	return n
}

// sqlRows runs a query whose every row is a violation of check.
func (c *checker) sqlRows(check, query string) {
	c.tb.Helper()
	rows, err := c.conn.Query(c.ctx, query)
	if err != nil {
		c.tb.Fatalf("%s: %v", check, err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			c.tb.Fatalf("%s: %v", check, err)
		}
		c.fail(check, "row %v", vals)
	}
	if err := rows.Err(); err != nil {
		c.tb.Fatalf("%s: %v", check, err)
	}
}

func (c *checker) count(query string) int {
	c.tb.Helper()
	var n int
	if err := c.conn.QueryRow(c.ctx, query).Scan(&n); err != nil {
		c.tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// rows checks, in SQL, that nothing is half-written: every table row has
// the rows it belongs with.
func (c *checker) rows() {
	const (
		latest   = "every instance row has its latest resource version row"
		gapless  = "resource versions per instance are gapless 1..latest"
		values   = checkValues
		orphans  = "no version, label or attribute row without its instance"
		dangling = "no uses edge dangles"
	)
	c.sqlRows(latest, `SELECT i.id, i.latest_rv FROM instances i
WHERE NOT EXISTS (SELECT 1 FROM resource_versions v WHERE v.instance_id = i.id AND v.resource_version = i.latest_rv)`)
	c.done(latest, c.count(`SELECT count(*) FROM instances`), "instances")

	c.sqlRows(gapless, `SELECT i.id, i.latest_rv, count(v.resource_version), min(v.resource_version), max(v.resource_version)
FROM instances i LEFT JOIN resource_versions v ON v.instance_id = i.id
GROUP BY i.id, i.latest_rv
HAVING count(v.resource_version) <> i.latest_rv OR min(v.resource_version) <> 1 OR max(v.resource_version) <> i.latest_rv`)
	// The same through the store: versions 1..n in order.
	for id, toks := range c.tokens {
		if in := c.insts[id]; in.Latest.ResourceVersion != len(toks) {
			c.fail(gapless, "instance %s: latest version %d, %d versions read", id, in.Latest.ResourceVersion, len(toks))
		}
	}
	c.done(gapless, c.count(`SELECT count(*) FROM resource_versions`), "versions")

	c.sqlRows(values, `SELECT v.instance_id, v.resource_version FROM resource_versions v JOIN instances i ON i.id = v.instance_id
WHERE i.backend_abstract AND NOT EXISTS
	(SELECT 1 FROM builtin_values b WHERE b.instance_id = v.instance_id AND b.resource_version = v.resource_version)`)
	c.sqlRows(values, `SELECT b.instance_id, b.resource_version FROM builtin_values b
WHERE NOT EXISTS (SELECT 1 FROM resource_versions v WHERE v.instance_id = b.instance_id AND v.resource_version = b.resource_version)`)
	c.done(values, c.count(`SELECT count(*) FROM builtin_values`), "values")

	c.sqlRows(orphans, `SELECT 'version', v.instance_id FROM resource_versions v WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = v.instance_id)
UNION ALL SELECT 'label', l.instance_id FROM instance_labels l WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = l.instance_id)
UNION ALL SELECT 'attribute', a.instance_id FROM latest_attributes a WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = a.instance_id)`)
	c.done(orphans, c.count(`SELECT (SELECT count(*) FROM resource_versions) + (SELECT count(*) FROM instance_labels) + (SELECT count(*) FROM latest_attributes)`), "rows")

	c.sqlRows(dangling, `SELECT u.from_id, u.to_id FROM uses u
WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = u.from_id) OR NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = u.to_id)`)
	for id, in := range c.insts {
		for _, to := range in.Uses {
			if _, ok := c.insts[to]; !ok && to != in.Backend.ID {
				c.fail(dangling, "instance %s uses %s, which does not exist", id, to)
			}
		}
	}
	c.done(dangling, c.count(`SELECT count(*) FROM uses`), "edges")
}

// changeLog checks every instance's history in the log: one ADDED first,
// nothing after a DELETED, and the instance's Seq is its last change.
func (c *checker) changeLog() {
	const check = "the change log: ADDED first, DELETED last, each instance's Seq is its last change"
	for id, cs := range c.changes {
		for i, ch := range cs {
			switch {
			case i == 0 && ch.Kind != store.Added:
				c.fail(check, "instance %s: first change %d is %s", id, ch.Seq, ch.Kind)
			case i > 0 && ch.Kind == store.Added:
				c.fail(check, "instance %s: ADDED again at %d", id, ch.Seq)
			case ch.Kind == store.Deleted && i != len(cs)-1:
				c.fail(check, "instance %s: changes after its DELETED %d", id, ch.Seq)
			}
		}
		in, exists := c.insts[id]
		last := cs[len(cs)-1]
		switch {
		case exists && last.Kind == store.Deleted:
			c.fail(check, "instance %s exists but its last change %d is DELETED", id, last.Seq)
		case exists && in.Seq != last.Seq:
			c.fail(check, "instance %s has Seq %d, its last change is %d", id, in.Seq, last.Seq)
		case !exists && last.Kind != store.Deleted:
			c.fail(check, "instance %s is gone but its last change %d is %s", id, last.Seq, last.Kind)
		}
	}
	for id := range c.insts {
		if len(c.changes[id]) == 0 {
			c.fail(check, "instance %s has no change", id)
		}
	}
	c.done(check, c.changeCount(), "changes")

	// Every write is one transaction, which logs one change of the
	// instance it writes: the log has one change per acknowledged write
	// of an instance, none missing, none extra (writes without an answer
	// may or may not have one). A lock or unlock that changes nothing (a
	// relock by the owner, an unlock of an unlocked instance) writes
	// nothing, as in Capact's Local Hub: an acknowledged one may or may
	// not have a change; the lock invariants below check what they did.
	const exact = "the change log has exactly one change per acknowledged write of each instance"
	type tally struct{ acked, unknown int }
	per := map[string]*tally{}
	created := map[string]bool{}
	for _, o := range c.w.log {
		if o.UID == "" || o.Outcome == refused {
			continue
		}
		t := per[o.UID]
		if t == nil {
			t = &tally{}
			per[o.UID] = t
		}
		switch {
		case o.Outcome == acked && (o.Kind == opLock || o.Kind == opUnlock):
			t.unknown++
		case o.Outcome == acked:
			t.acked++
			if isCreate(o.Kind) {
				created[o.UID] = true
			}
		default:
			t.unknown++
		}
	}
	n := 0
	for id, cs := range c.changes {
		if !created[id] {
			continue // created by a write without an answer, or one whose instance is not known for sure
		}
		n++
		if t := per[id]; len(cs) < t.acked || len(cs) > t.acked+t.unknown {
			c.fail(exact, "instance %s: %d changes for %d acknowledged writes (and %d without an answer or lock calls)", id, len(cs), t.acked, t.unknown)
		}
	}
	c.done(exact, n, "instances")
}

// opsOn returns the recorded ops on uid, in start order.
func (c *checker) opsOn(uid string) []*op {
	var out []*op
	for _, o := range c.w.log {
		if o.UID == uid {
			out = append(out, o)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// deletedBy returns the delete ops on uid that may have deleted it
// (acknowledged or unknown).
func (c *checker) deletedBy(uid string) (ackedDelete, unknownDelete bool) {
	for _, o := range c.w.log {
		if o.Kind == opDelete && o.UID == uid {
			switch o.Outcome {
			case acked:
				ackedDelete = true
			case unknown:
				unknownDelete = true
			}
		}
	}
	return
}

func isCreate(k kind) bool { return k == opCreate || k == opCreateRoot }
func isWrite(k kind) bool  { return isCreate(k) || k == opPut || k == opPatch }

// creates: every acknowledged create is present with its value as version
// 1, unless a delete followed; the answer named the created instance.
func (c *checker) creates() {
	const check = "every acknowledged create is present (version 1 holds the value written) unless deleted"
	n := 0
	for _, o := range c.w.log {
		if !isCreate(o.Kind) || o.Outcome != acked {
			continue
		}
		if o.UID == "" {
			continue // deleted; its instance is not known for sure
		}
		n++
		if o.RespToken == o.Token && o.RespGen != 1 {
			c.fail(check, "%s: the answer shows its value as version %d", o, o.RespGen)
		}
		in, exists := c.insts[o.UID]
		ackedDel, unknownDel := c.deletedBy(o.UID)
		switch {
		case exists && (len(c.tokens[o.UID]) == 0 || c.tokens[o.UID][0] != o.Token):
			c.fail(check, "%s: version 1 of %s holds %q", o, o.UID, c.tokens[o.UID])
		case exists && in.Name != o.Name:
			c.fail(check, "%s: instance %s is named %q", o, o.UID, in.Name)
		case !exists && !ackedDel && !unknownDel:
			c.fail(check, "%s: instance %s is gone, and no client deleted it", o, o.UID)
		}
		if cs := c.changes[o.UID]; len(cs) == 0 || cs[0].Kind != store.Added {
			c.fail(check, "%s: no ADDED change for %s", o, o.UID)
		} else if o.RespUID == o.UID && cs[0].Seq > o.RespSeq {
			c.fail(check, "%s: ADDED at %d, after the answer's resourceVersion %d", o, cs[0].Seq, o.RespSeq)
		}
	}
	c.done(check, n, fmt.Sprintf("acknowledged creates (answers showing a later change: %d, another instance: %d)", c.laterCreateAnswers, c.otherCreateAnswers))
}

// updates: every acknowledged PUT and PATCH is present in exactly one
// version of its instance, unless the instance was deleted; the answer is
// the write's own: its value at that version. A PUT that took its
// resourceVersion from an earlier write's answer is the next version after
// that write: anything written in between would have been overwritten
// unseen.
func (c *checker) updates() {
	const (
		check   = "every acknowledged update is present; the acknowledged resource version holds the value written"
		chained = "a conditional update based on a write's answer succeeds only if nothing was written in between"
	)
	n, nChained := 0, 0
	for _, o := range c.w.log {
		if (o.Kind != opPut && o.Kind != opPatch) || o.Outcome != acked {
			continue
		}
		n++
		at, found := c.tokenAt[o.Token]
		_, exists := c.insts[o.UID]
		switch {
		case found && at.uid != o.UID:
			c.fail(check, "%s: written to instance %s instead", o, at.uid)
		case !found && exists:
			c.fail(check, "%s: lost: instance %s exists and no version holds the value", o, o.UID)
		case !found:
			if ackedDel, unknownDel := c.deletedBy(o.UID); !ackedDel && !unknownDel {
				c.fail(check, "%s: instance %s is gone, and no client deleted it", o, o.UID)
			}
		}
		if o.RespUID != o.UID || o.RespToken != o.Token {
			c.fail(check, "%s: answered with instance %s value %q, not the write's own", o, o.RespUID, o.RespToken)
		} else if found && at.rv != o.RespGen {
			c.fail(check, "%s: acknowledged as version %d, but the value is version %d", o, o.RespGen, at.rv)
		}
		if b := o.BasedOn; b != nil {
			bat, bfound := c.tokenAt[b.Token]
			if found && bfound {
				nChained++
				if at.rv != bat.rv+1 {
					c.fail(chained, "%s is version %d, based on the answer to %s (version %d): versions in between were overwritten unseen", o, at.rv, b, bat.rv)
				}
			}
		}
	}
	c.done(check, n, "acknowledged updates")
	c.done(chained, nChained, "acknowledged updates based on an answer")
}

// deletes: every acknowledged delete is honoured and logged.
func (c *checker) deletes() {
	const check = "every acknowledged delete is honoured (gone, DELETED logged)"
	n := 0
	for _, o := range c.w.log {
		if o.Kind != opDelete || o.Outcome != acked {
			continue
		}
		n++
		if _, exists := c.insts[o.UID]; exists {
			c.fail(check, "%s: instance still exists", o)
		}
		if cs := c.changes[o.UID]; len(cs) == 0 || cs[len(cs)-1].Kind != store.Deleted {
			c.fail(check, "%s: no DELETED change last", o)
		}
	}
	c.done(check, n, "acknowledged deletes")
}

// nothingUnwritten: every value in the database was written by a create or
// an update that was acknowledged or whose answer was lost; none by one
// that was refused; every instance was created by such a create.
func (c *checker) nothingUnwritten() {
	const check = "nothing refused was written, nothing appeared that no client wrote"
	byToken := map[string]*op{}
	for _, o := range c.w.log {
		if isWrite(o.Kind) {
			byToken[o.Token] = o
		}
	}
	inFlight := 0
	for tok, at := range c.tokenAt {
		o := byToken[tok]
		switch {
		case o == nil:
			c.fail(check, "instance %s version %d holds %q, which no client wrote", at.uid, at.rv, tok)
		case o.Outcome == refused:
			c.fail(check, "%s: refused (%s), yet instance %s version %d holds its value", o, o.Err, at.uid, at.rv)
		case o.Outcome == unknown:
			inFlight++
		case at.rv == 1 && !isCreate(o.Kind), at.rv > 1 && isCreate(o.Kind):
			c.fail(check, "%s: its value is version %d of %s", o, at.rv, at.uid)
		case isCreate(o.Kind) && o.UID != at.uid:
			c.fail(check, "%s: acknowledged as instance %s, but created %s", o, o.UID, at.uid)
		}
	}
	unknownWrites := 0
	for _, o := range c.w.log {
		if isWrite(o.Kind) && o.Outcome == unknown {
			unknownWrites++
		}
	}
	c.done(check, len(c.tokenAt), fmt.Sprintf("values; of %d writes without an answer, %d committed", unknownWrites, inFlight))
}

// realTimeVersions: on each instance, an acknowledged write that ended
// before another began has the lower version.
func (c *checker) realTimeVersions() {
	const check = "resource versions follow the real-time order of acknowledged writes"
	byUID := map[string][]*op{}
	for _, o := range c.w.log {
		if isWrite(o.Kind) && o.Outcome == acked {
			if at, ok := c.tokenAt[o.Token]; ok {
				byUID[at.uid] = append(byUID[at.uid], o)
			}
		}
	}
	pairs := 0
	for uid, ops := range byUID {
		for _, a := range ops {
			for _, b := range ops {
				if a.End.Before(b.Start) {
					pairs++
					if ra, rb := c.tokenAt[a.Token].rv, c.tokenAt[b.Token].rv; ra >= rb {
						c.fail(check, "instance %s: %s (version %d) ended before %s (version %d) began", uid, a, ra, b, rb)
					}
				}
			}
		}
	}
	c.done(check, pairs, "ordered pairs")
}

// realTimeChangeLog: an acknowledged create or delete that ended before
// another began has the lower Seq, across instances and replicas (Seqs are
// taken in commit order).
func (c *checker) realTimeChangeLog() {
	const check = "change-log order follows the real-time order of acknowledged creates and deletes"
	type ev struct {
		o   *op
		seq int64
	}
	var evs []ev
	for _, o := range c.w.log {
		if o.Outcome != acked {
			continue
		}
		cs := c.changes[o.UID]
		switch {
		case isCreate(o.Kind) && len(cs) > 0 && cs[0].Kind == store.Added:
			evs = append(evs, ev{o, cs[0].Seq})
		case o.Kind == opDelete && len(cs) > 0 && cs[len(cs)-1].Kind == store.Deleted:
			evs = append(evs, ev{o, cs[len(cs)-1].Seq})
		}
	}
	pairs := 0
	for _, a := range evs {
		for _, b := range evs {
			if a.o.End.Before(b.o.Start) {
				pairs++
				if a.seq >= b.seq {
					c.fail(check, "%s (Seq %d) ended before %s (Seq %d) began", a.o, a.seq, b.o, b.seq)
				}
			}
		}
	}
	c.done(check, pairs, "ordered pairs")
}

// interval is a time a client held a lock.
type interval struct {
	owner      string
	from, to   time.Time // to is zero: still held at the end
	lock, till *op
}

func (iv interval) contains(o *op) bool {
	return o.Start.After(iv.from) && (iv.to.IsZero() || o.End.Before(iv.to))
}

func (iv interval) overlaps(jv interval) bool {
	endI, endJ := iv.to, jv.to
	far := time.Now().Add(time.Hour)
	if endI.IsZero() {
		endI = far
	}
	if endJ.IsZero() {
		endJ = far
	}
	return iv.from.Before(endJ) && jv.from.Before(endI)
}

// locks: mutual exclusion while held, no foreign write while held, and the
// final owner matches each owner's last acknowledged lock or unlock.
func (c *checker) locks() {
	const (
		exclusive = "no instance locked by two owners at once; no other client's write acknowledged while locked"
		final     = "each instance's lock owner matches the owner's last acknowledged lock/unlock"
	)
	uids := map[string]bool{}
	for _, o := range c.w.log {
		if o.UID != "" {
			uids[o.UID] = true
		}
	}
	nIntervals, nFinal := 0, 0
	for uid := range uids {
		ops := c.opsOn(uid)
		// Held intervals: from an acknowledged lock's answer to the start of
		// the owner's next unlock, or of a delete that was not refused.
		var held []interval
		for i, o := range ops {
			if o.Kind != opLock || o.Outcome != acked {
				continue
			}
			iv := interval{owner: o.Owner, from: o.End, lock: o}
			for _, p := range ops[i+1:] {
				if p.Client == o.Client && (p.Kind == opUnlock || (p.Kind == opDelete && p.Outcome != refused)) {
					iv.to, iv.till = p.Start, p
					break
				}
			}
			held = append(held, iv)
		}
		nIntervals += len(held)
		for i, iv := range held {
			for _, jv := range held[i+1:] {
				if iv.owner != jv.owner && iv.overlaps(jv) {
					c.fail(exclusive, "instance %s: held by %s after %s and by %s after %s at once", uid, iv.owner, iv.lock, jv.owner, jv.lock)
				}
			}
			for _, o := range ops {
				if o.Outcome == acked && o.Owner != iv.owner && o.Kind != opCreate && o.Kind != opCreateRoot && iv.contains(o) {
					c.fail(exclusive, "instance %s locked by %s (since %s): %s acknowledged meanwhile", uid, iv.owner, iv.lock, o)
				}
			}
		}

		in, exists := c.insts[uid]
		if !exists {
			continue
		}
		nFinal++
		last := map[string]*op{} // owner -> last lock or unlock that was not refused
		for _, o := range ops {
			if (o.Kind == opLock || o.Kind == opUnlock) && o.Outcome != refused {
				last[o.Owner] = o
			}
		}
		for owner, o := range last {
			switch {
			case o.Kind == opLock && o.Outcome == acked && in.LockedBy != owner:
				c.fail(final, "instance %s is locked by %q, but %s was the owner's last", uid, in.LockedBy, o)
			case o.Kind == opUnlock && o.Outcome == acked && in.LockedBy == owner:
				c.fail(final, "instance %s is locked by %q, but %s was the owner's last", uid, in.LockedBy, o)
			}
		}
		if in.LockedBy != "" {
			o := last[in.LockedBy]
			if o == nil || (o.Kind == opUnlock && o.Outcome == acked) {
				c.fail(final, "instance %s is locked by %q, who has no acknowledged or unanswered lock of it last (%v)", uid, in.LockedBy, o)
			}
		}
	}
	c.done(exclusive, nIntervals, "held intervals")
	c.done(final, nFinal, "instances")
}

// uses: every root created with a uses edge to its leaf still has it.
func (c *checker) uses() {
	const check = "every acknowledged uses edge is present while its instance exists"
	n := 0
	for _, o := range c.w.log {
		if o.Kind != opCreateRoot || o.Outcome != acked {
			continue
		}
		in, exists := c.insts[o.UID]
		if !exists {
			continue
		}
		n++
		if !slices.Contains(in.Uses, o.Leaf) {
			c.fail(check, "%s: instance %s uses %v", o, o.UID, in.Uses)
		}
		if _, ok := c.insts[o.Leaf]; !ok {
			c.fail(check, "%s: its leaf %s is gone", o, o.Leaf)
		}
	}
	for id, in := range c.insts {
		if strings.HasSuffix(in.Name, "-root") && len(in.Uses) != 2 {
			c.fail(check, "root %s (%s) uses %v, want its backend and its leaf", id, in.Name, in.Uses)
		}
	}
	c.done(check, n, "edges of live roots")
}
