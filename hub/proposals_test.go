package hub_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
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

// TestProposalStateErrorWithheld: why a provider could not be asked is the
// backend's words (a forge's message, its API url); a caller who may list
// proposals but not get the backend gets the code and a reference, as for
// the backend's other errors.
func TestProposalStateErrorWithheld(t *testing.T) {
	e := newEnv(t, func(c *hub.Config) {
		c.Backends = stateOpener{c.Backends, map[int]string{}}
	})
	e.registerType("cap.type.flag", "0.1.0", `{"type": "object"}`)
	backend, _ := e.addBackend("git", true, `{"type": "object"}`)
	e.create(hub.NewInstance{Alias: "a", Name: "a", TypeRef: cairn.TypeRef{Path: "cap.type.flag", Revision: "0.1.0"}, Value: json.RawMessage(`{}`),
		Backend: &hub.BackendInput{ID: backend, Context: json.RawMessage(`{"proposal": {"id": "p1", "provider": "github", "number": 7}}`)}})
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "proposal-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbac.HubGroup}, Resources: []string{"proposals"}, Verbs: []string{"get", "list"}}}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pat"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "proposal-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "pat"}}}
	for _, o := range []hub.RBACObject{role, bind} {
		if _, err := e.h.CreateRBAC(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pat := cairn.WithUser(context.Background(), cairn.User{Name: "pat", Groups: []string{cairn.Authenticated}})
	if ps, err := e.h.ListProposals(e.ctx, true); err != nil || len(ps) != 1 || !strings.Contains(ps[0].StateError, "provider unreachable") {
		t.Fatalf("ListProposals as an admin = %+v, %v; want the provider's words", ps, err)
	}
	for name, get := range map[string]func() (hub.Proposal, error){
		"ListProposals": func() (hub.Proposal, error) {
			ps, err := e.h.ListProposals(pat, true)
			if err != nil || len(ps) != 1 {
				return hub.Proposal{}, fmt.Errorf("%d proposals, %w", len(ps), err)
			}
			return ps[0], nil
		},
		"GetProposal": func() (hub.Proposal, error) { return e.h.GetProposal(pat, "p1") },
	} {
		p, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.State != "" || strings.Contains(p.StateError, "provider unreachable") || !strings.Contains(p.StateError, "reference ") {
			t.Errorf("%s: state %q, error %q; want the provider's words withheld, with a reference", name, p.State, p.StateError)
		}
	}
}
