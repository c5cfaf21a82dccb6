package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// stateOpener answers proposal states from a table, as a Git opener asks
// its provider; a missing number is an unreachable provider.
type stateOpener struct {
	hub.BackendOpener
	states map[int]string
}

func (o stateOpener) ProposalState(_ context.Context, _ cairn.StorageBackend, raw json.RawMessage) (string, error) {
	p := hub.ProposalOf(raw)
	if s, ok := o.states[p.Number]; ok {
		return s, nil
	}
	return "", errors.New("provider unreachable")
}

func TestListProposals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		checker bool
		want    map[string]string // id -> state or "error: <part>"
	}{
		{"no checker", false, map[string]string{"p1": "error: cannot ask", "p2": "error: cannot ask"}},
		{"provider answers", true, map[string]string{"p1": "merged", "p2": "error: provider unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []func(*hub.Config)
			if tc.checker {
				opts = append(opts, func(c *hub.Config) { c.Backends = stateOpener{c.Backends, map[int]string{7: "merged"}} })
			}
			e := newEnv(t, opts...)
			e.registerType("cap.type.flag", "0.1.0", `{"type": "object"}`)
			backend, _ := e.addBackend("git", true, `{"type": "object"}`)
			ctxOf := func(proposal string) *hub.BackendInput {
				return &hub.BackendInput{ID: backend, Context: json.RawMessage(fmt.Sprintf(`{"commit": "abc", "proposal": %s}`, proposal))}
			}
			e.create(
				hub.NewInstance{Alias: "a", Name: "a", TypeRef: cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}, Value: json.RawMessage(`{}`),
					Backend: ctxOf(`{"id": "p1", "provider": "github", "number": 7, "url": "https://example.org/pull/7", "branch": "cairn/proposal/p1"}`)},
				hub.NewInstance{Alias: "b", Name: "b", TypeRef: cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}, Value: json.RawMessage(`{}`),
					Backend: ctxOf(`{"id": "p2", "provider": "github", "number": 8}`)},
				// No id: not a proposal.
				hub.NewInstance{Alias: "c", Name: "c", TypeRef: cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}, Value: json.RawMessage(`{}`),
					Backend: ctxOf(`{"provider": "github", "number": 9}`)},
				hub.NewInstance{Alias: "d", Name: "d", TypeRef: cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}, Value: json.RawMessage(`{}`)},
				// A batch: e's version is in p1's pull request too.
				hub.NewInstance{Alias: "e", Name: "e", TypeRef: cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}, Value: json.RawMessage(`{}`),
					Backend: ctxOf(`{"id": "p1", "provider": "github", "number": 7, "url": "https://example.org/pull/7", "branch": "cairn/proposal/p1"}`)},
			)
			ps, err := e.h.ListProposals(e.ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != len(tc.want) {
				t.Fatalf("ListProposals = %+v, want %d", ps, len(tc.want))
			}
			for _, p := range ps {
				want := tc.want[p.ID]
				if errPart, isErr := strings.CutPrefix(want, "error: "); isErr {
					if p.State != "" || !strings.Contains(p.StateError, errPart) {
						t.Errorf("%s: state %q, error %q; want an error naming %q", p.ID, p.State, p.StateError, errPart)
					}
				} else if p.State != want || p.StateError != "" {
					t.Errorf("%s: state %q, error %q; want %q", p.ID, p.State, p.StateError, want)
				}
				for _, at := range p.Instances {
					if p.Backend != backend || at.Namespace != "default" || at.ResourceVersion != 1 || at.ID == "" || at.CreatedBy != "tester" || p.CreatedAt.IsZero() {
						t.Errorf("%s: where it was recorded: %+v", p.ID, p)
					}
				}
			}
			if names := fmt.Sprint(ps[0].Instances[0].Name, ps[0].Instances[1:]); ps[0].ID != "p1" || len(ps[0].Instances) != 2 || ps[0].Instances[1].Name != "e" {
				t.Errorf("p1 carried by %s, want a and e (one proposal for the batch)", names)
			}
			if ps[0].Instances[0].Name != "a" || ps[0].URL != "https://example.org/pull/7" || ps[0].Branch != "cairn/proposal/p1" {
				t.Errorf("first proposal %+v, want p1 of a with its url and branch", ps[0])
			}
			if unasked, err := e.h.ListProposals(e.ctx, false); err != nil || unasked[0].State != "" || unasked[0].StateError != "" {
				t.Errorf("ListProposals without states = %+v, %v", unasked, err)
			}
			one, err := e.h.GetProposal(e.ctx, "p1")
			if err != nil || one.Instances[0].Name != "a" || (tc.checker && one.State != "merged") {
				t.Errorf("GetProposal(p1) = %+v, %v", one, err)
			}
			_, err = e.h.GetProposal(e.ctx, "p9")
			wantCode(t, err, cairn.CodeNotFound)
		})
	}
}
