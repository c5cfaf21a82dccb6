package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
	"github.com/cairn-dev/cairn/store"
)

// createTypeInstances is POST typeinstances. The body is one TypeInstance
// document in cairn's manifest form (what cairn apply reads:
// metadata {name, namespace, alias, labels, annotations}, spec {typeRef,
// value, attributes, backend, uses}) or a List of them. Every document is
// created in one atomic hub batch, so spec.uses may name another document
// of the same request: by its metadata.alias, or by a metadata.name no other
// document of the request shares (the rule of cairn apply); other entries
// are ids of existing instances. spec.backend.id may be a storage backend's
// alias. A document may also be in the form GET serves (metadata.name and
// uid the id, spec.name, status): it is created again under that id, which
// no instance may have, as kubectl replace --force does after its delete.
// The answer is 201 with the created TypeInstance, or a TypeInstanceList
// when the body held several.
func (s *Server) createTypeInstances(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	raws, err := manifest.Split(bytes.NewReader(body), "request body")
	if err != nil {
		return hubInvalid(err)
	}
	var docs []manifest.Document
	var errs []error
	for _, raw := range raws {
		// Before the manifest form refuses the field as unknown: the
		// answer the API server gives (handlers.go).
		var top struct {
			Metadata struct {
				ResourceVersion json.RawMessage `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if json.Unmarshal(raw.JSON, &top) == nil {
			var rv string
			if json.Unmarshal(top.Metadata.ResourceVersion, &rv) == nil {
				if err := refuseResourceVersion(r, rv); err != nil {
					return err
				}
			}
		}
		ds, err := manifest.DecodeRaw(raw)
		docs = append(docs, ds...)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return hubInvalid(err)
	}
	if len(docs) == 0 {
		return errStatus{badRequest("the request body holds no TypeInstance document")}
	}
	ins := make([]*manifest.Instance, 0, len(docs))
	for _, d := range docs {
		switch {
		case d.Kind != manifest.KindTypeInstance:
			return errStatus{badRequest("%s: only TypeInstance documents can be created here, not %s (Types are created at %s/%s/types)", d.Pos, d.Kind, HubGroup, HubVersion)}
		case d.Instance.ID != "" && !d.Instance.Served:
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: d.Pos.String(),
				Causes: []cairn.Cause{{Field: "metadata/id", Message: "must not be set: it names an existing TypeInstance, which is replaced with PUT typeinstances/{id}"}},
				Msg:    "metadata.id names an existing TypeInstance; replace it with PUT typeinstances/{id}"})
		}
		ins = append(ins, d.Instance)
	}
	aliases, err := batchAliases(docs)
	errs = append(errs, err)
	errs = append(errs, s.resolveBackendAliases(r, docs))
	if err := errors.Join(errs...); err != nil {
		return hubInvalid(err)
	}

	// A served document names the instances it uses by id; one of them
	// may be created again by the same request, under its alias there.
	former := map[string]string{}
	for i, in := range ins {
		if in.Served && aliases[i] != "" {
			former[in.ID] = aliases[i]
		}
	}
	var req hub.CreateRequest
	for i, in := range ins {
		n := in.NewInstance()
		n.Alias = aliases[i]
		if in.Served {
			// The form GET serves, sent back after a delete (kubectl
			// replace --force): the instance comes back under its id.
			n.ID = in.ID
		}
		if len(in.Uses) > 0 && n.Alias == "" {
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: docs[i].Pos.String(),
				Msg: "spec.uses needs the document to have an alias within the request: set metadata.alias (metadata.name is shared with another document)"})
		}
		req.Instances = append(req.Instances, n)
		for _, rel := range in.UsesRelations(n.Alias) {
			if a, ok := former[rel.To]; ok {
				rel.To = a
			}
			req.UsesRelations = append(req.UsesRelations, rel)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return hubInvalid(err)
	}
	created, err := s.hub.CreateInstances(r.Context(), req)
	if err != nil {
		return hubInvalid(err)
	}
	items := make([]any, 0, len(created))
	for _, c := range created {
		inst, err := s.withValue(r, c.Instance)
		if err != nil {
			return fmt.Errorf("read the value of the created TypeInstance %s: %w", c.ID, err)
		}
		items = append(items, toTypeInstance(dryRunView(r, inst, nil)))
	}
	if len(items) == 1 {
		writeJSON(w, http.StatusCreated, items[0])
		return nil
	}
	writeJSON(w, http.StatusCreated, List{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeInstanceList", Items: items})
	return nil
}

// hubInvalid renders a hub error about a batch without naming one object:
// the error's subjects (document positions, aliases) already say which.
func hubInvalid(err error) error {
	return errStatus{errorStatus(err, target{group: HubGroup})}
}

// batchAliases gives each document its alias within the request: its
// metadata.alias, else a metadata.name no other document shares and no
// document has as its alias. Explicit aliases must be unique.
func batchAliases(docs []manifest.Document) ([]string, error) {
	aliases := make([]string, len(docs))
	taken := map[string]int{}
	var errs []error
	for i, d := range docs {
		a := d.Instance.Alias
		if a == "" {
			continue
		}
		if j, dup := taken[a]; dup {
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: d.Pos.String(),
				Msg: fmt.Sprintf("metadata.alias %q is also the alias of %s; aliases must be unique within a request", a, docs[j].Pos)})
			continue
		}
		aliases[i], taken[a] = a, i
	}
	names := map[string]int{}
	for _, d := range docs {
		if d.Instance.Alias == "" && d.Instance.Name != "" {
			names[d.Instance.Name]++
		}
	}
	for i, d := range docs {
		n := d.Instance.Name
		if d.Instance.Alias != "" || n == "" || names[n] > 1 {
			continue
		}
		if _, dup := taken[n]; dup {
			continue
		}
		aliases[i], taken[n] = n, i
	}
	return aliases, errors.Join(errs...)
}

// resolveBackendAliases replaces a spec.backend.id that is not a UUID with
// the id of the storage backend that has that alias.
func (s *Server) resolveBackendAliases(r *http.Request, docs []manifest.Document) error {
	var byAlias map[string][]string
	var errs []error
	for _, d := range docs {
		b := d.Instance.Backend
		if b == nil || b.ID == "" || uuid.Validate(b.ID) == nil {
			continue
		}
		if byAlias == nil {
			insts, err := s.hub.ListInstances(r.Context(), store.InstanceFilter{
				Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
			}, false)
			if err != nil {
				return fmt.Errorf("list storage backends: %w", err)
			}
			byAlias = map[string][]string{}
			for _, inst := range insts {
				if inst.Alias != "" {
					byAlias[inst.Alias] = append(byAlias[inst.Alias], inst.ID)
				}
			}
		}
		switch ids := byAlias[b.ID]; len(ids) {
		case 1:
			b.ID = ids[0]
		case 0:
			errs = append(errs, &cairn.Error{Code: cairn.CodeNotFound, Subject: d.Pos.String(),
				Msg: fmt.Sprintf("spec.backend.id %q is neither an id nor the alias of a storage backend", b.ID)})
		default:
			errs = append(errs, &cairn.Error{Code: cairn.CodeInvalid, Subject: d.Pos.String(),
				Msg: fmt.Sprintf("spec.backend.id %q is the alias of several storage backends (%s); use an id", b.ID, cairn.QuoteIDs(ids))})
		}
	}
	return errors.Join(errs...)
}

// inTypeInstance is a TypeInstance as clients PUT it: the object GET
// returns, edited.
type inTypeInstance struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   inMeta `json:"metadata"`
	Spec       struct {
		TypeRef    *cairn.TypeRef         `json:"typeRef"`
		Namespace  string                 `json:"namespace"`
		Name       string                 `json:"name"`
		Alias      string                 `json:"alias"`
		Attributes []cairn.AttributeRef   `json:"attributes"`
		Value      json.RawMessage        `json:"value"`
		Backend    *inTypeInstanceBackend `json:"backend"`
	} `json:"spec"`
	Status json.RawMessage `json:"status"`
}

type inTypeInstanceBackend struct {
	ID       string          `json:"id"`
	Abstract *bool           `json:"abstract"`
	Context  json.RawMessage `json:"context"`
}

// replaceTypeInstance is PUT typeinstances/{id}: the body is the desired
// TypeInstance object. Labels, annotations and spec.attributes are replaced
// (left out: cleared); spec.value and spec.backend.context left out or null
// are carried over, since a context-only backend owns its value and a
// backend may rewrite the context it was given. What identifies the
// instance (spec.typeRef, namespace, name, alias, backend) cannot change.
// metadata.resourceVersion, when given, must be current (409 otherwise);
// a locked instance needs ?lockOwner. A body that changes nothing adds no
// resource version.
func (s *Server) replaceTypeInstance(w http.ResponseWriter, r *http.Request, req request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if body, err = bodyJSON(r, body); err != nil {
		return err
	}
	if err := checkFields(w, r, body, inTypeInstanceFields); err != nil {
		return err
	}
	var o inTypeInstance
	if err := json.Unmarshal(body, &o); err != nil {
		return errStatus{badRequest("the request body is not a valid TypeInstance: %v", err)}
	}
	cur, err := s.hub.GetInstance(r.Context(), req.name, true)
	if err != nil {
		return err
	}
	return s.writeTypeInstance(w, r, o, cur)
}

// patchTypeInstance is PATCH typeinstances/{id}: a JSON merge patch or a
// JSON patch of the object as GET serves it, written as PUT writes it.
// kubectl sends one for apply of a changed file, label, annotate and patch
// (a merge patch: it knows no strategic merge schema for this kind, as for
// a custom resource). A patch that does not set resourceVersion applies to
// whatever is current, retried when another writer got in between, as the
// API server does.
func (s *Server) patchTypeInstance(w http.ResponseWriter, r *http.Request, req request) error {
	ct, _, apply, err := s.readPatch(w, r)
	if err != nil {
		return err
	}
	switch {
	case apply != nil:
	case ct == "application/apply-patch+yaml":
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			"server-side apply is not supported for TypeInstances; use kubectl apply without --server-side")}
	default:
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json (got %q)", ct))}
	}
	id, err := s.typeInstanceID(r, req.name)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.hub.GetInstance(r.Context(), id, true)
		if err != nil {
			return asNotFound(err, req)
		}
		doc, err := json.Marshal(toTypeInstance(cur))
		if err != nil {
			return err
		}
		patched, err := apply(doc)
		if err != nil {
			return errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("the patch could not be applied: %v", err))}
		}
		if attempt == 0 {
			// Unknown fields come from the patch alone: the object as
			// served holds none.
			if err := checkFields(w, r, patched, inTypeInstanceFields); err != nil {
				return err
			}
		}
		var o inTypeInstance
		if err := json.Unmarshal(patched, &o); err != nil {
			return errStatus{badRequest("the patched object is not a valid TypeInstance: %v", err)}
		}
		explicit := o.Metadata.ResourceVersion != strconv.FormatInt(cur.Seq, 10)
		err = s.writeTypeInstance(w, r, o, cur)
		if err != nil && !explicit && attempt < maxWriteAttempts && isConflictStatus(err) {
			continue
		}
		return err
	}
}

// writeTypeInstance writes o, the desired form of the instance cur, as
// replaceTypeInstance describes, and answers with the instance written.
func (s *Server) writeTypeInstance(w http.ResponseWriter, r *http.Request, o inTypeInstance, cur cairn.Instance) error {
	if err := checkTypeInstance(o, cur); err != nil {
		return err
	}
	ifSeq, err := parseSeq(o.Metadata.ResourceVersion)
	if err != nil {
		return err
	}
	attrs := o.Spec.Attributes
	if attrs == nil {
		attrs = []cairn.AttributeRef{}
	}
	// As the hub will store them (kubectl's last-applied object without
	// secrets), so that applying the same object again changes nothing.
	annotations, err := s.hub.StoredAnnotations(r.Context(), cur.TypeRef, nonNilMap(o.Metadata.Annotations))
	if err != nil {
		return err
	}
	up := hub.UpdateInstance{
		ID:          cur.ID,
		OwnerID:     query(r).Get("lockOwner"),
		IfSeq:       ifSeq,
		Labels:      nonNilMap(o.Metadata.Labels),
		Annotations: annotations,
		Attributes:  &attrs,
		Current:     &cur, // read at this request: the hub need not read it again
	}
	changed := !sameMap(up.Labels, cur.Labels) || !sameMap(up.Annotations, cur.Annotations) || !cairn.SameAttributes(attrs, cur.Latest.Attributes)
	if len(o.Spec.Value) > 0 && string(o.Spec.Value) != "null" && !cairn.JSONEqual(o.Spec.Value, cur.Latest.Value) {
		up.Value, changed = o.Spec.Value, true
	}
	if b := o.Spec.Backend; b != nil && len(b.Context) > 0 && string(b.Context) != "null" && !cairn.JSONEqual(b.Context, cur.Latest.Context) {
		up.Context, changed = b.Context, true
	}
	if !changed {
		if ifSeq != 0 && ifSeq != cur.Seq {
			return typeInstanceConflict(cur.ID)
		}
		writeJSON(w, http.StatusOK, toTypeInstance(cur))
		return nil
	}
	out, err := s.hub.UpdateInstances(r.Context(), []hub.UpdateInstance{up})
	if err != nil {
		if cairn.HasCode(err, cairn.CodeConflict) {
			return typeInstanceConflict(cur.ID)
		}
		return err
	}
	inst, err := s.written(r, cur, out[0], up.Value)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTypeInstance(dryRunView(r, inst, &cur)))
	return nil
}

// checkTypeInstance refuses a body that is not this TypeInstance or that
// changes what cannot change, with one cause per field as Kubernetes
// reports immutable fields.
func checkTypeInstance(o inTypeInstance, cur cairn.Instance) error {
	if o.Metadata.Name != "" && o.Metadata.Name != cur.ID {
		return errStatus{badRequest("the name of the object (%s) does not match the name on the URL (%s)", o.Metadata.Name, cur.ID)}
	}
	if o.Metadata.UID != "" && o.Metadata.UID != cur.ID {
		return errStatus{newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in Object meta: %s", o.Metadata.UID, cur.ID))}
	}
	var causes []StatusCause
	invalid := func(field, msg string) {
		causes = append(causes, StatusCause{Type: "FieldValueInvalid", Field: field, Message: msg})
	}
	if o.APIVersion != "" && o.APIVersion != HubGroup+"/"+HubVersion {
		invalid("apiVersion", fmt.Sprintf("must be %s/%s, not %s", HubGroup, HubVersion, o.APIVersion))
	}
	if o.Kind != "" && o.Kind != "TypeInstance" {
		invalid("kind", "must be TypeInstance, not "+o.Kind)
	}
	immutable := func(field, got, want string) {
		if got != "" && got != want {
			invalid(field, fmt.Sprintf("Invalid value: %q: field is immutable (it is %q)", got, want))
		}
	}
	if o.Spec.TypeRef != nil {
		immutable("spec.typeRef", o.Spec.TypeRef.String(), cur.TypeRef.String())
	}
	immutable("spec.namespace", o.Spec.Namespace, cur.Namespace)
	immutable("spec.name", o.Spec.Name, cur.Name)
	immutable("spec.alias", o.Spec.Alias, cur.Alias)
	if b := o.Spec.Backend; b != nil {
		immutable("spec.backend.id", b.ID, cur.Backend.ID)
		if b.Abstract != nil && *b.Abstract != cur.Backend.Abstract {
			invalid("spec.backend.abstract", fmt.Sprintf("Invalid value: %t: field is immutable", *b.Abstract))
		}
	}
	if len(causes) == 0 {
		return nil
	}
	st := newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("TypeInstance %q is invalid: %s: %s", cur.ID, causes[0].Field, causes[0].Message))
	st.Details = &StatusDetails{Name: cur.ID, Group: HubGroup, Kind: "TypeInstance", UID: cur.ID, Causes: causes}
	return errStatus{st}
}

// typeInstanceConflict is the answer to a replace whose resourceVersion is
// not the instance's, in the API server's words.
func typeInstanceConflict(id string) error {
	st := newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on typeinstances.%s %q: the object has been modified; please apply your changes to the latest version and try again", HubGroup, id))
	st.Details = &StatusDetails{Name: id, Group: HubGroup, Kind: "typeinstances", UID: id}
	return errStatus{st}
}
