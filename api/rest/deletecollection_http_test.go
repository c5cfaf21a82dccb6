package rest_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// TestDeleteCollection: DELETE on a collection (client-go's
// DeleteCollection) deletes what the selectors match, all or none, and
// answers the list of what it deleted, as the API server does.
func TestDeleteCollection(t *testing.T) {
	e := newFlagsEnv(t)
	e.mustDo("POST", hubGV+"/types", "application/yaml", pgType, http.StatusCreated)
	for _, n := range []string{"a1", "a2", "a3"} {
		e.createFlag("team-a", n, map[string]string{"team": "a"}, `{"key":"k"}`)
	}
	e.createFlag("team-a", "b1", map[string]string{"team": "b"}, `{"key":"k"}`)
	e.createFlag("team-b", "a9", map[string]string{"team": "a"}, `{"key":"k"}`)
	left := func(ns string) []string {
		t.Helper()
		return names(decodeObj(t, e.mustDo("GET", flagsIn(ns), "", nil, 200)))
	}

	t.Run("dry run deletes nothing and says what would go", func(t *testing.T) {
		e := e.with(t)
		l := decodeObj(t, e.mustDo("DELETE", flagsIn("team-a")+"?labelSelector=team%3Da&dryRun=All", "", nil, 200))
		if l.Kind != "FlagList" || !slices.Equal(names(l), []string{"a1", "a2", "a3"}) {
			t.Errorf("answer = %s", l.Raw)
		}
		if got := left("team-a"); len(got) != 4 {
			t.Errorf("left after a dry run: %v", got)
		}
	})
	t.Run("a locked one stops them all", func(t *testing.T) {
		e := e.with(t)
		a2 := decodeObj(t, e.mustDo("GET", flagPath("team-a", "a2"), "", nil, 200))
		e.mustDo("POST", hubGV+"/lockrequests", "application/json",
			`{"spec":{"action":"Lock","owner":"alice","ids":["`+a2.Metadata.UID+`"]}}`, 201)
		wantStatus(t, e.do("DELETE", flagsIn("team-a")+"?labelSelector=team%3Da", "", nil), 409, "Conflict", "locked", "nothing was deleted")
		if got := left("team-a"); len(got) != 4 {
			t.Errorf("left after a refusal: %v", got)
		}
		l := decodeObj(t, e.mustDo("DELETE", flagsIn("team-a")+"?labelSelector=team%3Da&lockOwner=alice", "", nil, 200))
		if !slices.Equal(names(l), []string{"a1", "a2", "a3"}) {
			t.Errorf("deleted = %v", names(l))
		}
		if got := left("team-a"); !slices.Equal(got, []string{"b1"}) {
			t.Errorf("left in team-a: %v, want b1", got)
		}
		if got := left("team-b"); !slices.Equal(got, []string{"a9"}) {
			t.Errorf("left in team-b: %v, want a9 (another namespace)", got)
		}
	})
	t.Run("field selector", func(t *testing.T) {
		e := e.with(t)
		l := decodeObj(t, e.mustDo("DELETE", flagsIn("team-b")+"?fieldSelector=metadata.name%3Da9", "", nil, 200))
		if !slices.Equal(names(l), []string{"a9"}) || len(left("team-b")) != 0 {
			t.Errorf("deleted = %v", names(l))
		}
	})
	t.Run("preconditions are refused", func(t *testing.T) {
		e := e.with(t)
		wantStatus(t, e.do("DELETE", flagsIn("team-a"), "application/json", `{"preconditions":{"uid":"x"}}`), 400, "BadRequest", "preconditions")
	})
	t.Run("not across namespaces", func(t *testing.T) {
		e := e.with(t)
		wantStatus(t, e.do("DELETE", flagsGV+"/flags", "", nil), 405, "MethodNotAllowed")
	})
	t.Run("typeinstances", func(t *testing.T) {
		e := e.with(t)
		tis := hubGV + "/typeinstances"
		e.mustDo("POST", tis, "application/yaml", pgDoc("p1", "")+"---\n"+pgDoc("p2", "  uses: [p1]\n"), http.StatusCreated)
		l := decodeObj(t, e.mustDo("DELETE", tis+"?labelSelector=env%3Ddev", "", nil, 200))
		if l.Kind != "TypeInstanceList" || len(l.Items) != 2 {
			t.Errorf("answer = %s", l.Raw)
		}
		if got := decodeObj(t, e.mustDo("GET", tis+"?labelSelector=env%3Ddev", "", nil, 200)); len(got.Items) != 0 {
			t.Errorf("left: %s", got.Raw)
		}
	})
	t.Run("discovery lists the verb", func(t *testing.T) {
		e := e.with(t)
		for _, gv := range []string{flagsGV, hubGV} {
			var l struct{ Resources []apiResource }
			if err := json.Unmarshal(e.mustDo("GET", gv, "", nil, 200).body, &l); err != nil {
				t.Fatal(err)
			}
			for _, r := range l.Resources {
				if (r.Name == "flags" || r.Name == "typeinstances") && !slices.Contains(r.Verbs, "deletecollection") {
					t.Errorf("%s verbs %v", r.Name, r.Verbs)
				}
			}
		}
	})
}
