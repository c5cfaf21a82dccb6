package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/policy"
	"github.com/cairn-dev/cairn/store"
)

// The policy (seed 000 "Configuring storage backends") is an instance of a
// core Type, kept in the built-in backend under a fixed id, so every apply is
// a new resource version and its history comes with the instance's
// (ResourceVersions(PolicyID)); replicas on one database share it.
const (
	// PolicyID is the fixed id of the policy instance.
	PolicyID = "6f1c2b9e-4d3a-4e8f-9b7c-0a5d3e2f1c4b"
	// PolicyName and PolicyAlias name it in namespace cairn-system.
	PolicyName  = "default"
	PolicyAlias = "cairn-policy"
	// PolicyTypePath is its Type (revision cairn.CoreRevision).
	PolicyTypePath = "cap.core.type.hub.policy"
)

// PolicyTypeRef is the Type of the policy instance.
func PolicyTypeRef() cairn.TypeRef {
	return cairn.TypeRef{Path: PolicyTypePath, Revision: cairn.CoreRevision}
}

// policyTypeSchema checks the policy's shape, so a generic update of the
// policy instance cannot store something the hub cannot parse. Whether
// backends and injected instances exist is checked by ApplyPolicy.
const policyTypeSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "title": "cairn hub policy",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "interface": {"type": "object"},
    "typeInstance": {
      "type": "object",
      "additionalProperties": false,
      "properties": {
        "rules": {"type": "array", "items": {
          "type": "object", "required": ["typeRef", "backend"], "additionalProperties": false,
          "properties": {
            "typeRef": {"type": "object", "required": ["path"], "additionalProperties": false,
              "properties": {"path": {"type": "string"}, "revision": {"type": "string"}}},
            "backend": {"type": "object", "required": ["id"], "additionalProperties": false,
              "properties": {"id": {"type": "string"}, "description": {"type": "string"}}}
          }
        }}
      }
    }
  }
}`

// PolicyDocument is the current policy with its version.
type PolicyDocument struct {
	Policy policy.Policy
	// ResourceVersion of the policy instance; 0 when no policy was applied.
	ResourceVersion int
	// Seq is the instance's last change (REST's metadata.resourceVersion).
	Seq       int64
	CreatedBy string
	CreatedAt time.Time
}

// compiledPolicy is a parsed policy with its rule index.
type compiledPolicy struct {
	doc PolicyDocument
	ix  *policy.Index
}

// policyCache keeps the compiled policy of the last Seq seen, so a create
// costs one metadata read of the policy instance, not a parse.
type policyCache struct {
	mu  sync.Mutex
	seq int64
	cp  *compiledPolicy
}

// currentPolicy returns the compiled policy, nil when none was applied.
func (h *Hub) currentPolicy(ctx context.Context) (*compiledPolicy, error) {
	found, err := h.st.GetInstancesBrief(ctx, []string{PolicyID})
	if err != nil {
		return nil, fmt.Errorf("read the policy: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	inst := found[0]
	c := &h.policy
	c.mu.Lock()
	if c.cp != nil && c.seq == inst.Seq {
		cp := c.cp
		c.mu.Unlock()
		return cp, nil
	}
	c.mu.Unlock()
	raw, err := h.st.Value(ctx, PolicyID, inst.Latest.ResourceVersion)
	if err != nil {
		return nil, fmt.Errorf("read the policy's value: %w", err)
	}
	p, err := policy.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("the stored policy (resource version %d) cannot be parsed; apply a valid one: %w", inst.Latest.ResourceVersion, err)
	}
	cp := &compiledPolicy{
		doc: PolicyDocument{Policy: p, ResourceVersion: inst.Latest.ResourceVersion, Seq: inst.Seq,
			CreatedBy: inst.Latest.CreatedBy, CreatedAt: inst.Latest.CreatedAt},
		ix: policy.NewIndex(p.TypeInstance.Rules),
	}
	c.mu.Lock()
	if inst.Seq >= c.seq {
		c.seq, c.cp = inst.Seq, cp
	}
	c.mu.Unlock()
	return cp, nil
}

// GetPolicy returns the current policy; an empty one with ResourceVersion 0
// when none was applied (every create without a backend then uses the
// built-in one).
func (h *Hub) GetPolicy(ctx context.Context) (PolicyDocument, error) {
	cp, err := h.currentPolicy(ctx)
	if err != nil || cp == nil {
		return PolicyDocument{}, err
	}
	return cp.doc, nil
}

// ApplyPolicy validates p and stores it as the policy's next resource
// version; a policy equal to the stored one (aliases replaced by ids) is
// not written, and the stored document is returned. Validation lists every
// bad rule: syntax, each backend must exist and be a storage backend, the
// catch-all rule's backend must accept an absent context ({} must satisfy
// its context schema), and injected ids must exist. A backend may be given
// by the alias of exactly one storage backend; its id is stored.
func (h *Hub) ApplyPolicy(ctx context.Context, p policy.Policy) (PolicyDocument, error) {
	if err := h.validatePolicy(ctx, &p); err != nil {
		return PolicyDocument{}, err
	}
	value, err := json.Marshal(p)
	if err != nil {
		return PolicyDocument{}, err
	}
	// The policy already stored is no change: a new resource version would
	// fill the history with copies and conflict a client's next
	// conditional write for nothing.
	if cur, err := h.GetPolicy(ctx); err != nil {
		return PolicyDocument{}, fmt.Errorf("apply the policy: %w", err)
	} else if cur.ResourceVersion > 0 {
		if stored, err := json.Marshal(cur.Policy); err == nil && bytes.Equal(stored, value) {
			return cur, nil
		}
	}
	if _, _, err := h.ApplyType(ctx, cairn.Type{Path: PolicyTypePath, Revision: cairn.CoreRevision,
		JSONSchema: json.RawMessage(policyTypeSchema)}); err != nil {
		return PolicyDocument{}, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		found, err := h.st.GetInstancesBrief(ctx, []string{PolicyID})
		if err != nil {
			return PolicyDocument{}, fmt.Errorf("apply the policy: %w", err)
		}
		if len(found) == 1 {
			// A lock taken before generic locks of the policy were refused
			// would block every apply, and nobody could unlock it: the
			// policy's API knows no locks, so it writes as the holder.
			up := UpdateInstance{ID: PolicyID, OwnerID: found[0].LockedBy, Value: value}
			if _, err := h.updateInstances(ctx, []UpdateInstance{up}, PolicyID); err != nil {
				return PolicyDocument{}, fmt.Errorf("apply the policy: %w", err)
			}
			return h.appliedPolicy(ctx, p, found[0].Latest.ResourceVersion+1)
		}
		err = h.createPolicy(ctx, value)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			continue // another writer created it first: update it
		}
		if err != nil {
			return PolicyDocument{}, fmt.Errorf("apply the policy: %w", err)
		}
		return h.appliedPolicy(ctx, p, 1)
	}
	return PolicyDocument{}, cairn.Errorf(cairn.CodeConflict, "apply the policy: it changed concurrently; retry")
}

// refusePolicyInstance keeps generic instance writes (REST typeinstances,
// GraphQL, the CLI, locks) off the policy's instance: they would store a
// policy ApplyPolicy never validated (a rule naming a missing backend), and
// with rights on typeinstances instead of policies.
func refusePolicyInstance(id string) error {
	if id != PolicyID {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeForbidden, IDs: []string{id},
		Msg: fmt.Sprintf("TypeInstance %q holds the hub's policy: change it with 'cairn policy apply -f FILE' or PUT /apis/hub.cairn.dev/v1/policies/default", id)}
}

// appliedPolicy is the policy an apply stored; under a dry run, which
// stored nothing, the policy as it would have been stored.
func (h *Hub) appliedPolicy(ctx context.Context, p policy.Policy, rv int) (PolicyDocument, error) {
	if isDryRun(ctx) {
		return PolicyDocument{Policy: p, ResourceVersion: rv, CreatedBy: cairn.Actor(ctx), CreatedAt: h.now().UTC()}, nil
	}
	return h.GetPolicy(ctx)
}

func (h *Hub) createPolicy(ctx context.Context, value json.RawMessage) error {
	now := h.now().UTC()
	return h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		inst := cairn.Instance{
			ID: PolicyID, TypeRef: PolicyTypeRef(), Namespace: SystemNamespace, Name: PolicyName, Alias: PolicyAlias,
			Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}, CreatedAt: now,
			Latest: cairn.ResourceVersion{ResourceVersion: 1, CreatedBy: cairn.Actor(ctx), CreatedAt: now},
		}
		if err := tx.CreateInstance(ctx, inst); err != nil {
			return err
		}
		if err := tx.PutValue(ctx, PolicyID, 1, value); err != nil {
			return err
		}
		return tx.AddUses(ctx, PolicyID, cairn.BuiltinBackendID)
	})
}

// validatePolicy checks p against the hub's instances and replaces backend
// aliases by ids.
func (h *Hub) validatePolicy(ctx context.Context, p *policy.Policy) error {
	causes := p.Check()
	var aliases map[string][]string
	for i := range p.TypeInstance.Rules {
		r := &p.TypeInstance.Rules[i]
		field := fmt.Sprintf("typeInstance/rules/%d/backend/id", i)
		if r.Backend.ID == "" {
			continue
		}
		if uuid.Validate(r.Backend.ID) != nil {
			if aliases == nil {
				var err error
				if aliases, err = h.storageAliases(ctx); err != nil {
					return err
				}
			}
			switch ids := aliases[r.Backend.ID]; len(ids) {
			case 1:
				r.Backend.ID = ids[0]
			case 0:
				causes = append(causes, cairn.Cause{Field: field, Message: fmt.Sprintf("%q is neither the id nor the alias of a storage backend", r.Backend.ID)})
				continue
			default:
				causes = append(causes, cairn.Cause{Field: field, Message: fmt.Sprintf("%q is the alias of several storage backends (%s); use an id", r.Backend.ID, cairn.QuoteIDs(ids))})
				continue
			}
		}
		if c := h.checkPolicyBackend(ctx, r.Backend.ID, policy.IsCatchAll(r.TypeRef.Path)); c != "" {
			causes = append(causes, cairn.Cause{Field: field, Message: c})
		}
	}
	inj := p.Injections()
	if len(inj) > 0 {
		ids := make([]string, len(inj))
		for i, x := range inj {
			ids[i] = x.ID
		}
		found, err := h.st.GetInstancesBrief(ctx, ids)
		if err != nil {
			return fmt.Errorf("validate the policy: %w", err)
		}
		exists := map[string]bool{}
		for _, f := range found {
			exists[f.ID] = true
		}
		for _, x := range inj {
			if x.ID != "" && !exists[x.ID] {
				causes = append(causes, cairn.Cause{Field: x.Field + "/id", Message: fmt.Sprintf("TypeInstance %q was not found", x.ID)})
			}
		}
	}
	return invalid("Policy", "invalid policy", causes)
}

// checkPolicyBackend says why id cannot be a rule's backend, "" when it can.
func (h *Hub) checkPolicyBackend(ctx context.Context, id string, catchAll bool) string {
	found, err := h.st.GetInstancesBrief(ctx, []string{id})
	if err != nil {
		return fmt.Sprintf("backend %q: %v", id, err)
	}
	if len(found) == 0 {
		return fmt.Sprintf("backend %q was not found", id)
	}
	if !found[0].IsStorageBackend() {
		return fmt.Sprintf("TypeInstance %q is not a storage backend (its latest resource version lacks the attribute %s)", id, cairn.StorageAttributePath)
	}
	b, err := h.resolveBackend(ctx, id, 0, false)
	if err != nil {
		return err.Error()
	}
	if catchAll && b.contextSchema != nil {
		if causes := b.contextSchema.Validate("context", json.RawMessage(`{}`)); len(causes) > 0 {
			return fmt.Sprintf("the catch-all rule's backend %q requires a context (%s), but a create that names no backend gives none; choose a backend whose context is empty or optional", id, joinCauses(causes))
		}
	}
	return ""
}

// storageAliases maps the alias of every storage backend to its ids.
func (h *Hub) storageAliases(ctx context.Context) (map[string][]string, error) {
	list, err := h.st.ListInstances(ctx, store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}}})
	if err != nil {
		return nil, fmt.Errorf("list storage backends: %w", err)
	}
	out := map[string][]string{}
	for _, inst := range list {
		if inst.Alias != "" {
			out[inst.Alias] = append(out[inst.Alias], inst.ID)
		}
	}
	if _, ok := out[cairn.BuiltinBackendAlias]; !ok {
		out[cairn.BuiltinBackendAlias] = []string{cairn.BuiltinBackendID}
	}
	return out, nil
}

// PolicyExplanation says which backend a create of a Type that names none
// would use, and why.
type PolicyExplanation struct {
	TypeRef policy.TypeRef `json:"typeRef"`
	Matched bool           `json:"matched"`
	// Rule and RuleIndex are set when a rule matched.
	Rule      *policy.Rule `json:"rule,omitempty"`
	RuleIndex int          `json:"ruleIndex"`
	MatchKind string       `json:"matchKind,omitempty"`
	// BackendID is the backend the create would use: the rule's, else the
	// built-in one.
	BackendID    string `json:"backendID"`
	BackendAlias string `json:"backendAlias,omitempty"`
	// PolicyVersion is the policy's resource version, 0 for none.
	PolicyVersion int    `json:"policyVersion"`
	Message       string `json:"message"`
}

// ExplainPolicy reports the rule that matches a Type path (and revision,
// optional) and the backend it picks, or why none did.
func (h *Hub) ExplainPolicy(ctx context.Context, path, revision string) (PolicyExplanation, error) {
	if c := checkPath("typeRef/path", path); c != nil {
		return PolicyExplanation{}, invalid("explain", "invalid Type reference", []cairn.Cause{*c})
	}
	if revision != "" {
		if c := checkRevision("typeRef/revision", revision); c != nil {
			return PolicyExplanation{}, invalid("explain", "invalid Type reference", []cairn.Cause{*c})
		}
	}
	cp, err := h.currentPolicy(ctx)
	if err != nil {
		return PolicyExplanation{}, err
	}
	out := PolicyExplanation{TypeRef: policy.TypeRef{Path: path, Revision: revision}, RuleIndex: -1, BackendID: cairn.BuiltinBackendID}
	var sel policy.Selection
	if cp != nil {
		out.PolicyVersion = cp.doc.ResourceVersion
		sel = cp.ix.Select(path, revision)
	}
	out.Message = sel.Explain(path, revision)
	if cp == nil {
		out.Message = "no policy was applied; the built-in backend stores every instance created without a backend"
	}
	if sel.Matched {
		r := sel.Rule
		out.Matched, out.Rule, out.RuleIndex, out.MatchKind, out.BackendID = true, &r, sel.Index, sel.Kind, r.Backend.ID
	}
	found, err := h.st.GetInstancesBrief(ctx, []string{out.BackendID})
	if err != nil {
		return PolicyExplanation{}, fmt.Errorf("explain the policy: %w", err)
	}
	if len(found) == 0 {
		out.Message += fmt.Sprintf("; but backend %q no longer exists, so such a create fails", out.BackendID)
	} else {
		out.BackendAlias = found[0].Alias
	}
	return out, nil
}

// policyPicker chooses backends for one create batch, reading the policy
// at most once.
type policyPicker struct {
	h      *Hub
	bs     *backendSet // the batch's: the policy is read as of its position
	loaded bool
	cp     *compiledPolicy
}

func (h *Hub) newPolicyPicker(bs *backendSet) *policyPicker { return &policyPicker{h: h, bs: bs} }

// backendFor returns the backend of a new instance that names none: the
// policy's rule for its Type, else the built-in backend.
func (pp *policyPicker) backendFor(ctx context.Context, ref cairn.TypeRef) (string, error) {
	if !pp.loaded {
		// As of the batch's position, from memory unless the policy
		// changed since it was last read (keptBackends).
		if pp.bs.at == 0 {
			at, err := pp.h.LastSeq(ctx)
			if err != nil {
				return "", fmt.Errorf("read the policy: %w", err)
			}
			pp.bs.at = at
		}
		cp, err := pp.h.policyAt(ctx, pp.bs.at)
		if err != nil {
			return "", err
		}
		pp.cp, pp.loaded = cp, true
	}
	if pp.cp == nil {
		return cairn.BuiltinBackendID, nil
	}
	if sel := pp.cp.ix.Select(ref.Path, ref.Revision); sel.Matched {
		return sel.Rule.Backend.ID, nil
	}
	return cairn.BuiltinBackendID, nil
}

// explain adds, to a failure to resolve a backend the policy chose, which
// rule chose it.
func (pp *policyPicker) explain(err error, ref cairn.TypeRef, backendID string) error {
	if pp.cp == nil || backendID == cairn.BuiltinBackendID {
		return err
	}
	sel := pp.cp.ix.Select(ref.Path, ref.Revision)
	if !sel.Matched {
		return err
	}
	var e *cairn.Error
	if errors.As(err, &e) {
		c := *e
		c.Msg = fmt.Sprintf("the policy's rule %d (typeRef %s) picks backend %q: %s", sel.Index, sel.Rule.TypeRef, backendID, e.Msg)
		return &c
	}
	return fmt.Errorf("the policy's rule %d (typeRef %s) picks backend %q: %w", sel.Index, sel.Rule.TypeRef, backendID, err)
}

// checkNotInPolicy refuses to delete a backend that a policy rule or an
// injection names: creates the rule picks would fail, and injections would
// point nowhere. The policy has to be changed first.
func (h *Hub) checkNotInPolicy(ctx context.Context, id string) error {
	cp, err := h.currentPolicy(ctx)
	if err != nil || cp == nil {
		return err
	}
	var where []string
	for i, r := range cp.doc.Policy.TypeInstance.Rules {
		if r.Backend.ID == id {
			where = append(where, fmt.Sprintf("typeInstance.rules[%d] (typeRef %s)", i, r.TypeRef))
		}
	}
	for _, inj := range cp.doc.Policy.Injections() {
		if inj.ID == id {
			where = append(where, inj.Field)
		}
	}
	if len(where) == 0 {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeUsedBy, IDs: []string{PolicyID},
		Msg: fmt.Sprintf("TypeInstance %q is named by the policy (%s); change the policy first", id, strings.Join(where, ", "))}
}

// ResolveBackend returns the id of the storage backend ref names: its id,
// else its alias, else the name of its instance (as the Git webhooks name
// one). NotFound when none has it; Invalid when several share the alias or
// the name. An id is returned as is: the create that uses it says whether
// it exists.
func (h *Hub) ResolveBackend(ctx context.Context, ref string) (string, error) {
	if uuid.Validate(ref) == nil {
		return ref, nil
	}
	if ref == cairn.BuiltinBackendAlias {
		return cairn.BuiltinBackendID, nil
	}
	list, err := h.st.ListInstances(ctx, store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}}})
	if err != nil {
		return "", fmt.Errorf("list storage backends: %w", err)
	}
	var byAlias, byName []string
	for _, inst := range list {
		if inst.Alias == ref {
			byAlias = append(byAlias, inst.ID)
		}
		if inst.Name == ref {
			byName = append(byName, inst.ID)
		}
	}
	for _, m := range []struct {
		what string
		ids  []string
	}{{"alias", byAlias}, {"name", byName}} {
		switch len(m.ids) {
		case 0:
			continue
		case 1:
			return m.ids[0], nil
		}
		return "", &cairn.Error{Code: cairn.CodeInvalid, IDs: m.ids,
			Msg: fmt.Sprintf("%q is the %s of several storage backends (%s); use an id", ref, m.what, cairn.QuoteIDs(m.ids))}
	}
	return "", &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{ref},
		Msg: fmt.Sprintf("%q is neither the id, the alias nor the name of a storage backend", ref)}
}
