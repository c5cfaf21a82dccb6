package rest_test

import (
	"context"
	"encoding/json"
	"github.com/cairn-dev/cairn"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store/sqlite"
)

// guessEnv is a server whose hub has a read cache, and another hub on the
// same SQLite file ("another replica") whose writes that cache learns of
// only on a consistent read: every PATCH through the server after such a
// write starts from an outdated guess.
type guessEnv struct {
	*restEnv
	other *hub.Hub
}

func newGuessEnv(t *testing.T) *guessEnv {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cairn.db")
	open := func(cfg hub.Config) *hub.Hub {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg.Store = st
		h, err := hub.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := open(hub.Config{})
	srv := httptest.NewServer(rest.New(rest.Config{Hub: h}))
	t.Cleanup(srv.Close)
	e := &guessEnv{restEnv: &restEnv{t: t, ctx: ctx, h: h, url: srv.URL, client: srv.Client()}, other: open(hub.Config{NoReadCache: true})}
	e.mustDo("POST", hubGV+"/types", "application/json", flagsRD, http.StatusCreated)
	return e
}

// otherWrite sets the flag's spec through the other replica and checks
// that the server's guess is now outdated; it returns the new
// resourceVersion and the outdated one.
func (e *guessEnv) otherWrite(name, spec string) (now, guessed string) {
	e.t.Helper()
	inst, err := e.h.GetInstanceByName(e.ctx, flagType.Path, "default", name, true) // the cache catches up
	if err != nil {
		e.t.Fatal(err)
	}
	out, err := e.other.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, Value: json.RawMessage(spec)}})
	if err != nil {
		e.t.Fatal(err)
	}
	g, ok := e.h.GuessInstanceByName(flagType.Path, "default", name)
	if !ok || g.Seq != inst.Seq || g.Seq == out[0].Seq {
		e.t.Fatalf("guess of %s: %v at %d; want the outdated %d (the other replica wrote %d)", name, ok, g.Seq, inst.Seq, out[0].Seq)
	}
	return strconv.FormatInt(out[0].Seq, 10), strconv.FormatInt(g.Seq, 10)
}

func (e *guessEnv) spec(r response) string {
	e.t.Helper()
	o := decodeObj(e.t, r)
	b, err := json.Marshal(o.Spec)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// TestPatchFromOutdatedGuess: a PATCH that starts from the read cache's
// object, outdated by another replica's write, ends as if it had read the
// object consistently: the other write is kept (no lost update), a
// resourceVersion precondition is judged on the object as it is, and a
// JSON patch that does not apply to the outdated object applies to the
// current one.
func TestPatchFromOutdatedGuess(t *testing.T) {
	e := newGuessEnv(t)
	e.createFlag("default", "f1", nil, `{"enabled":true,"key":"one"}`)
	const merge = "application/merge-patch+json"
	p := flagPath("default", "f1")

	e.otherWrite("f1", `{"enabled":false,"key":"one"}`)
	r := e.mustDo("PATCH", p, merge, `{"spec":{"key":"two"}}`, http.StatusOK)
	if got := e.spec(r); got != `{"enabled":false,"key":"two"}` {
		t.Fatalf("spec after a patch from an outdated guess = %s, want the other replica's enabled=false kept", got)
	}

	// A precondition on the version the guess has, outdated: 409, as a
	// consistent read gives.
	_, old := e.otherWrite("f1", `{"enabled":true,"key":"three"}`)
	r = e.do("PATCH", p, merge, `{"metadata":{"resourceVersion":"`+old+`"},"spec":{"key":"four"}}`)
	wantStatus(t, r, http.StatusConflict, "Conflict", "the object has been modified")

	// A precondition on the current version, which the guess is behind:
	// the patch applies to the current object.
	now, _ := e.otherWrite("f1", `{"enabled":false,"key":"five"}`)
	r = e.mustDo("PATCH", p, merge, `{"metadata":{"resourceVersion":"`+now+`"},"spec":{"key":"six"}}`, http.StatusOK)
	if got := e.spec(r); got != `{"enabled":false,"key":"six"}` {
		t.Fatalf("spec after a patch with the current resourceVersion = %s, want the other replica's enabled=false kept", got)
	}

	// A JSON patch whose test holds for the current object only.
	e.otherWrite("f1", `{"enabled":true,"key":"seven"}`)
	r = e.mustDo("PATCH", p, "application/json-patch+json",
		`[{"op":"test","path":"/spec/key","value":"seven"},{"op":"replace","path":"/spec/enabled","value":false}]`, http.StatusOK)
	if got := e.spec(r); got != `{"enabled":false,"key":"seven"}` {
		t.Fatalf("spec after a JSON patch = %s", got)
	}

	// A patch that changes nothing on the outdated object changes the
	// current one.
	e.otherWrite("f1", `{"enabled":true,"key":"eight"}`)
	r = e.mustDo("PATCH", p, merge, `{"spec":{"enabled":false}}`, http.StatusOK)
	if got := e.spec(r); got != `{"enabled":false,"key":"eight"}` {
		t.Fatalf("spec after a patch that is a no-op on the guess = %s, want enabled=false written", got)
	}

	// A dry run is answered from a consistent read and stores nothing.
	now, _ = e.otherWrite("f1", `{"enabled":true,"key":"nine"}`)
	r = e.mustDo("PATCH", p+"?dryRun=All", merge, `{"spec":{"key":"ten"}}`, http.StatusOK)
	if got := e.spec(r); got != `{"enabled":true,"key":"ten"}` {
		t.Fatalf("spec of a dry-run patch = %s", got)
	}
	if o := decodeObj(t, e.get(p)); o.Metadata.ResourceVersion != now {
		t.Fatalf("resourceVersion after a dry run = %s, want %s", o.Metadata.ResourceVersion, now)
	}

	// An object the cache does not hold yet (created through the other
	// replica) is read consistently.
	if _, err := e.other.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "f2", TypeRef: flagType,
		Namespace: "default", Name: "f2", Value: json.RawMessage(`{"key":"f2","enabled":true}`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.h.GuessInstanceByName(flagType.Path, "default", "f2"); ok {
		t.Fatal("a guess of an object the cache has not seen")
	}
	r = e.mustDo("PATCH", flagPath("default", "f2"), merge, `{"spec":{"enabled":false}}`, http.StatusOK)
	if got := e.spec(r); got != `{"enabled":false,"key":"f2"}` {
		t.Fatalf("spec of f2 = %s", got)
	}
}

// TestPatchGuessSeesOwnWrites: patches through one server one after
// another each start from the object the previous one wrote (the cache is
// handed the server's own commits), and a relation this process committed
// is in the answer at once.
func TestPatchGuessSeesOwnWrites(t *testing.T) {
	e := newGuessEnv(t)
	f := e.createFlag("default", "f1", nil, `{"key":"f1","port":1}`)
	p := flagPath("default", "f1")
	for i := 1; i <= 3; i++ {
		r := e.mustDo("PATCH", p, "application/merge-patch+json", `{"spec":{"port":`+strconv.Itoa(i+1)+`}}`, http.StatusOK)
		g, ok := e.h.GuessInstanceByName(flagType.Path, "default", "f1")
		if o := decodeObj(t, r); !ok || strconv.FormatInt(g.Seq, 10) != o.Metadata.ResourceVersion || string(g.Latest.Value) != `{"key":"f1","port":`+strconv.Itoa(i+1)+`}` {
			t.Fatalf("after patch %d the guess is %v at %d (%s); want the patch's resourceVersion %s", i, ok, g.Seq, g.Latest.Value, o.Metadata.ResourceVersion)
		}
	}
	// A user of f1 created through this server: the next patch's answer
	// lists it, as a consistent read would.
	user, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "u", TypeRef: flagType,
		Namespace: "default", Name: "u", Value: json.RawMessage(`{"key":"u"}`)}},
		UsesRelations: []hub.UsesRelation{{From: "u", To: f.Metadata.UID}}})
	if err != nil {
		t.Fatal(err)
	}
	r := e.mustDo("PATCH", p, "application/merge-patch+json", `{"spec":{"port":9}}`, http.StatusOK)
	var o struct {
		Status struct {
			UsedBy []string `json:"usedBy"`
		} `json:"status"`
	}
	if err := json.Unmarshal(r.body, &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Status.UsedBy) != 1 || o.Status.UsedBy[0] != user[0].ID {
		t.Fatalf("usedBy in the answer = %v, want [%s]", o.Status.UsedBy, user[0].ID)
	}
}

// TestConcurrentPatchesOfOneObject: concurrent merge patches of one object,
// each adding its own label, all land: a patch that starts from an
// outdated guess (another patch's or the other replica's write committed
// meanwhile) overwrites none of them.
func TestConcurrentPatchesOfOneObject(t *testing.T) {
	e := newGuessEnv(t)
	e.createFlag("default", "f1", nil, `{"key":"f1"}`)
	p := flagPath("default", "f1")
	const clients, each = 6, 4
	errs := make(chan string, clients*each)
	for c := range clients {
		go func() {
			for i := range each {
				// Every other patch goes through the other replica, whose
				// writes the server's guesses do not see.
				var msg string
				if i%2 == 1 && c%2 == 1 {
					msg = e.otherLabel("f1", "c"+strconv.Itoa(c)+"-"+strconv.Itoa(i))
				} else {
					r := e.do("PATCH", p, "application/merge-patch+json", `{"metadata":{"labels":{"c`+strconv.Itoa(c)+`-`+strconv.Itoa(i)+`":"x"}}}`)
					if r.code != http.StatusOK {
						msg = r.String()
					}
				}
				errs <- msg
			}
		}()
	}
	for range clients * each {
		if msg := <-errs; msg != "" {
			t.Fatal(msg)
		}
	}
	o := decodeObj(t, e.get(p))
	if len(o.Metadata.Labels) != clients*each {
		t.Fatalf("%d labels after %d concurrent patches each adding one: %v", len(o.Metadata.Labels), clients*each, o.Metadata.Labels)
	}
}

// otherLabel adds a label through the other replica, retrying on a
// conflict as a client does; it returns what went wrong, "" for nothing.
func (e *guessEnv) otherLabel(name, label string) string {
	for range 100 {
		inst, err := e.other.GetInstanceByName(e.ctx, flagType.Path, "default", name, false)
		if err != nil {
			return err.Error()
		}
		labels := map[string]string{label: "x"}
		for k, v := range inst.Labels {
			labels[k] = v
		}
		_, err = e.other.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: inst.ID, IfSeq: inst.Seq, Labels: labels}})
		if err == nil {
			return ""
		}
		if !cairn.HasCode(err, cairn.CodeConflict) {
			return err.Error()
		}
	}
	return "the other replica gave up after 100 conflicts"
}
