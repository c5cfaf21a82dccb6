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
// latest resource version of an instance, with its state where reviewed.
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

	InstanceID      string        `json:"instanceID"`
	TypeRef         cairn.TypeRef `json:"typeRef"`
	Namespace       string        `json:"namespace"`
	Name            string        `json:"name"`
	ResourceVersion int           `json:"resourceVersion"`
	CreatedBy       string        `json:"createdBy,omitempty"`
	CreatedAt       time.Time     `json:"createdAt"`
	Backend         string        `json:"backend"`
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
// versions of instances, sorted by namespace, name and id. With withState
// each proposal's provider is asked for its state (in parallel, bounded); a
// provider that cannot answer leaves State empty and StateError set, and
// does not fail the list.
func (h *Hub) ListProposals(ctx context.Context, withState bool) ([]Proposal, error) {
	insts, err := h.ListInstances(ctx, store.InstanceFilter{}, false)
	if err != nil {
		return nil, err
	}
	out := []Proposal{}
	contexts := map[string]json.RawMessage{} // by proposal id: what the backend is asked about
	for _, inst := range insts {
		p := ProposalOf(inst.Latest.Context)
		if p == nil {
			continue
		}
		fill(p, inst)
		out = append(out, *p)
		contexts[p.ID] = inst.Latest.Context
	}
	slices.SortFunc(out, func(a, b Proposal) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.ID, b.Namespace+"/"+b.Name+"/"+b.ID)
	})
	if withState {
		h.proposalStates(ctx, contexts, out)
	}
	return out, nil
}

// fill records which instance and version announced p.
func fill(p *Proposal, inst cairn.Instance) {
	p.InstanceID, p.TypeRef, p.Namespace, p.Name = inst.ID, inst.TypeRef, inst.Namespace, inst.Name
	p.ResourceVersion, p.CreatedBy, p.CreatedAt = inst.Latest.ResourceVersion, inst.Latest.CreatedBy, inst.Latest.CreatedAt
	p.Backend = inst.Backend.ID
}

// GetProposal returns one proposal by id, with its state.
func (h *Hub) GetProposal(ctx context.Context, id string) (Proposal, error) {
	insts, err := h.ListInstances(ctx, store.InstanceFilter{}, false)
	if err != nil {
		return Proposal{}, err
	}
	for _, inst := range insts {
		if p := ProposalOf(inst.Latest.Context); p != nil && p.ID == id {
			fill(p, inst)
			one := []Proposal{*p}
			h.proposalStates(ctx, map[string]json.RawMessage{id: inst.Latest.Context}, one)
			return one[0], nil
		}
	}
	return Proposal{}, cairn.Errorf(cairn.CodeNotFound, "proposal %q not found in the latest resource version of any instance", id)
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
				p.StateError = err.Error()
				return
			}
			p.State = state
		}()
	}
	wg.Wait()
}
