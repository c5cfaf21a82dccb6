package rest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// hubStatusKeys are the status fields the hub itself serves; a status
// written by a client is stored without them (a client that read an object
// and writes its status back sends them too).
var hubStatusKeys = []string{"typeRef", "alias", "backend", "lockedBy", "createdBy", "uses", "usedBy"}

// replaceStatus is PUT .../<name>/status: the object's status is written,
// the rest of the body is ignored, as the Kubernetes status subresource
// does.
func (s *Server) replaceStatus(w http.ResponseWriter, r *http.Request, req request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if body, err = bodyJSON(r, body); err != nil {
		return err
	}
	o, err := decodeObject(body)
	if err != nil {
		return err
	}
	cur, err := s.instance(r, req)
	if err != nil {
		return err
	}
	inst, err := s.writeStatus(r, req, cur, o)
	if err != nil {
		return err
	}
	// A grant of status reads the object as get does (secrets hidden
	// without reveal).
	if _, err := s.hub.HideSecrets(r.Context(), &inst, req.res.objectAttrs(req.namespace, req.name)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toObject(req.res, inst))
	return nil
}

func explicitRV(o inObject, cur cairn.Instance) bool {
	return o.Metadata.ResourceVersion != strconv.FormatInt(cur.Seq, 10)
}

// writeStatus stores o.status as the instance's status.
func (s *Server) writeStatus(r *http.Request, req request, cur cairn.Instance, o inObject) (cairn.Instance, error) {
	if err := checkObject(req.res, o); err != nil {
		return cairn.Instance{}, err
	}
	if o.Metadata.Name != "" && o.Metadata.Name != req.name {
		return cairn.Instance{}, errStatus{badRequest("the name of the object (%s) does not match the name on the URL (%s)", o.Metadata.Name, req.name)}
	}
	if o.Metadata.UID != "" && o.Metadata.UID != cur.ID {
		return cairn.Instance{}, errStatus{newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", o.Metadata.UID, cur.ID))}
	}
	ifSeq, err := parseSeq(o.Metadata.ResourceVersion)
	if err != nil {
		return cairn.Instance{}, err
	}
	var status json.RawMessage
	if t := strings.TrimSpace(string(o.Status)); t != "" && t != "null" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(o.Status, &m); err != nil {
			return cairn.Instance{}, errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid",
				fmt.Sprintf("%s %q is invalid: status: must be an object: %v", req.res.kind, req.name, err))}
		}
		for _, k := range hubStatusKeys {
			delete(m, k)
		}
		if len(m) > 0 {
			status, _ = json.Marshal(m)
		}
	}
	if cairn.JSONEqual(status, cur.Status) || (len(status) == 0 && len(cur.Status) == 0) {
		return cur, nil
	}
	inst, err := s.hub.UpdateStatus(r.Context(), cur.ID, status, ifSeq)
	if cairn.HasCode(err, cairn.CodeConflict) {
		st := newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on %s.%s %q: the object has been modified; please apply your changes to the latest version and try again", req.res.plural, req.res.group, req.name))
		st.Details = &StatusDetails{Name: req.name, Group: req.res.group, Kind: req.res.plural}
		return cairn.Instance{}, errStatus{st}
	}
	if err != nil {
		return cairn.Instance{}, err
	}
	inst.Uses, inst.UsedBy = cur.Uses, cur.UsedBy
	inst.Latest.Value = cur.Latest.Value
	return inst, nil
}

// objects renders instances of res with their owner references: the
// installation that owns an instance (uses it and is named by its
// stacks.cairn.dev/uid label) is its controller owner.
func (s *Server) objects(r *http.Request, res *resource, insts []cairn.Instance) ([]Object, error) {
	out := make([]Object, len(insts))
	var ownerIDs []string
	for i, inst := range insts {
		out[i] = toObject(res, inst)
		if uid := inst.Labels[hub.LabelInstallationUID]; uid != "" && slices.Contains(inst.UsedBy, uid) && !slices.Contains(ownerIDs, uid) {
			ownerIDs = append(ownerIDs, uid)
		}
	}
	if len(ownerIDs) == 0 {
		return out, nil
	}
	owners, err := s.hub.GetInstances(r.Context(), ownerIDs)
	if err != nil {
		return nil, err
	}
	all, err := s.resources(r.Context())
	if err != nil {
		return nil, err
	}
	refs := map[string]OwnerReference{}
	for _, o := range owners {
		for _, rr := range all {
			if rr.typ != nil && rr.typ.Ref() == o.TypeRef {
				refs[o.ID] = OwnerReference{APIVersion: rr.apiVersion(), Kind: rr.kind, Name: o.Name, UID: o.ID,
					Controller: true, BlockOwnerDeletion: true}
				break
			}
		}
	}
	for i, inst := range insts {
		if ref, ok := refs[inst.Labels[hub.LabelInstallationUID]]; ok && slices.Contains(inst.UsedBy, ref.UID) {
			out[i].Metadata.OwnerReferences = []OwnerReference{ref}
		}
	}
	return out, nil
}

// schemaColumns are the printer columns a Type keeps in its JSON Schema
// (hub.PrinterColumnsKey): stack installation kinds declare READY and
// SYNCED there.
func schemaColumns(t *cairn.Type) []cairn.PrinterColumn {
	if t == nil || len(t.JSONSchema) == 0 {
		return nil
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(t.JSONSchema, &doc) != nil {
		return nil
	}
	var cols []hub.PrinterColumn
	if json.Unmarshal(doc[hub.PrinterColumnsKey], &cols) != nil {
		return nil
	}
	out := make([]cairn.PrinterColumn, len(cols))
	for i, c := range cols {
		out[i] = cairn.PrinterColumn{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description,
			Priority: int32(c.Priority), JSONPath: c.JSONPath}
	}
	return out
}
