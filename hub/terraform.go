package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
	"github.com/cairn-dev/cairn/tfstate"
)

// OpenTofu and Terraform state kept in the hub (the HTTP state backend
// protocol is a façade: api/terraform). A state is an instance of
// TerraformStatePath whose value is the state document; each write is a new
// resource version; the state lock is the hub's lock with the lock ID as
// owner and the lock info in the instance's status; each root-module output
// is an instance of its own that uses the state.
const (
	TerraformGroup         = "terraform.cairn.dev"
	TerraformStatePath     = "cap.type.terraform.state"
	TerraformOutputPath    = "cap.type.terraform.output"
	TerraformSensitivePath = "cap.type.terraform.output.sensitive"
	terraformRevision      = "0.1.0"

	// TerraformStateLabel and TerraformOutputLabel are on every output
	// instance: the state's name and the output's name.
	TerraformStateLabel  = "terraform.cairn.dev/state"
	TerraformOutputLabel = "terraform.cairn.dev/output"

	// TerraformLineageAnnotation and TerraformSerialAnnotation are on every
	// state instance: the latest document's lineage and serial, so a write
	// is checked without reading (and parsing) the previous document.
	TerraformLineageAnnotation = "terraform.cairn.dev/lineage"
	TerraformSerialAnnotation  = "terraform.cairn.dev/serial"
)

// TerraformTypes are the Types of states and outputs. Sensitive outputs have
// a Type of their own so the policy can send them to the secrets backend.
func TerraformTypes() []cairn.Type {
	outputSchema := json.RawMessage(`{"type":"object","required":["state","output","value"],"properties":{` +
		`"state":{"type":"string"},"output":{"type":"string"},"value":true,"type":true,"sensitive":{"type":"boolean"}}}`)
	return []cairn.Type{{
		Path: TerraformStatePath, Revision: terraformRevision,
		JSONSchema: json.RawMessage(`{"type":"object"}`),
		Group:      TerraformGroup, Version: "v1",
		Names: &cairn.Names{Kind: "TerraformState", Singular: "terraformstate", Plural: "terraformstates", ShortNames: []string{"tfstate"}},
	}, {
		Path: TerraformOutputPath, Revision: terraformRevision, JSONSchema: outputSchema,
		Group: TerraformGroup, Version: "v1",
		Names: &cairn.Names{Kind: "TerraformOutput", Singular: "terraformoutput", Plural: "terraformoutputs", ShortNames: []string{"tfout"}},
	}, {
		Path: TerraformSensitivePath, Revision: terraformRevision, JSONSchema: outputSchema,
		Group: TerraformGroup, Version: "v1",
		Names: &cairn.Names{Kind: "TerraformSensitiveOutput", Singular: "terraformsensitiveoutput", Plural: "terraformsensitiveoutputs"},
	}}
}

// RegisterTerraformTypes registers TerraformTypes unless they exist (a read
// on every start after the first).
func (h *Hub) RegisterTerraformTypes(ctx context.Context) error {
	for _, t := range TerraformTypes() {
		if _, err := h.st.GetType(ctx, t.Ref()); err == nil {
			continue
		}
		if _, _, err := h.ApplyType(ctx, t); err != nil {
			return fmt.Errorf("register the Type %s: %w", t.Ref(), err)
		}
	}
	return nil
}

// TerraformLockedError is returned when another lock holds a state: Holder
// is that lock's info, which the protocol answers with 423 Locked.
type TerraformLockedError struct {
	State  string
	Holder tfstate.LockInfo
}

func (e *TerraformLockedError) Error() string {
	return fmt.Sprintf("state %q is locked by %s", e.State, e.Holder)
}

// Code makes it a Locked error for every façade.
func (e *TerraformLockedError) Unwrap() error {
	return &cairn.Error{Code: cairn.CodeLocked, Msg: e.Error()}
}

var stateTypeRef = cairn.TypeRef{Path: TerraformStatePath, Revision: terraformRevision}

// emptyState is the value of a state that was locked before it was first
// written: the lock needs an instance, the protocol still answers 404.
var emptyState = json.RawMessage(`{}`)

func stateName(ns, name string) string { return ns + "/" + name }

// terraformID is the id of a state's or an output's instance:
// <kind in lower case>.<namespace>.<name>, e.g.
// terraformoutput.default.network-ip. The hub chooses every id and makes
// every other one a UUID, so these cannot clash with another instance's;
// a namespace has no dots, so the id reads one way. Being derived from the
// name, an output's id stays the same across applies, and the
// TypeInstance view (typeinstances, GraphQL) shows what it is.
func terraformID(kind, ns, name string) string {
	return strings.ToLower(kind) + "." + ns + "." + name
}

// IsTerraformID reports whether s has the form of a state's or an
// output's id (terraformoutput.default.network-ip), the only instance ids
// that are not UUIDs, whether or not such an instance exists.
func IsTerraformID(s string) bool {
	kind, rest, ok := strings.Cut(s, ".")
	if !ok || !slices.ContainsFunc(TerraformTypes(), func(t cairn.Type) bool { return strings.ToLower(t.Names.Kind) == kind }) {
		return false
	}
	ns, name, ok := strings.Cut(rest, ".")
	return ok && checkNamespace(ns) == nil && checkName(name) == nil
}

// TerraformOutputID is the id of the (not sensitive) output instance named
// name (<state>-<output>) in namespace ns, whether or not it exists yet.
func TerraformOutputID(ns, name string) string { return terraformID("TerraformOutput", ns, name) }

// getState returns a state instance with its latest value; NotFound when
// there is none.
func (h *Hub) getState(ctx context.Context, ns, name string) (cairn.Instance, error) {
	return h.stateInstance(ctx, ns, name, true)
}

// stateInstance reads a state instance, NotFound naming the state.
func (h *Hub) stateInstance(ctx context.Context, ns, name string, withValue bool) (cairn.Instance, error) {
	if err := checkStateAddress(ns, name); err != nil {
		return cairn.Instance{}, err
	}
	inst, err := h.GetInstanceByName(ctx, TerraformStatePath, ns, name, withValue)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return inst, &cairn.Error{Code: cairn.CodeNotFound, Msg: fmt.Sprintf("state %q was not found", stateName(ns, name)), Err: err}
	}
	return inst, err
}

// checkStateAddress refuses a namespace or state name no instance can
// have. Such a state is not merely missing: tofu takes a read answered
// "not found" as "no state yet" and plans from an empty one.
func checkStateAddress(ns, name string) error {
	if c := checkNamespace(ns); c != nil {
		return cairn.Errorf(cairn.CodeInvalid, "state %q: namespace %s", stateName(ns, name), c.Message)
	}
	if c := checkName(name); c != nil {
		return cairn.Errorf(cairn.CodeInvalid, "state name %s", c.Message)
	}
	return nil
}

// TerraformState returns the latest state document. It is NotFound when no
// state was written yet (also while a first run only holds the lock).
func (h *Hub) TerraformState(ctx context.Context, ns, name string) (json.RawMessage, cairn.Instance, error) {
	inst, err := h.getState(ctx, ns, name)
	if err != nil {
		return nil, cairn.Instance{}, err
	}
	if isEmptyState(inst.Latest.Value) {
		return nil, inst, cairn.Errorf(cairn.CodeNotFound, "state %q has no content yet", stateName(ns, name))
	}
	return inst.Latest.Value, inst, nil
}

func isEmptyState(v json.RawMessage) bool {
	t := strings.TrimSpace(string(v))
	return t == "" || t == "{}" || t == "null"
}

// lockHolder returns the lock info of a locked state: the status's when
// it belongs to the current owner, else just the owner as ID.
func lockHolder(inst cairn.Instance) tfstate.LockInfo {
	var st struct {
		Lock *tfstate.LockInfo `json:"lock"`
	}
	if inst.Status != nil && json.Unmarshal(inst.Status, &st) == nil && st.Lock != nil && st.Lock.ID == inst.LockedBy {
		return *st.Lock
	}
	return tfstate.LockInfo{ID: inst.LockedBy}
}

// PutTerraformState stores a new state document as the state's next
// resource version (the first one creates it) and brings its outputs'
// instances in line: created, updated or deleted. lockID is the lock the
// writer holds ("" when it took none); a state locked by another lock is
// refused with *TerraformLockedError. A document of another lineage, or with
// an older serial than the stored one, is refused (CodeConflict), as
// OpenTofu's own backends refuse them.
func (h *Hub) PutTerraformState(ctx context.Context, ns, name, lockID string, doc json.RawMessage) (cairn.Instance, error) {
	s, err := tfstate.ParseSummary(doc)
	if err != nil {
		return cairn.Instance{}, cairn.Errorf(cairn.CodeInvalid, "state %q: %v", stateName(ns, name), err)
	}
	outs, err := outputInstances(ns, name, s)
	if err != nil {
		return cairn.Instance{}, err
	}
	inst, err := h.stateInstance(ctx, ns, name, false)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		created, cerr := h.createState(ctx, ns, name, doc, s, outs)
		if !cairn.HasCode(cerr, cairn.CodeAlreadyExists) {
			return created, cerr
		}
		// Another writer created it first: check against what it wrote.
		// Else what exists is an output's instance name.
		inst, err = h.stateInstance(ctx, ns, name, false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return cairn.Instance{}, h.outputNameTaken(ctx, ns, name, outs, cerr)
		}
	}
	if err != nil {
		return cairn.Instance{}, err
	}
	if inst.LockedBy != "" && inst.LockedBy != lockID {
		return cairn.Instance{}, &TerraformLockedError{State: stateName(ns, name), Holder: lockHolder(inst)}
	}
	if lineage := inst.Annotations[TerraformLineageAnnotation]; lineage != "" {
		if lineage != s.Lineage {
			return cairn.Instance{}, cairn.Errorf(cairn.CodeConflict,
				"state %q: lineage mismatch: the stored state has lineage %q, the new one %q; refusing to overwrite a different state", stateName(ns, name), lineage, s.Lineage)
		}
		if old, err := strconv.ParseUint(inst.Annotations[TerraformSerialAnnotation], 10, 64); err == nil && s.Serial < old {
			return cairn.Instance{}, cairn.Errorf(cairn.CodeConflict,
				"state %q: serial %d is older than the stored serial %d; refusing to overwrite a newer state", stateName(ns, name), s.Serial, old)
		}
	}
	updated, err := h.updateState(ctx, inst, lockID, doc, s, outs)
	if cairn.HasCode(err, cairn.CodeAlreadyExists) {
		return cairn.Instance{}, h.outputNameTaken(ctx, ns, name, outs, err)
	}
	return updated, err
}

// outputNameTaken explains a write refused because an output's instance
// name (<state>-<output>) is taken by an instance that is not this
// state's output, as output b_c of state a takes output c of state a-b:
// a Conflict naming both. It is called only after such a refusal, so a
// write that succeeds reads nothing more; err is returned when no output
// explains it.
func (h *Hub) outputNameTaken(ctx context.Context, ns, state string, outs []outputInstance, err error) error {
	for _, o := range outs {
		other, gerr := h.GetInstanceByName(ctx, o.path, ns, o.name, false)
		if gerr != nil || other.Labels[TerraformStateLabel] == state {
			continue
		}
		whose := "an instance that is not an output of a state"
		if st := other.Labels[TerraformStateLabel]; st != "" {
			whose = fmt.Sprintf("output %q of state %q", other.Labels[TerraformOutputLabel], stateName(ns, st))
		}
		return &cairn.Error{Code: cairn.CodeConflict, Err: err, Msg: fmt.Sprintf(
			"state %q: nothing was written: output %q would be the instance %s %q, which is already %s (an output's instance is named <state>-<output>); rename the output or the state",
			stateName(ns, state), o.output, o.kind(), o.name, whose)}
	}
	return err
}

// stateAnnotations returns annotations with the state's lineage and serial.
func stateAnnotations(annotations map[string]string, s tfstate.State) map[string]string {
	a := maps.Clone(annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[TerraformLineageAnnotation] = s.Lineage
	a[TerraformSerialAnnotation] = strconv.FormatUint(s.Serial, 10)
	return a
}

// outputInstance is what a state says one output instance must be.
type outputInstance struct {
	output string
	name   string
	path   string
	value  json.RawMessage
}

// outputInstances maps a state's root-module outputs to instances named
// <state>-<output> (underscores become dashes, as names are DNS subdomains).
func outputInstances(ns, state string, s tfstate.State) ([]outputInstance, error) {
	var out []outputInstance
	seen := map[string]string{}
	for _, o := range s.OutputNames() {
		v := s.Outputs[o]
		n := state + "-" + strings.ToLower(strings.ReplaceAll(o, "_", "-"))
		if c := checkName(n); c != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "state %q: output %q: its instance name %q is not a valid name", stateName(ns, state), o, n)
		}
		if prev, dup := seen[n]; dup {
			return nil, cairn.Errorf(cairn.CodeInvalid, "state %q: outputs %q and %q would both be instance %q", stateName(ns, state), prev, o, n)
		}
		seen[n] = o
		typ := v.Type
		if typ == nil {
			typ = json.RawMessage(`null`)
		}
		val, err := json.Marshal(struct {
			State     string          `json:"state"`
			Output    string          `json:"output"`
			Value     json.RawMessage `json:"value"`
			Type      json.RawMessage `json:"type"`
			Sensitive bool            `json:"sensitive,omitempty"`
		}{state, o, v.Value, typ, v.Sensitive})
		if err != nil {
			return nil, fmt.Errorf("state %q: output %q: %w", stateName(ns, state), o, err)
		}
		path := TerraformOutputPath
		if v.Sensitive {
			path = TerraformSensitivePath
		}
		out = append(out, outputInstance{output: o, name: n, path: path, value: val})
	}
	return out, nil
}

// kind is the REST kind of the output's Type.
func (o outputInstance) kind() string {
	if o.path == TerraformSensitivePath {
		return "TerraformSensitiveOutput"
	}
	return "TerraformOutput"
}

func (o outputInstance) newInstance(ns, state string) NewInstance {
	return NewInstance{
		id:    terraformID(o.kind(), ns, o.name),
		Alias: "output-" + o.name, Namespace: ns, Name: o.name,
		TypeRef: cairn.TypeRef{Path: o.path, Revision: terraformRevision},
		Labels:  map[string]string{TerraformStateLabel: state, TerraformOutputLabel: labelValue(o.output)},
		Value:   o.value,
	}
}

// labelValue keeps an output name within a label value's alphabet.
func labelValue(s string) string {
	if labels.Validate(map[string]string{"k": s}) == nil {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '-'
	}, s)
}

// createState creates the state and its outputs, each output using the
// state, in one transaction.
func (h *Hub) createState(ctx context.Context, ns, name string, doc json.RawMessage, s tfstate.State, outs []outputInstance) (cairn.Instance, error) {
	w := stateWrite{state: stateName(ns, name)}
	w.create.Instances = []NewInstance{{id: terraformID("TerraformState", ns, name), Alias: "state", Namespace: ns, Name: name,
		TypeRef: stateTypeRef, Value: doc, Annotations: stateAnnotations(nil, s)}}
	for _, o := range outs {
		ni := o.newInstance(ns, name)
		w.create.Instances = append(w.create.Instances, ni)
		w.create.UsesRelations = append(w.create.UsesRelations, UsesRelation{From: ni.Alias, To: "state"})
	}
	created, _, err := h.writeState(ctx, w)
	if err != nil {
		return cairn.Instance{}, err
	}
	return created[0], nil
}

// stateOutputs lists a state's output instances (both Types).
func (h *Hub) stateOutputs(ctx context.Context, ns, state string) ([]cairn.Instance, error) {
	req, err := labels.Parse(TerraformStateLabel + "=" + state)
	if err != nil {
		return nil, err
	}
	list, err := h.st.ListInstances(ctx, store.InstanceFilter{TypePath: TerraformOutputPath + ".*", Namespace: ns, Labels: req})
	if err != nil {
		return nil, err
	}
	plain, err := h.st.ListInstances(ctx, store.InstanceFilter{TypePath: TerraformOutputPath, Namespace: ns, Labels: req})
	if err != nil {
		return nil, err
	}
	all := append(plain, list...)
	// Unredacted: compared with the new values.
	return h.fillValues(ctx, all)
}

// SensitiveMarker replaces a sensitive output's value in lists, as tofu
// prints it.
const SensitiveMarker = "(sensitive value)"

// RedactsInLists reports whether lists show instances of the Type path with
// part of their values hidden (sensitive outputs, and the sensitive outputs
// inside a state document), so that whatever caches an encoded instance
// does not serve a list's encoding for a read of the one instance.
func RedactsInLists(typePath string) bool {
	return typePath == TerraformSensitivePath || typePath == TerraformStatePath
}

// redactStateOutputs hides the values of a state document's sensitive
// outputs, as tofu output prints them, and the attribute values of each
// resource instance whose provider marks any of them sensitive
// (sensitive_attributes): all of them, keys kept, since an instance may
// hold the same value unmarked elsewhere (terraform_data's output mirrors
// its input). A document it cannot read is replaced whole rather than
// shown.
func redactStateOutputs(doc json.RawMessage) json.RawMessage {
	if isEmptyState(doc) || !strings.Contains(string(doc), `sensitive`) {
		return doc
	}
	marker := json.RawMessage(strconv.Quote(SensitiveMarker))
	var m map[string]json.RawMessage
	var outs map[string]map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil || json.Unmarshal(m["outputs"], &outs) != nil {
		return marker
	}
	changed := false
	for _, o := range outs {
		if string(o["sensitive"]) == "true" {
			o["value"] = marker
			changed = true
		}
	}
	if changed {
		b, err := json.Marshal(outs)
		if err != nil {
			return marker
		}
		m["outputs"] = b
	}
	if res, ok := m["resources"]; ok && strings.Contains(string(res), `"sensitive_attributes"`) {
		b, hid, err := redactSensitiveAttributes(res, marker)
		if err != nil {
			return marker
		}
		if hid {
			m["resources"], changed = b, true
		}
	}
	if !changed {
		return doc
	}
	b, err := json.Marshal(m)
	if err != nil {
		return marker
	}
	return b
}

// redactSensitiveAttributes replaces every attribute value of the resource
// instances in resources (a state's "resources") that mark any attribute
// sensitive by marker; hid reports whether there was one.
func redactSensitiveAttributes(resources, marker json.RawMessage) (out json.RawMessage, hid bool, err error) {
	var rs []map[string]json.RawMessage
	if err := json.Unmarshal(resources, &rs); err != nil {
		return nil, false, err
	}
	for _, r := range rs {
		var insts []map[string]json.RawMessage
		if len(r["instances"]) == 0 {
			continue
		}
		if err := json.Unmarshal(r["instances"], &insts); err != nil {
			return nil, false, err
		}
		changed := false
		for _, in := range insts {
			var paths []json.RawMessage
			sa := in["sensitive_attributes"]
			if len(sa) == 0 || string(sa) == "null" {
				continue
			}
			if json.Unmarshal(sa, &paths) != nil {
				return nil, false, errors.New("sensitive_attributes is not a list")
			}
			if len(paths) == 0 {
				continue
			}
			var attrs map[string]json.RawMessage
			if err := json.Unmarshal(in["attributes"], &attrs); err != nil {
				return nil, false, err
			}
			for k := range attrs {
				attrs[k] = marker
			}
			b, err := json.Marshal(attrs)
			if err != nil {
				return nil, false, err
			}
			in["attributes"], changed = b, true
		}
		if changed {
			b, err := json.Marshal(insts)
			if err != nil {
				return nil, false, err
			}
			r["instances"], hid = b, true
		}
	}
	if !hid {
		return resources, false, nil
	}
	out, err = json.Marshal(rs)
	return out, true, err
}

// redactSensitive hides a sensitive output's value in a list: reading the
// one instance (GetInstance) shows it, a list never does. A value of these
// Types is marked Redacted whether or not it held anything sensitive.
func redactSensitive(inst *cairn.Instance) {
	if inst.TypeRef.Path == TerraformStatePath && inst.Latest.Value != nil {
		inst.Latest.Value = redactStateOutputs(inst.Latest.Value)
		inst.Latest.Redacted = true
		return
	}
	if inst.TypeRef.Path != TerraformSensitivePath || inst.Latest.Value == nil {
		return
	}
	inst.Latest.Redacted = true
	var m map[string]json.RawMessage
	if json.Unmarshal(inst.Latest.Value, &m) != nil || m == nil {
		inst.Latest.Value = json.RawMessage(strconv.Quote(SensitiveMarker))
		return
	}
	m["value"] = json.RawMessage(strconv.Quote(SensitiveMarker))
	if v, err := json.Marshal(m); err == nil {
		inst.Latest.Value = v
	}
}

// updateState adds the state's next resource version, the changed outputs'
// new versions, the new outputs (with their uses edges) and deletes the
// outputs the state no longer has, all in one transaction. A removed output
// another instance uses refuses the write before anything changes.
func (h *Hub) updateState(ctx context.Context, inst cairn.Instance, lockID string, doc json.RawMessage, s tfstate.State, outs []outputInstance) (cairn.Instance, error) {
	existing, err := h.stateOutputs(ctx, inst.Namespace, inst.Name)
	if err != nil {
		return cairn.Instance{}, fmt.Errorf("state %q: list its outputs: %w", stateName(inst.Namespace, inst.Name), err)
	}
	byName := map[string]cairn.Instance{}
	for _, e := range existing {
		byName[e.Name] = e
	}
	ups := []UpdateInstance{{ID: inst.ID, OwnerID: lockID, Value: doc, IfSeq: inst.Seq, Annotations: stateAnnotations(inst.Annotations, s)}}
	var create CreateRequest
	keep := map[string]bool{}
	for _, o := range outs {
		e, ok := byName[o.name]
		// An output created by an earlier cairn has a UUID: it gets its
		// readable id (replaced in this write) unless something uses it.
		if ok && e.TypeRef.Path == o.path && (e.ID == terraformID(o.kind(), inst.Namespace, o.name) || len(e.UsedBy) > 0) {
			keep[o.name] = true
			if !cairn.JSONEqual(e.Latest.Value, o.value) {
				ups = append(ups, UpdateInstance{ID: e.ID, Value: o.value})
			}
			continue
		}
		// New, its sensitivity changed (another Type) or its id is a UUID:
		// (re)created.
		ni := o.newInstance(inst.Namespace, inst.Name)
		create.Instances = append(create.Instances, ni)
		create.UsesRelations = append(create.UsesRelations, UsesRelation{From: ni.Alias, To: inst.ID})
	}
	// A removed output another instance uses refuses the write
	// (writeState, before anything is written).
	var remove []cairn.Instance
	for _, e := range existing {
		if !keep[e.Name] {
			remove = append(remove, e)
		}
	}
	w := stateWrite{state: stateName(inst.Namespace, inst.Name), create: create, update: ups, remove: remove}
	_, updated, err := h.writeState(ctx, w)
	if err != nil {
		return cairn.Instance{}, err
	}
	return updated[0], nil
}

// DeleteTerraformState deletes a state, its outputs and its history in one
// transaction. A state locked by another lock than lockID is refused, and
// so is one whose outputs other instances use.
func (h *Hub) DeleteTerraformState(ctx context.Context, ns, name, lockID string) error {
	inst, err := h.getState(ctx, ns, name)
	if err != nil {
		return err
	}
	if inst.LockedBy != "" && inst.LockedBy != lockID {
		return &TerraformLockedError{State: stateName(ns, name), Holder: lockHolder(inst)}
	}
	outs, err := h.stateOutputs(ctx, ns, name)
	if err != nil {
		return err
	}
	// The outputs first: each uses the state.
	_, _, err = h.writeState(ctx, stateWrite{state: stateName(ns, name), remove: append(outs, inst), lockID: lockID})
	return err
}

// LockTerraformState takes the state's lock for info.ID and records info in
// the state's status. A state that does not exist yet is created empty so
// a first run can lock it. Another lock holding it gives
// *TerraformLockedError naming that holder.
func (h *Hub) LockTerraformState(ctx context.Context, ns, name string, info tfstate.LockInfo) error {
	inst, err := h.stateInstance(ctx, ns, name, false)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		_, cerr := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{id: terraformID("TerraformState", ns, name),
			Namespace: ns, Name: name, TypeRef: stateTypeRef, Value: emptyState}}})
		if cerr != nil && !cairn.HasCode(cerr, cairn.CodeAlreadyExists) {
			return cerr
		}
		inst, err = h.stateInstance(ctx, ns, name, false)
	}
	if err != nil {
		return err
	}
	if inst.LockedBy != "" && inst.LockedBy != info.ID {
		return &TerraformLockedError{State: stateName(ns, name), Holder: lockHolder(inst)}
	}
	if err := h.LockInstances(ctx, []string{inst.ID}, info.ID); err != nil {
		if cairn.HasCode(err, cairn.CodeLocked) {
			// Taken between the read and the lock.
			if cur, gerr := h.GetInstance(ctx, inst.ID, false); gerr == nil && cur.LockedBy != "" {
				return &TerraformLockedError{State: stateName(ns, name), Holder: lockHolder(cur)}
			}
		}
		return err
	}
	status, err := statusWithLock(inst.Status, &info)
	if err != nil {
		return err
	}
	if _, err := h.UpdateStatus(ctx, inst.ID, status, 0); err != nil {
		return fmt.Errorf("state %q is locked by %s but its lock info was not recorded: %w", stateName(ns, name), info.ID, err)
	}
	return nil
}

// UnlockTerraformState releases the lock lockID holds. lockID "" releases
// whatever lock holds the state (an UNLOCK without lock info; tofu
// force-unlock sends the ID it was given).
// Unlocking an unlocked state succeeds.
func (h *Hub) UnlockTerraformState(ctx context.Context, ns, name, lockID string) error {
	inst, err := h.stateInstance(ctx, ns, name, false)
	if err != nil {
		return err
	}
	if inst.LockedBy == "" {
		return nil
	}
	if lockID != "" && inst.LockedBy != lockID {
		return &TerraformLockedError{State: stateName(ns, name), Holder: lockHolder(inst)}
	}
	if err := h.UnlockInstances(ctx, []string{inst.ID}, inst.LockedBy); err != nil {
		return err
	}
	status, err := statusWithLock(inst.Status, nil)
	if err != nil {
		return err
	}
	if _, err := h.UpdateStatus(ctx, inst.ID, status, 0); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
		return fmt.Errorf("state %q is unlocked but its old lock info was not cleared: %w", stateName(ns, name), err)
	}
	return nil
}

// statusWithLock returns status with its "lock" member set to info, or
// removed when info is nil; other members are kept.
func statusWithLock(status json.RawMessage, info *tfstate.LockInfo) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(status) > 0 {
		if err := json.Unmarshal(status, &m); err != nil {
			return nil, fmt.Errorf("read the state's status: %w", err)
		}
	}
	if info == nil {
		delete(m, "lock")
	} else {
		b, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		m["lock"] = b
	}
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

// TerraformStateVersion is one write of a state, as history lists it.
type TerraformStateVersion struct {
	ResourceVersion  int    `json:"resourceVersion"`
	CreatedAt        string `json:"createdAt"`
	CreatedBy        string `json:"createdBy,omitempty"`
	Serial           uint64 `json:"serial"`
	Lineage          string `json:"lineage"`
	TerraformVersion string `json:"terraformVersion"`
	Resources        int    `json:"resources"`
	Outputs          int    `json:"outputs"`
}

// TerraformStateHistory lists a state's writes, oldest first (the empty
// version a first lock creates is left out).
func (h *Hub) TerraformStateHistory(ctx context.Context, ns, name string) ([]TerraformStateVersion, error) {
	inst, err := h.stateInstance(ctx, ns, name, false)
	if err != nil {
		return nil, err
	}
	rvs, err := h.ResourceVersions(ctx, inst.ID, true)
	if err != nil {
		return nil, err
	}
	out := []TerraformStateVersion{}
	for _, rv := range rvs {
		if isEmptyState(rv.Value) {
			continue
		}
		s, err := tfstate.Parse(rv.Value)
		if err != nil {
			return nil, fmt.Errorf("state %q version %d: %w", stateName(ns, name), rv.ResourceVersion, err)
		}
		out = append(out, TerraformStateVersion{
			ResourceVersion: rv.ResourceVersion, CreatedAt: rv.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"), CreatedBy: rv.CreatedBy,
			Serial: s.Serial, Lineage: s.Lineage, TerraformVersion: s.TerraformVersion,
			Resources: len(s.Resources), Outputs: len(s.Outputs),
		})
	}
	return out, nil
}

// TerraformStateDiff compares two resource versions of a state.
func (h *Hub) TerraformStateDiff(ctx context.Context, ns, name string, from, to int) (tfstate.Diff, error) {
	inst, err := h.stateInstance(ctx, ns, name, false)
	if err != nil {
		return tfstate.Diff{}, err
	}
	var states [2]tfstate.State
	for i, v := range []int{from, to} {
		rv, err := h.ResourceVersion(ctx, inst.ID, v, true)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return tfstate.Diff{}, &cairn.Error{Code: cairn.CodeNotFound, Err: err,
				Msg: fmt.Sprintf("state %q has no version %d (see its history)", stateName(ns, name), v)}
		}
		if err != nil {
			return tfstate.Diff{}, err
		}
		if isEmptyState(rv.Value) {
			continue // the empty state before the first write
		}
		if states[i], err = tfstate.Parse(rv.Value); err != nil {
			return tfstate.Diff{}, fmt.Errorf("state %q version %d: %w", stateName(ns, name), v, err)
		}
	}
	return tfstate.Compare(states[0], states[1]), nil
}

// IsTerraformLocked returns the holder's lock info when err says another
// lock holds a state.
func IsTerraformLocked(err error) (tfstate.LockInfo, bool) {
	var le *TerraformLockedError
	if errors.As(err, &le) {
		return le.Holder, true
	}
	return tfstate.LockInfo{}, false
}

// stateWrite is everything one request about a state changes: instances to
// create (the state on its first write, new outputs) with their uses edges,
// updates (the state's next version, changed outputs) and instances to
// delete (outputs the state no longer has; on DELETE the outputs, then the
// state). writeState commits it in one store transaction.
//
// It is not ApplyChildren: its deletes are not owned children, the state's
// uses edges and lock come with them, and an error must say which state.
type stateWrite struct {
	state  string // namespace/name, for errors
	create CreateRequest
	update []UpdateInstance
	remove []cairn.Instance
	// lockID may delete a removed instance it locks (the state on DELETE).
	lockID string
}

// writeState checks and commits w all or nothing. Values in external
// backends are written first, each backend's share as one batch where it
// takes batches (creates, updates and deletes: a Git backend makes one
// commit of an apply), and taken back when anything after fails; the store
// transaction then creates, updates and deletes the metadata (and the
// built-in backend's values) together, checking locks, sequence numbers and
// users again. A backend without batches cannot take a delete back, so the
// values of deleted instances there are deleted after the commit: one that
// fails leaves an unreferenced value behind, which is logged, while the hub
// is already consistent. It returns the created and the updated instances
// in request order.
func (h *Hub) writeState(ctx context.Context, w stateWrite) (created, updated []cairn.Instance, err error) {
	var items []*pending
	var edges []UsesRelation
	if len(w.create.Instances) > 0 {
		if items, err = h.prepareCreate(ctx, w.create, h.now().UTC()); err != nil {
			return nil, nil, fmt.Errorf("state %q: %w", w.state, err)
		}
		if edges, err = h.resolveRelations(ctx, w.create.UsesRelations, items); err != nil {
			return nil, nil, fmt.Errorf("state %q: %w", w.state, err)
		}
	}
	var ids []string
	var staged []*staged
	if len(w.update) > 0 {
		if err := checkUpdates(w.update, ""); err != nil {
			return nil, nil, fmt.Errorf("state %q: %w", w.state, err)
		}
		if ids, staged, err = h.stageUpdates(ctx, w.update); err != nil {
			return nil, nil, h.stateWriteErr(w, err)
		}
	}
	removing := make(map[string]bool, len(w.remove))
	for _, r := range w.remove {
		removing[r.ID] = true
	}
	if err := checkRemovable(w, w.remove, removing); err != nil {
		return nil, nil, h.nameUsers(ctx, err)
	}
	deletes, err := h.deleteWrites(ctx, w)
	if err != nil {
		return nil, nil, h.stateWriteErr(w, err)
	}

	ws := append(append(h.createWrites(items), updateWrites(staged)...), deletes...)
	j, failed, err := h.writeExternal(ctx, ws)
	if err != nil {
		var cause error
		switch {
		case failed == nil: // the intent journal, before any backend call
			cause = err
		case failed.w.Create != nil:
			cause = withSubject(h.externalErr(ctx, failed.b.ID, "create", err), subjectOf(failed.inst.Alias))
		case failed.w.Update != nil:
			cause = h.updateFailure(ctx, failed, err)
		default:
			cause = h.externalErr(ctx, failed.b.ID, fmt.Sprintf("delete %q", failed.inst.ID), err)
		}
		return nil, nil, h.undo(ctx, j, h.stateWriteErr(w, cause))
	}
	removeIDs := make([]string, len(w.remove))
	for i, r := range w.remove {
		removeIDs[i] = r.ID
	}
	err = h.write(ctx, func(ctx context.Context, tx store.Tx) error {
		created, updated = nil, nil
		if len(removeIDs) > 0 {
			cur, err := tx.GetInstances(ctx, removeIDs)
			if err != nil {
				return err
			}
			if len(cur) != len(removeIDs) {
				return &cairn.Error{Code: cairn.CodeConflict, Msg: fmt.Sprintf("state %q: an output instance was deleted concurrently; retry", w.state)}
			}
			if err := checkRemovable(w, cur, removing); err != nil {
				return err
			}
			for _, r := range cur {
				if err := tx.DeleteInstance(ctx, r.ID); err != nil {
					return fmt.Errorf("delete %q: %w", r.Name, err)
				}
				if r.Backend.Abstract {
					if err := tx.DeleteValues(ctx, r.ID); err != nil && !cairn.HasCode(err, cairn.CodeNotFound) {
						return err
					}
				}
			}
		}
		var err error
		if len(items) > 0 {
			if created, err = h.storeCreates(ctx, tx, items, edges); err != nil {
				return err
			}
		}
		if len(staged) > 0 {
			if updated, err = h.storeUpdates(ctx, tx, w.update, ids, staged); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, h.undo(ctx, j, h.stateWriteErr(w, err))
	}
	h.settle(ctx, j)
	h.log.InfoContext(ctx, "terraform state written", "state", w.state, "created", len(items), "updated", len(staged),
		"deleted", len(w.remove), "actor", cairn.Actor(ctx))
	return created, updated, nil
}

// deleteWrites are the deletes of the removed instances' values in
// external backends: backends that take batches (and can undo them) get
// them in the write's batch; the others after the commit (writeExternal).
func (h *Hub) deleteWrites(ctx context.Context, w stateWrite) (batch []*externalWrite, err error) {
	if isDryRun(ctx) {
		return nil, nil
	}
	bs := h.newBackendSet()
	for _, r := range w.remove {
		if r.Backend.Abstract {
			continue
		}
		b, err := bs.get(ctx, r.Backend.ID)
		if err != nil {
			return nil, fmt.Errorf("delete %q: %w", r.Name, err)
		}
		batch = append(batch, &externalWrite{b: b, inst: r,
			w: cairn.BatchWrite{Delete: &cairn.OnDeleteRequest{InstanceID: r.ID, Context: r.Latest.Context, OwnerID: w.lockID}}})
	}
	return batch, nil
}

// checkRemovable refuses to delete an instance locked by another owner than
// the write's lock, or used by an instance the write does not delete too.
func checkRemovable(w stateWrite, insts []cairn.Instance, removing map[string]bool) error {
	for _, r := range insts {
		if r.LockedBy != "" && r.LockedBy != w.lockID {
			return &cairn.Error{Code: cairn.CodeLocked, IDs: []string{r.ID},
				Msg: fmt.Sprintf("state %q: instance %q is locked by %s; nothing was written", w.state, r.Name, r.LockedBy)}
		}
		var users []string
		for _, u := range r.UsedBy {
			if !removing[u] {
				users = append(users, u)
			}
		}
		if len(users) == 0 {
			continue
		}
		what := fmt.Sprintf("the new state drops output %q, but its instance %q", r.Labels[TerraformOutputLabel], r.Name)
		if r.TypeRef.Path == TerraformStatePath {
			what = fmt.Sprintf("the state %q", r.Name)
		}
		return &cairn.Error{Code: cairn.CodeUsedBy, IDs: users,
			Msg: fmt.Sprintf("state %q: %s is used by %s; nothing was written", w.state, what, strings.Join(users, ", "))}
	}
	return nil
}

// nameUsers adds to a UsedBy refusal what each user is (its Type, namespace
// and name): ids alone do not tell a tofu user which stack reads an output.
func (h *Hub) nameUsers(ctx context.Context, err error) error {
	var ce *cairn.Error
	if !errors.As(err, &ce) || ce.Code != cairn.CodeUsedBy {
		return err
	}
	users, rerr := h.st.GetInstancesBrief(ctx, ce.IDs)
	if rerr != nil || len(users) == 0 {
		return err
	}
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = fmt.Sprintf("%s %s/%s", u.TypeRef.Path, u.Namespace, u.Name)
	}
	c := *ce
	c.Msg = strings.TrimSuffix(c.Msg, "; nothing was written") + " (" + strings.Join(names, ", ") + "); nothing was written"
	return &c
}

// stateWriteErr says which state a failed write was about; a write that
// lost a race to another writer is a conflict to retry.
func (h *Hub) stateWriteErr(w stateWrite, err error) error {
	if errors.Is(err, errVersionRace) || cairn.HasCode(err, cairn.CodeConflict) {
		return &cairn.Error{Code: cairn.CodeConflict, Err: err,
			Msg: fmt.Sprintf("state %q was written concurrently; nothing was written, retry: %v", w.state, err)}
	}
	return fmt.Errorf("state %q: nothing was written: %w", w.state, err)
}

// refuseTerraformUpdate refuses a generic update (REST, GraphQL, the CLI)
// of what the state protocol writes: a state's value, checked there for
// lineage and serial and followed by its outputs, and an output's value,
// which follows its state; and the annotations and labels those checks
// and lookups key on. Other labels and annotations are the caller's.
func refuseTerraformUpdate(u UpdateInstance, inst cairn.Instance) error {
	kind := terraformKind(inst.TypeRef.Path)
	var keyed []string
	annotations := false
	switch kind {
	case "":
		return nil
	case "TerraformState":
		keyed, annotations = []string{TerraformLineageAnnotation, TerraformSerialAnnotation}, true
	default:
		keyed = []string{TerraformStateLabel, TerraformOutputLabel}
	}
	subject := fmt.Sprintf("%s %q", kind, stateName(inst.Namespace, inst.Name))
	how := stateWrittenByTofu(subject, inst.Namespace, inst.Name)
	if kind != "TerraformState" {
		state := inst.Labels[TerraformStateLabel]
		how = fmt.Sprintf("%s is output %q of state %q: it follows the state's writes; change the output in the configuration and apply",
			subject, inst.Labels[TerraformOutputLabel], stateName(inst.Namespace, state))
	}
	// A cause, so kubectl, which shows a 422's causes and not its message,
	// says why.
	refuse := func(field, what string) error {
		msg := fmt.Sprintf("%s; %s cannot be changed here", how, what)
		return &cairn.Error{Code: cairn.CodeInvalid, Msg: msg, Causes: []cairn.Cause{{Field: field, Message: msg}}}
	}
	if u.Value != nil {
		return refuse("spec/value", "its value")
	}
	have, want, what := inst.Labels, u.Labels, "label"
	if annotations {
		have, want, what = inst.Annotations, u.Annotations, "annotation"
	}
	if want == nil {
		return nil
	}
	for _, k := range keyed {
		if have[k] != want[k] {
			return refuse("metadata/"+what+"s/"+k, fmt.Sprintf("its %s %q is the protocol's and", what, k))
		}
	}
	return nil
}

// refuseTerraformCreate refuses a generic create (kubectl create, GraphQL)
// of a state: one so created has no lineage for the protocol to check, so
// the first write of any configuration would be taken. The protocol's own
// creates give the instance's id; no other caller can. (An output created
// so is only a name: a write that would take it is refused, naming it.)
func refuseTerraformCreate(in NewInstance) error {
	if in.TypeRef.Path != TerraformStatePath || in.id != "" {
		return nil
	}
	msg := stateWrittenByTofu(fmt.Sprintf("TerraformState %q", stateName(in.Namespace, in.Name)), in.Namespace, in.Name) + "; it cannot be created here"
	return &cairn.Error{Code: cairn.CodeInvalid, Msg: msg, Causes: []cairn.Cause{{Field: "typeRef/path", Message: msg}}}
}

// terraformKind is the kind of a state's or an output's Type, "" for
// any other Type.
func terraformKind(typePath string) string {
	switch typePath {
	case TerraformStatePath:
		return "TerraformState"
	case TerraformOutputPath:
		return "TerraformOutput"
	case TerraformSensitivePath:
		return "TerraformSensitiveOutput"
	}
	return ""
}

func stateWrittenByTofu(subject, ns, name string) string {
	return fmt.Sprintf("%s is written by OpenTofu/Terraform through the state protocol (tofu apply, tofu state push to "+
		"/terraform/v1/namespaces/%s/states/%s), which checks its lineage and serial and updates its outputs", subject, ns, name)
}
