package rest

import (
	"encoding/json"
	"net/http"

	"github.com/cairn-dev/cairn"
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
	var c struct {
		Proposal *Proposal `json:"proposal"`
	}
	if len(context) == 0 || json.Unmarshal(context, &c) != nil || c.Proposal == nil || c.Proposal.ID == "" {
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
	writeJSON(w, code, toObject(res, inst))
}
