package soak

import (
	"fmt"
	"slices"
	"sort"
)

// ack is a write the server acknowledged: after it, instance id is at
// Seq (its REST resourceVersion) or, for a delete, gone.
type ack struct {
	id      string
	seq     int64 // 0 for a delete, whose Seq the API does not return
	deleted bool
}

// event is what a watcher saw: one watch event; or, after 410 Gone, a
// relist: "RELIST" at the list's resourceVersion, one "LIST" per item and
// one "LIST-DELETED" per known object the list no longer has.
type event struct {
	kind string
	id   string
	seq  int64
}

// final is an instance as the end of the run finds it; gone when it does
// not exist.
type final struct {
	seq  int64
	n    int // the counter in its value
	rvs  int // the number of resource versions
	gone bool
	// backend is the id of the backend holding its value.
	backend string
}

// expect is what the writers know of an instance at the end: the counter
// of the last acknowledged value and the number of acknowledged writes
// that made a resource version since it was last created.
type expect struct {
	n       int
	rvs     int
	deleted bool
}

// checkWatch checks one watcher's stream against the acknowledged writes
// and the final state: Seqs only grow (per stream; a relist may repeat the
// Seq it lists at), every acknowledged write is covered by an event at or
// after its Seq, and the last event of each instance shows its final state.
// It returns one message per violation, at most limit.
func checkWatch(name string, events []event, acks []ack, finals map[string]final, limit int) []string {
	var out []string
	add := func(format string, a ...any) {
		if len(out) < limit {
			out = append(out, name+": "+fmt.Sprintf(format, a...))
		}
	}
	var prev int64
	last := map[string]event{}
	seqs := map[string][]int64{} // per id, the Seqs of its non-deletion events, ascending
	for i, e := range events {
		p, known := last[e.id]
		switch e.kind {
		case "RELIST": // a relist at e.seq: watching goes on from there
			prev = e.seq
			continue
		case "LIST", "LIST-DELETED":
			if known && e.seq < p.seq {
				add("instance %s: listed at %d after an event at %d", e.id, e.seq, p.seq)
			}
		default:
			if e.seq <= prev {
				add("event %d (%s %s at %d) does not come after %d", i, e.kind, e.id, e.seq, prev)
			}
			prev = max(prev, e.seq)
			if known && e.seq <= p.seq {
				add("instance %s: event at %d after one at %d", e.id, e.seq, p.seq)
			}
		}
		last[e.id] = e
		if e.kind != "DELETED" && e.kind != "LIST-DELETED" {
			if s := seqs[e.id]; len(s) == 0 || s[len(s)-1] < e.seq {
				seqs[e.id] = append(s, e.seq)
			}
		}
	}
	for _, a := range acks {
		if a.deleted {
			continue
		}
		s := seqs[a.id]
		i := sort.Search(len(s), func(i int) bool { return s[i] >= a.seq })
		if i == len(s) && !seenDeletedAfter(last, a) {
			add("missed the write of %s at %d (saw %v)", a.id, a.seq, s)
		}
	}
	ids := make([]string, 0, len(finals))
	for id := range finals {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		f := finals[id]
		e, seen := last[id]
		gone := e.kind == "DELETED" || e.kind == "LIST-DELETED"
		switch {
		case f.gone && seen && !gone:
			add("instance %s is gone, but the last event was %s at %d", id, e.kind, e.seq)
		case !f.gone && !seen:
			add("instance %s (at %d) never appeared", id, f.seq)
		case !f.gone && (gone || e.seq != f.seq):
			add("instance %s is at %d, but the last event was %s at %d", id, f.seq, e.kind, e.seq)
		}
	}
	return out
}

// seenDeletedAfter reports whether the last event of the acknowledged
// write's instance is a deletion after it: the watch may skip a version
// that a delete overtook.
func seenDeletedAfter(last map[string]event, a ack) bool {
	e, ok := last[a.id]
	return ok && (e.kind == "DELETED" || e.kind == "LIST-DELETED") && e.seq > a.seq
}

// checkFinal compares what the writers were acknowledged with what the
// server holds at the end: no lost or extra write, no version gap.
func checkFinal(expects map[string]expect, finals map[string]final, limit int) []string {
	var out []string
	ids := make([]string, 0, len(expects))
	for id := range expects {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if len(out) >= limit {
			break
		}
		x, f := expects[id], finals[id]
		switch {
		case x.deleted && !f.gone:
			out = append(out, fmt.Sprintf("instance %s was deleted (acknowledged) but exists at %d", id, f.seq))
		case !x.deleted && f.gone:
			out = append(out, fmt.Sprintf("instance %s: lost: acknowledged with n=%d, now gone", id, x.n))
		case !x.deleted && f.n != x.n:
			out = append(out, fmt.Sprintf("instance %s: lost write: acknowledged n=%d, holds n=%d", id, x.n, f.n))
		case !x.deleted && f.rvs != x.rvs:
			out = append(out, fmt.Sprintf("instance %s: %d resource versions, %d acknowledged writes", id, f.rvs, x.rvs))
		}
	}
	return out
}
