package rest

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// Proposal is a change a backend has not applied but proposed for review
// (a Git backend in propose mode: a branch and a pull request). Backends
// announce one in the context they return for the resource version they
// wrote: {"proposal": {"id", "provider", "url", ...}}.
type Proposal struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	URL      string `json:"url"`
	Number   int    `json:"number,omitempty"`
	Branch   string `json:"branch,omitempty"`
}

// ProposalOf returns the proposal a resource version's backend context
// announces, nil when none.
func ProposalOf(context json.RawMessage) *Proposal {
	if len(context) == 0 {
		return nil // before c, which escapes: every write answer asks
	}
	var c struct {
		Proposal *Proposal `json:"proposal"`
	}
	if json.Unmarshal(context, &c) != nil || c.Proposal == nil || c.Proposal.ID == "" {
		return nil
	}
	return c.Proposal
}

// proposedObject is the answer to a write that became a proposal: the
// object as stored (the hub keeps the proposed version) and the proposal.
type proposedObject struct {
	Object
	Proposal *Proposal `json:"proposal"`
}

// writeWrite answers a create, replace or patch. When this request wrote a
// resource version (wrote) whose backend context carries a proposal, the
// change is not in effect where the backend stores it until the proposal
// is merged: 202 Accepted with {..., proposal: {id, provider, url}}.
// Otherwise code with the object.
func writeWrite(w http.ResponseWriter, code int, res *resource, inst cairn.Instance, wrote bool) {
	if p := ProposalOf(inst.Latest.Context); wrote && p != nil {
		writeJSON(w, http.StatusAccepted, proposedObject{Object: toObject(res, inst), Proposal: p})
		return
	}
	writeObjectJSON(w, code, toObject(res, inst))
}

// dryRunView gives the answer of a dry run the resourceVersion the API
// server gives one: none after a create (nothing was stored), the live
// object's after an update. The position of the rolled-back transaction is
// no version anyone can read, and a client sending it back (a replace of
// the answer) would conflict; kubectl diff would show it as a change.
func dryRunView(r *http.Request, inst cairn.Instance, live *cairn.Instance) cairn.Instance {
	if !cairn.IsDryRun(r.Context()) {
		return inst
	}
	inst.Seq = 0 // served without a resourceVersion
	if live != nil {
		inst.Seq = live.Seq
	}
	return inst
}

// ProposalObject is a proposal served in hub.cairn.dev/v1 (read-only):
// what the backend recorded when it proposed (spec) and the state its
// provider reports now (status). Its name is the proposal's id.
type ProposalObject struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   ObjectMeta     `json:"metadata"`
	Spec       ProposalSpec   `json:"spec"`
	Status     ProposalStatus `json:"status"`
}

// ProposalSpec is what the backend recorded.
type ProposalSpec struct {
	Provider string `json:"provider"`
	Number   int    `json:"number,omitempty"`
	URL      string `json:"url,omitempty"`
	Branch   string `json:"branch,omitempty"`
	Base     string `json:"base,omitempty"`
	Backend  string `json:"backend"`
	// Instances are those whose latest resource version carries the
	// proposed change (several for a batch, such as a stack reconcile).
	Instances []ProposalInstance `json:"instances"`
}

// ProposalInstance names an instance and the resource version that carries
// the proposed change.
type ProposalInstance struct {
	ID              string        `json:"id"`
	Namespace       string        `json:"namespace"`
	Name            string        `json:"name"`
	TypeRef         cairn.TypeRef `json:"typeRef"`
	ResourceVersion int           `json:"resourceVersion"`
	CreatedBy       string        `json:"createdBy,omitempty"`
}

// ProposalStatus is the state where the proposal is reviewed: open,
// merged or closed; Unknown with a message when the provider could not be
// asked.
type ProposalStatus struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

func toProposalObject(p hub.Proposal) ProposalObject {
	st := ProposalStatus{State: p.State}
	if st.State == "" {
		st = ProposalStatus{State: "Unknown", Message: p.StateError}
	}
	insts := make([]ProposalInstance, 0, len(p.Instances))
	for _, i := range p.Instances {
		insts = append(insts, ProposalInstance{ID: i.ID, Namespace: i.Namespace, Name: i.Name, TypeRef: i.TypeRef,
			ResourceVersion: i.ResourceVersion, CreatedBy: i.CreatedBy})
	}
	return ProposalObject{
		APIVersion: HubGroup + "/" + HubVersion, Kind: "Proposal",
		Metadata: ObjectMeta{Name: p.ID, UID: p.ID, CreationTimestamp: timestamp(p.CreatedAt)},
		Spec: ProposalSpec{Provider: p.Provider, Number: p.Number, URL: p.URL, Branch: p.Branch, Base: p.Base, Backend: p.Backend,
			Instances: insts},
		Status: st,
	}
}

// listProposals is GET proposals: every proposal recorded in the latest
// resource version of an instance, with its state asked of its provider
// now (?state=false skips asking).
func (s *Server) listProposals(w http.ResponseWriter, r *http.Request, req request) error {
	withState := true
	if v := query(r).Get("state"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cairn.Errorf(cairn.CodeInvalid, "query parameter state=%q: want true or false", v)
		}
		withState = b
	}
	ps, err := s.hub.ListProposals(r.Context(), withState)
	if err != nil {
		return err
	}
	out := List{APIVersion: HubGroup + "/" + HubVersion, Kind: "ProposalList", Items: []any{}}
	for _, p := range ps {
		o := toProposalObject(p)
		if !withState {
			o.Status = ProposalStatus{State: "Unknown", Message: "not asked (state=false)"}
		}
		out.Items = append(out.Items, o)
	}
	s.writeRead(w, r, req.res, out)
	return nil
}

func (s *Server) getProposal(w http.ResponseWriter, r *http.Request, req request) error {
	p, err := s.hub.GetProposal(r.Context(), req.name)
	if err != nil {
		return err
	}
	s.writeRead(w, r, req.res, toProposalObject(p))
	return nil
}
