package rest_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/hub"
)

// rv is an event's or object's resourceVersion as a number.
func rv(t *testing.T, o obj) int64 {
	t.Helper()
	n, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %s: %v", o.Metadata.ResourceVersion, o.Metadata.Name, err)
	}
	return n
}

func TestWatch(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "before", nil, `{"key":"before"}`)
	list := decodeObj(t, e.mustDo("GET", flagsIn("default"), "", nil, http.StatusOK))

	// From the list's resourceVersion: only what happens after it, one
	// event per write, each carrying the object's resourceVersion.
	// Each write waits for its event, so the watcher never lags behind.
	w := e.watch(flagsIn("default") + "?resourceVersion=" + list.Metadata.ResourceVersion)
	var evs []event
	created := e.createFlag("default", "x", nil, `{"key":"x"}`)
	evs = append(evs, w.expect("ADDED x")...)
	replaced := decodeObj(t, e.mustDo("PUT", flagPath("default", "x"), "application/json",
		flag("x", map[string]string{"l": "1"}, `{"key":"x","port":2}`), http.StatusOK))
	evs = append(evs, w.expect("MODIFIED x")...)
	patched := decodeObj(t, e.mustDo("PATCH", flagPath("default", "x"), "application/merge-patch+json", `{"spec":{"port":3}}`, http.StatusOK))
	evs = append(evs, w.expect("MODIFIED x")...)
	e.mustDo("DELETE", flagPath("default", "x"), "", nil, http.StatusOK)
	evs = append(evs, w.expect("DELETED x")...)
	e.createFlag("other", "elsewhere", nil, `{"key":"o"}`) // another namespace: not seen
	sentinel := e.createFlag("default", "sentinel", nil, `{"key":"s"}`)
	evs = append(evs, w.expect("ADDED sentinel")...)
	for i, want := range []obj{created, replaced, patched} {
		if evs[i].obj.Metadata.ResourceVersion != want.Metadata.ResourceVersion {
			t.Errorf("event %d (%s) resourceVersion %s, the write returned %s", i, evs[i].Type, evs[i].obj.Metadata.ResourceVersion, want.Metadata.ResourceVersion)
		}
	}
	if evs[1].obj.Spec["port"] != float64(2) || evs[2].obj.Spec["port"] != float64(3) || evs[1].obj.Metadata.Labels["l"] != "1" {
		t.Errorf("MODIFIED events show %v and %v", evs[1].obj.Spec, evs[2].obj.Spec)
	}
	del := evs[3].obj
	if del.Metadata.UID != created.Metadata.UID || del.Metadata.Namespace != "default" || rv(t, del) <= rv(t, patched) || rv(t, del) >= rv(t, sentinel) {
		t.Errorf("DELETED object = %s (patched at %s, sentinel at %s)", evs[3].Object, patched.Metadata.ResourceVersion, sentinel.Metadata.ResourceVersion)
	}
	if evs[4].obj.Metadata.ResourceVersion != sentinel.Metadata.ResourceVersion || evs[0].obj.APIVersion != "flipt.io/v1alpha1" || evs[0].obj.Kind != "Flag" {
		t.Errorf("events = %s / %s", evs[0].Object, evs[4].Object)
	}
	for i := 1; i < len(evs); i++ {
		if rv(t, evs[i].obj) <= rv(t, evs[i-1].obj) {
			t.Errorf("resourceVersions not increasing: %s then %s", evs[i-1].obj.Metadata.ResourceVersion, evs[i].obj.Metadata.ResourceVersion)
		}
	}

	t.Run("resume from a resourceVersion replays what followed", func(t *testing.T) {
		e := e.with(t)
		// Events show objects as they are now, so the changes of x before
		// its deletion are not replayed: x is gone.
		w := e.watch(flagsIn("default") + "?resourceVersion=" + created.Metadata.ResourceVersion)
		w.expect("DELETED x", "ADDED sentinel")
		e.createFlag("default", "later", nil, `{"key":"l"}`)
		w.expect("ADDED later")

		e.mustDo("PATCH", flagPath("default", "sentinel"), "application/merge-patch+json", `{"spec":{"port":9}}`, http.StatusOK)
		w = e.watch(flagsIn("default") + "?resourceVersion=" + sentinel.Metadata.ResourceVersion)
		ev := w.expect("ADDED later", "MODIFIED sentinel")[1]
		if ev.obj.Spec["port"] != float64(9) {
			t.Errorf("replayed MODIFIED = %s", ev.Object)
		}
	})
	t.Run("without a resourceVersion the current objects come first as ADDED", func(t *testing.T) {
		e := e.with(t)
		w := e.watch(flagsIn("default"))
		got := map[string]bool{}
		for range 3 {
			ev := w.next()
			if ev.Type != "ADDED" {
				t.Fatalf("initial event %s %s, want ADDED", ev.Type, ev.obj.Metadata.Name)
			}
			got[ev.obj.Metadata.Name] = true
		}
		if !got["before"] || !got["sentinel"] || !got["later"] {
			t.Errorf("initial events for %v, want before, sentinel, later", got)
		}
		e.mustDo("DELETE", flagPath("default", "later"), "", nil, http.StatusOK)
		w.expect("DELETED later")
	})
	t.Run("all namespaces", func(t *testing.T) {
		e := e.with(t)
		w := e.watch(flagsGV + "/flags?resourceVersion=" + sentinel.Metadata.ResourceVersion)
		e.createFlag("third", "t", nil, `{"key":"t"}`)
		// "later" was deleted before this watch read its creation.
		ev := w.expect("MODIFIED sentinel", "DELETED later", "ADDED t")[2]
		if ev.obj.Metadata.Namespace != "third" {
			t.Errorf("namespace %q", ev.obj.Metadata.Namespace)
		}
	})
	t.Run("field selector on the name", func(t *testing.T) {
		e := e.with(t)
		// Resumed before "later" was deleted: that DELETED does not match.
		w := e.watch(flagsIn("default") + "?fieldSelector=metadata.name%3Dpicked&resourceVersion=" + sentinel.Metadata.ResourceVersion)
		e.createFlag("default", "ignored", nil, `{"key":"i"}`)
		e.mustDo("DELETE", flagPath("default", "ignored"), "", nil, http.StatusOK)
		e.createFlag("default", "picked", nil, `{"key":"p"}`)
		w.expect("ADDED picked")
		w = e.watch(flagsIn("default") + "?fieldSelector=metadata.name!%3Dpicked&resourceVersion=" + sentinel.Metadata.ResourceVersion)
		w.expect("MODIFIED sentinel", "DELETED later", "DELETED ignored")
		// Every != term holds, and metadata.namespace takes one too.
		w = e.watch(flagsGV + "/flags?fieldSelector=metadata.name!%3Dpicked,metadata.name!%3Dignored,metadata.namespace!%3Dthird&resourceVersion=" +
			sentinel.Metadata.ResourceVersion)
		w.expect("MODIFIED sentinel", "DELETED later")
	})
	t.Run("timeoutSeconds ends the stream", func(t *testing.T) {
		e := e.with(t)
		w := e.watch(flagsIn("default") + "?timeoutSeconds=1&resourceVersion=" + sentinel.Metadata.ResourceVersion)
		for {
			ev, ok := <-w.events // bounded by the server's timeout
			if !ok {
				break
			}
			if ev.Type == "ERROR" {
				t.Errorf("ERROR event: %s", ev.Object)
			}
		}
	})
}

// TestWatchReplay resumes a watch from before several writes, so the
// server reads the change log behind the writers: every event still
// carries its object's resourceVersion, in increasing order, once.
func TestWatchReplay(t *testing.T) {
	e := newFlagsEnv(t)
	start := decodeObj(t, e.get(flagsIn("default"))).Metadata.ResourceVersion
	e.createFlag("default", "y", nil, `{"key":"y"}`)
	e.createFlag("default", "z", nil, `{"key":"z"}`)
	y := decodeObj(t, e.mustDo("PATCH", flagPath("default", "y"), "application/merge-patch+json", `{"spec":{"port":1}}`, http.StatusOK))
	z := decodeObj(t, e.mustDo("PUT", flagPath("default", "z"), "application/json", flag("z", map[string]string{"a": "b"}, `{"key":"z","port":2}`), http.StatusOK))
	e.createFlag("default", "gone", nil, `{"key":"g"}`)
	e.mustDo("DELETE", flagPath("default", "gone"), "", nil, http.StatusOK)
	last := e.createFlag("default", "last", nil, `{"key":"l"}`)

	w := e.watch(flagsIn("default") + "?resourceVersion=" + start)
	var evs []event
	for {
		ev := w.next()
		evs = append(evs, ev)
		if ev.obj.Metadata.Name == "last" {
			break
		}
	}
	var got []string
	for i, ev := range evs {
		got = append(got, ev.Type+" "+ev.obj.Metadata.Name+"@"+ev.obj.Metadata.ResourceVersion)
		if i > 0 && rv(t, ev.obj) <= rv(t, evs[i-1].obj) {
			t.Errorf("event %d: resourceVersion %s after %s", i, ev.obj.Metadata.ResourceVersion, evs[i-1].obj.Metadata.ResourceVersion)
		}
	}
	// y and z were changed again before the watch read their creation: each
	// is reported once, ADDED in its latest state; "gone" was deleted.
	want := []string{"ADDED y@" + y.Metadata.ResourceVersion, "ADDED z@" + z.Metadata.ResourceVersion, "DELETED gone@", "ADDED last@" + last.Metadata.ResourceVersion}
	if len(got) != len(want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestWatchLabelSelector(t *testing.T) {
	e := newFlagsEnv(t)
	in := e.createFlag("default", "in", map[string]string{"team": "a"}, `{"key":"in"}`)
	e.createFlag("default", "out", map[string]string{"team": "b"}, `{"key":"out"}`)
	e.createFlag("default", "other", map[string]string{"team": "b"}, `{"key":"other"}`)
	w := e.watch(flagsIn("default") + "?labelSelector=team%3Da")
	w.expect("ADDED in")

	relabel := func(name, team string) obj {
		t.Helper()
		return decodeObj(t, e.mustDo("PATCH", flagPath("default", name), "application/merge-patch+json",
			fmt.Sprintf(`{"metadata":{"labels":{"team":%q}}}`, team), http.StatusOK))
	}
	e.mustDo("PATCH", flagPath("default", "in"), "application/merge-patch+json", `{"spec":{"port":1}}`, http.StatusOK)
	w.expect("MODIFIED in")
	gone := relabel("in", "b") // stops matching
	ev := w.expect("DELETED in")[0]
	if ev.obj.Metadata.UID != in.Metadata.UID || ev.obj.Metadata.ResourceVersion != gone.Metadata.ResourceVersion {
		t.Errorf("DELETED for a relabel = %s, want resourceVersion %s", ev.Object, gone.Metadata.ResourceVersion)
	}
	relabel("other", "c")                                                                                              // never matched: nothing
	e.mustDo("PATCH", flagPath("default", "in"), "application/merge-patch+json", `{"spec":{"port":2}}`, http.StatusOK) // still not matching
	relabel("out", "a")                                                                                                // starts matching
	w.expect("ADDED out")
	e.mustDo("DELETE", flagPath("default", "in"), "", nil, http.StatusOK) // deleted while not matching: nothing
	e.mustDo("DELETE", flagPath("default", "out"), "", nil, http.StatusOK)
	w.expect("DELETED out")
	e.createFlag("default", "new", map[string]string{"team": "a"}, `{"key":"new"}`)
	w.expect("ADDED new")
}

func TestWatchGone(t *testing.T) {
	e := newFlagsEnv(t)
	first := e.createFlag("default", "a", nil, `{"key":"a"}`)
	for i := range 5 {
		e.mustDo("PATCH", flagPath("default", "a"), "application/merge-patch+json", fmt.Sprintf(`{"spec":{"port":%d}}`, i+1), http.StatusOK)
	}
	if err := e.h.PruneChanges(e.ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{flagsIn("default"), flagsGV + "/flags", hubGV + "/typeinstances"} {
		t.Run(path, func(t *testing.T) {
			e := e.with(t)
			r := e.get(path + "?watch=true&resourceVersion=" + first.Metadata.ResourceVersion)
			wantStatus(t, r, http.StatusGone, "Expired", "too old resource version: "+first.Metadata.ResourceVersion)
		})
	}
	t.Run("a recent resourceVersion still works", func(t *testing.T) {
		e := e.with(t)
		cur := decodeObj(t, e.get(flagPath("default", "a")))
		w := e.watch(flagsIn("default") + "?resourceVersion=" + cur.Metadata.ResourceVersion)
		e.mustDo("DELETE", flagPath("default", "a"), "", nil, http.StatusOK)
		w.expect("DELETED a")
	})
	t.Run("bad watch parameters", func(t *testing.T) {
		e := e.with(t)
		wantStatus(t, e.get(flagsIn("default")+"?watch=true&resourceVersion=abc"), 400, "BadRequest", "abc")
		wantStatus(t, e.get(flagsIn("default")+"?watch=true&timeoutSeconds=-1"), 400, "BadRequest", "timeoutSeconds")
		wantStatus(t, e.get(flagsIn("default")+"?watch=true&labelSelector=a%20in%20b"), 400, "BadRequest")
		// Streamed initial events (watch-list) are not served; client-go
		// falls back to list and watch on this refusal (TestClientGoInformer).
		st := wantStatus(t, e.get(flagsIn("default")+"?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
			422, "Invalid", "sendInitialEvents")
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "sendInitialEvents" {
			t.Errorf("details = %+v", st.Details)
		}
	})
}

func TestWatchTypeInstances(t *testing.T) {
	e := newFlagsEnv(t)
	start := decodeObj(t, e.get(hubGV+"/typeinstances"))
	w := e.watch(hubGV + "/typeinstances?resourceVersion=" + start.Metadata.ResourceVersion)
	a := e.createFlag("default", "a", nil, `{"key":"a"}`)
	// Typeinstances are named by id, across Types and namespaces.
	evs := w.expect("ADDED " + a.Metadata.UID)
	e.mustDo("DELETE", flagPath("default", "a"), "", nil, http.StatusOK)
	evs = append(evs, w.expect("DELETED "+a.Metadata.UID)...)
	if evs[0].obj.Kind != "TypeInstance" || evs[0].obj.APIVersion != "hub.cairn.dev/v1" || evs[0].obj.Spec["name"] != "a" {
		t.Errorf("ADDED = %s", evs[0].Object)
	}
	if evs[1].obj.Metadata.Namespace != "" {
		t.Errorf("DELETED typeinstance has namespace %q; typeinstances are cluster-scoped", evs[1].obj.Metadata.Namespace)
	}
}

// TestWatchersShareEvents: the watches of one collection share each
// event's encoding, but never across what a watch may see: watches that
// redact secrets and a watch asking for values in the clear (values=true)
// each get their own, in either order of arrival, and every event shows
// the update it reports.
func TestWatchersShareEvents(t *testing.T) {
	e := newRestEnv(t)
	const tokensRD = `{"apiVersion": "cup.flipt.io/v1alpha1", "kind": "ResourceDefinition",
 "metadata": {"name": "tokens.example.cairn.dev"},
 "names": {"kind": "Token", "singular": "token", "plural": "tokens"},
 "spec": {"group": "example.cairn.dev", "versions": {
   "v1": {"type": "object", "properties": {"user": {"type": "string"}, "token": {"type": "string", "x-cairn-secret": true}}}}}}`
	e.mustDo("POST", hubGV+"/types", "application/json", tokensRD, http.StatusCreated)
	const path = "/apis/example.cairn.dev/v1/namespaces/default/tokens"
	created := decodeObj(t, e.mustDo("POST", path, "application/json",
		`{"apiVersion":"example.cairn.dev/v1","kind":"Token","metadata":{"name":"t"},"spec":{"user":"u0","token":"secret-0"}}`, http.StatusCreated))
	from := "resourceVersion=" + created.Metadata.ResourceVersion
	redacted := []*watcher{e.watch(path + "?" + from), e.watch(path + "?" + from)}
	clear := []*watcher{e.watch(path + "?values=true&" + from), e.watch(path + "?values=true&" + from)}
	for i := 1; i <= 3; i++ {
		patched := decodeObj(t, e.mustDo("PATCH", path+"/t", "application/merge-patch+json",
			fmt.Sprintf(`{"spec":{"user":"u%d","token":"secret-%d"}}`, i, i), http.StatusOK))
		// Alternate which kind of watch reads the event first.
		order := append(slices.Clone(redacted), clear...)
		if i%2 == 0 {
			order = append(slices.Clone(clear), redacted...)
		}
		for _, w := range order {
			ev := w.expect("MODIFIED t")[0]
			wantToken := hub.SecretMarker
			if slices.Contains(clear, w) {
				wantToken = fmt.Sprintf("secret-%d", i)
			}
			if ev.obj.Spec["user"] != fmt.Sprintf("u%d", i) || ev.obj.Spec["token"] != wantToken ||
				ev.obj.Metadata.ResourceVersion != patched.Metadata.ResourceVersion {
				t.Errorf("update %d: event %s, want user u%d, token %q, resourceVersion %s", i, ev.Object, i, wantToken, patched.Metadata.ResourceVersion)
			}
		}
	}
}

// TestWatchLabelSelectorResumed: kubectl get -w and client-go's informers
// list with a selector, then watch from the list's resourceVersion. An
// object that stops matching must be reported DELETED (or the informer
// keeps it forever), one that starts matching ADDED, one that never
// matched not at all, also when the change came between list and watch.
func TestWatchLabelSelectorResumed(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "in", map[string]string{"team": "a"}, `{"key":"in"}`)
	e.createFlag("default", "early", map[string]string{"team": "a"}, `{"key":"early"}`)
	e.createFlag("default", "out", map[string]string{"team": "b"}, `{"key":"out"}`)
	e.createFlag("default", "other", map[string]string{"team": "b"}, `{"key":"other"}`)
	const sel = "?labelSelector=team%3Da"
	list := decodeObj(t, e.get(flagsIn("default")+sel))
	if got := names(list); strings.Join(got, ",") != "early,in" {
		t.Fatalf("list = %v", got)
	}
	relabel := func(name, team string) {
		t.Helper()
		e.mustDo("PATCH", flagPath("default", name), "application/merge-patch+json", fmt.Sprintf(`{"metadata":{"labels":{"team":%q}}}`, team), http.StatusOK)
	}
	relabel("early", "b") // between the list and the watch: stops matching
	w := e.watch(flagsIn("default") + sel + "&resourceVersion=" + list.Metadata.ResourceVersion)
	w.expect("DELETED early")
	relabel("in", "b") // stops matching
	w.expect("DELETED in")
	relabel("other", "c") // never matched: nothing
	relabel("out", "a")   // starts matching
	// The watch has read other's change by the time it sends out's (it
	// reads changes in order). A delete that came before the watch read
	// the object's last change is reported DELETED, as it may have matched
	// (a harmless event to a cache), so other is deleted only now.
	w.expect("ADDED out")
	e.mustDo("DELETE", flagPath("default", "other"), "", nil, http.StatusOK)
	e.mustDo("PATCH", flagPath("default", "out"), "application/merge-patch+json", `{"spec":{"port":1}}`, http.StatusOK)
	w.expect("MODIFIED out")
}

// TestWatchNotServed: a kind that takes no watch refuses ?watch=true as
// the API server refuses it (405), rather than answering with a list that
// kubectl get -w cannot decode as an event ("no kind \"Table\" is
// registered").
func TestWatchNotServed(t *testing.T) {
	e := newRestEnv(t)
	for _, c := range []struct{ path, kind string }{
		{"/api/v1/namespaces", "namespaces"},
		{hubGV + "/types", "types.hub.cairn.dev"},
		{hubGV + "/backends", "backends.hub.cairn.dev"},
		{hubGV + "/stacks", "stacks.hub.cairn.dev"},
		{hubGV + "/proposals", "proposals.hub.cairn.dev"},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", "clusterroles.rbac.authorization.k8s.io"},
	} {
		wantStatus(t, e.do("GET", c.path+"?watch=true", "", nil), http.StatusMethodNotAllowed, "MethodNotAllowed",
			`watch is not supported on resources of kind "`+c.kind+`"`)
	}
}
