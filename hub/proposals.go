package hub

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// A backend may answer a write by proposing it for review rather than
// applying it (a Git backend in propose mode opens a pull request). It
// says so in the context it returns for the resource version it wrote:
//
//	{"proposal": {"id", "provider", "number", "url", "branch", "base"}, ...}
//
// The hub keeps that version as the latest; whether the proposal was merged
// or closed since is known only where it is reviewed, which the backend's
// opener asks (ProposalChecker).

// ProposalChecker is implemented by backend openers whose backends make
// proposals: it asks the proposal's provider for its state ("open",
// "merged", "closed") given the context of the version that announced it.
type ProposalChecker interface {
	ProposalState(ctx context.Context, sb cairn.StorageBackend, context json.RawMessage) (string, error)
}

// Proposal is a change a backend proposed for review, as recorded in the
// latest resource versions of instances, with its state where reviewed.
// A batch (a stack reconcile) proposes several instances' versions in one
// pull request: they share the proposal, listed in Instances.
type Proposal struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Number   int    `json:"number,omitempty"`
	URL      string `json:"url,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Base     string `json:"base,omitempty"`

	// State is open, merged or closed as the provider reports it now; ""
	// when it could not be asked, and StateError says why.
	State      string `json:"state,omitempty"`
	StateError string `json:"stateError,omitempty"`

	Backend   string             `json:"backend"`
	CreatedAt time.Time          `json:"createdAt"` // of the earliest version carrying it
	Instances []ProposalInstance `json:"instances"`
}

// ProposalInstance is an instance whose latest resource version carries a
// proposal.
type ProposalInstance struct {
	ID              string        `json:"id"`
	TypeRef         cairn.TypeRef `json:"typeRef"`
	Namespace       string        `json:"namespace"`
	Name            string        `json:"name"`
	ResourceVersion int           `json:"resourceVersion"`
	CreatedBy       string        `json:"createdBy,omitempty"`
	CreatedAt       time.Time     `json:"createdAt"`
}

// ProposalOf reads the proposal a resource version's backend context
// announces; nil when it announces none.
func ProposalOf(context json.RawMessage) *Proposal {
	var c struct {
		Proposal *Proposal `json:"proposal"`
	}
	if len(context) == 0 || json.Unmarshal(context, &c) != nil || c.Proposal == nil || c.Proposal.ID == "" {
		return nil
	}
	p := c.Proposal
	// Only what the backend recorded: the rest is the hub's to fill.
	return &Proposal{ID: p.ID, Provider: p.Provider, Number: p.Number, URL: p.URL, Branch: p.Branch, Base: p.Base}
}

// proposalStateWorkers bounds the provider requests made at once.
const proposalStateWorkers = 8

// ListProposals lists the proposals announced by the latest resource
// versions of instances, one per proposal id with every instance carrying
// it, sorted by the first instance's namespace and name, then id. With
// withState each proposal's provider is asked for its state (in parallel,
// bounded); a provider that cannot answer leaves State empty and
// StateError set, and does not fail the list.
func (h *Hub) ListProposals(ctx context.Context, withState bool) ([]Proposal, error) {
	return h.proposals(ctx, "", withState)
}

// GetProposal returns one proposal by id, with its state.
func (h *Hub) GetProposal(ctx context.Context, id string) (Proposal, error) {
	ps, err := h.proposals(ctx, id, true)
	if err != nil {
		return Proposal{}, err
	}
	if len(ps) == 0 {
		return Proposal{}, cairn.Errorf(cairn.CodeNotFound, "proposal %q not found in the latest resource version of any instance", id)
	}
	return ps[0], nil
}

// proposals lists the proposals (only the one with id when id is not "").
func (h *Hub) proposals(ctx context.Context, id string, withState bool) ([]Proposal, error) {
	insts, err := h.ListInstances(ctx, store.InstanceFilter{}, false)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Proposal{}
	contexts := map[string]json.RawMessage{} // by proposal id: what the backend is asked about
	var order []string
	for _, inst := range insts {
		p := ProposalOf(inst.Latest.Context)
		if p == nil || (id != "" && p.ID != id) {
			continue
		}
		at := ProposalInstance{ID: inst.ID, TypeRef: inst.TypeRef, Namespace: inst.Namespace, Name: inst.Name,
			ResourceVersion: inst.Latest.ResourceVersion, CreatedBy: inst.Latest.CreatedBy, CreatedAt: inst.Latest.CreatedAt}
		if have, ok := byID[p.ID]; ok {
			have.Instances = append(have.Instances, at)
			if at.CreatedAt.Before(have.CreatedAt) {
				have.CreatedAt = at.CreatedAt
			}
			continue
		}
		p.Backend, p.CreatedAt, p.Instances = inst.Backend.ID, at.CreatedAt, []ProposalInstance{at}
		byID[p.ID] = p
		contexts[p.ID] = inst.Latest.Context
		order = append(order, p.ID)
	}
	out := make([]Proposal, 0, len(order))
	for _, pid := range order {
		p := byID[pid]
		slices.SortFunc(p.Instances, func(a, b ProposalInstance) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Proposal) int {
		x, y := a.Instances[0], b.Instances[0]
		return strings.Compare(x.Namespace+"/"+x.Name+"/"+a.ID, y.Namespace+"/"+y.Name+"/"+b.ID)
	})
	if withState {
		h.proposalStates(ctx, contexts, out)
	}
	return out, nil
}

// proposalStates asks each proposal's backend for its state.
func (h *Hub) proposalStates(ctx context.Context, contexts map[string]json.RawMessage, ps []Proposal) {
	pc, ok := h.opener.(ProposalChecker)
	if !ok {
		for i := range ps {
			ps[i].StateError = "this server cannot ask the provider (no backend opener reports proposal states)"
		}
		return
	}
	backends := map[string]cairn.StorageBackend{}
	backendErr := map[string]error{}
	for _, p := range ps {
		if _, seen := backends[p.Backend]; seen || backendErr[p.Backend] != nil {
			continue
		}
		backends[p.Backend], backendErr[p.Backend] = h.StorageBackend(ctx, p.Backend)
	}
	sem := make(chan struct{}, proposalStateWorkers)
	var wg sync.WaitGroup
	for i := range ps {
		p := &ps[i]
		if err := backendErr[p.Backend]; err != nil {
			p.StateError = err.Error()
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			state, err := pc.ProposalState(ctx, backends[p.Backend], contexts[p.ID])
			if err != nil {
				// The backend's (its forge's) words: withheld from who
				// may not get the backend.
				p.StateError = h.externalErr(ctx, p.Backend, "report the state of proposal "+p.ID, err).Error()
				return
			}
			p.State = state
		}()
	}
	wg.Wait()
}
