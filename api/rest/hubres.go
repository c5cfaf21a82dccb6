package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
	"github.com/cairn-dev/cairn/store"
)

// serveHub serves hub.cairn.dev/v1: types, typeinstances (every instance by
// id, the Capact view) and backends.
func (s *Server) serveHub(w http.ResponseWriter, r *http.Request, req request) {
	var err error
	switch req.res.hubKind + " " + r.Method + " " + strconv.FormatBool(req.name != "") {
	case "types GET false":
		err = s.listTypes(w, r, req)
	case "types GET true":
		err = s.getType(w, r, req)
	case "types POST false":
		err = s.createTypes(w, r)
	case "types DELETE true":
		err = s.deleteType(w, r, req)
	case "typeinstances GET false":
		if isWatch(r) {
			err = s.watch(w, r, req)
		} else {
			err = s.listTypeInstances(w, r, req)
		}
	case "typeinstances GET true":
		err = s.getTypeInstance(w, r, req)
	case "typeinstances POST false":
		err = s.createTypeInstances(w, r)
	case "typeinstances PUT true":
		err = s.replaceTypeInstance(w, r, req)
	case "typeinstances PATCH true":
		err = s.patchTypeInstance(w, r, req)
	case "typeinstances DELETE false":
		err = s.deleteCollection(w, r, req)
	case "typeinstances DELETE true":
		err = s.deleteTypeInstance(w, r, req)
	case "backends GET false":
		err = s.listBackends(w, r, req)
	case "backends GET true":
		err = s.getBackend(w, r, req)
	case "lockrequests POST false":
		err = s.lockRequest(w, r)
	case "stacks GET false":
		err = s.listStacks(w, r, req)
	case "stacks GET true":
		err = s.getStack(w, r, req)
	case "stacks POST false":
		err = s.createStack(w, r)
	case "plans POST false":
		err = s.createPlan(w, r)
	case "installs POST false":
		err = s.createInstall(w, r)
	case "proposals GET false":
		err = s.listProposals(w, r, req)
	case "proposals GET true":
		err = s.getProposal(w, r, req)
	case "policies GET false":
		err = s.listPolicies(w, r, req)
	case "policies GET true", "policies PUT true":
		err = s.servePolicy(w, r, req)
	default:
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	if err != nil {
		writeStatus(w, statusOf(err, req.res.target(req.name)))
	}
}

// asNotFound words the hub's NotFound of the object a request names as
// the API server does (`types.hub.cairn.dev "x:1.0.0" not found`), the
// text kubectl prints and clients match.
func asNotFound(err error, req request) error {
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return errStatus{notFoundObject(req.res, req.name)}
	}
	return err
}

// TypeName is the name of a Type object: "<path>:<revision>".
func TypeName(ref cairn.TypeRef) string { return ref.Path + ":" + ref.Revision }

// TypeObject is a Type served in hub.cairn.dev/v1.
type TypeObject struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       TypeSpec   `json:"spec"`
}

// TypeSpec is a Type's definition.
type TypeSpec struct {
	Path           string          `json:"path"`
	Revision       string          `json:"revision"`
	AdditionalRefs []string        `json:"additionalRefs,omitempty"`
	JSONSchema     json.RawMessage `json:"jsonSchema,omitempty"`
	REST           *TypeREST       `json:"rest,omitempty"`
}

// TypeREST holds a Type's REST names.
type TypeREST struct {
	Group   string       `json:"group"`
	Version string       `json:"version"`
	Names   *cairn.Names `json:"names"`
	// AdditionalPrinterColumns are the columns kubectl get prints.
	AdditionalPrinterColumns []cairn.PrinterColumn `json:"additionalPrinterColumns,omitempty"`
}

func toTypeObject(t cairn.Type) TypeObject {
	o := TypeObject{
		APIVersion: HubGroup + "/" + HubVersion,
		Kind:       "Type",
		Metadata:   ObjectMeta{Name: TypeName(t.Ref()), CreationTimestamp: timestamp(t.CreatedAt)},
		Spec:       TypeSpec{Path: t.Path, Revision: t.Revision, AdditionalRefs: t.AdditionalRefs, JSONSchema: t.JSONSchema},
	}
	if t.Group != "" {
		o.Spec.REST = &TypeREST{Group: t.Group, Version: t.Version, Names: t.Names, AdditionalPrinterColumns: t.PrinterColumns}
	}
	return o
}

func parseTypeName(name string) (cairn.TypeRef, error) {
	path, rev, ok := strings.Cut(name, ":")
	if !ok || path == "" || rev == "" {
		return cairn.TypeRef{}, errStatus{notFoundStatus(fmt.Sprintf("types.%s %q not found: Type names are <path>:<revision>", HubGroup, name))}
	}
	return cairn.TypeRef{Path: path, Revision: rev}, nil
}

func (s *Server) listTypes(w http.ResponseWriter, r *http.Request, req request) error {
	f := store.TypeFilter{PathPrefix: query(r).Get("pathPrefix"), Parent: query(r).Get("parent")}
	ts, err := s.hub.ListTypes(r.Context(), f)
	if err != nil {
		return err
	}
	out := List{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeList", Items: []any{}}
	for _, t := range ts {
		out.Items = append(out.Items, toTypeObject(t))
	}
	s.writeRead(w, r, req.res, out)
	return nil
}

func (s *Server) getType(w http.ResponseWriter, r *http.Request, req request) error {
	ref, err := parseTypeName(req.name)
	if err != nil {
		return err
	}
	t, err := s.hub.GetType(r.Context(), ref)
	if err != nil {
		return asNotFound(err, req)
	}
	s.writeRead(w, r, req.res, toTypeObject(t))
	return nil
}

// createTypes accepts a cairn Type document, a Capact OCF Type or a cup
// ResourceDefinition (one Type per version). It answers with the first
// Type created, or a TypeList when the document held several.
func (s *Server) createTypes(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	docs, err := manifest.Decode(bytes.NewReader(body), "request body")
	if err != nil {
		return err
	}
	var created []any
	for _, d := range docs {
		if d.Kind != manifest.KindType {
			return errStatus{badRequest("only Type documents (cairn Type, Capact OCF Type or cup ResourceDefinition) can be created here, not %s", d.Kind)}
		}
		t, err := s.hub.CreateType(r.Context(), *d.Type)
		if err != nil {
			return err
		}
		created = append(created, toTypeObject(t))
	}
	if len(created) == 1 {
		writeJSON(w, http.StatusCreated, created[0])
		return nil
	}
	writeJSON(w, http.StatusCreated, List{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeList", Items: created})
	return nil
}

func (s *Server) deleteType(w http.ResponseWriter, r *http.Request, req request) error {
	_, r, err := s.readDeleteOptions(w, r)
	if err != nil {
		return err
	}
	ref, err := parseTypeName(req.name)
	if err != nil {
		return err
	}
	if err := s.hub.DeleteType(r.Context(), ref); err != nil {
		return asNotFound(err, req)
	}
	writeJSON(w, http.StatusOK, Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Success", Code: http.StatusOK,
		Details: &StatusDetails{Name: req.name, Group: HubGroup, Kind: "types"}})
	return nil
}

// TypeInstanceObject is the Capact view of an instance, named by its id.
type TypeInstanceObject struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   ObjectMeta         `json:"metadata"`
	Spec       TypeInstanceSpec   `json:"spec"`
	Status     TypeInstanceStatus `json:"status"`
}

// TypeInstanceSpec is an instance in the Capact view.
type TypeInstanceSpec struct {
	TypeRef    cairn.TypeRef        `json:"typeRef"`
	Namespace  string               `json:"namespace"`
	Name       string               `json:"name"`
	Alias      string               `json:"alias,omitempty"`
	Attributes []cairn.AttributeRef `json:"attributes,omitempty"`
	Value      json.RawMessage      `json:"value,omitempty"`
	Backend    StatusBackend        `json:"backend"`
}

// TypeInstanceStatus is what the hub tracks beside the value.
type TypeInstanceStatus struct {
	LockedBy        string   `json:"lockedBy,omitempty"`
	CreatedBy       string   `json:"createdBy,omitempty"`
	ResourceVersion int      `json:"resourceVersion"`
	Uses            []string `json:"uses,omitempty"`
	UsedBy          []string `json:"usedBy,omitempty"`
}

func toTypeInstance(inst cairn.Instance) TypeInstanceObject {
	return TypeInstanceObject{
		APIVersion: HubGroup + "/" + HubVersion,
		Kind:       "TypeInstance",
		Metadata: ObjectMeta{Name: inst.ID, UID: inst.ID, ResourceVersion: formatSeq(inst.Seq),
			Generation: int64(inst.Latest.ResourceVersion), CreationTimestamp: timestamp(inst.CreatedAt),
			Labels: inst.Labels, Annotations: inst.Annotations},
		Spec: TypeInstanceSpec{TypeRef: inst.TypeRef, Namespace: inst.Namespace, Name: inst.Name, Alias: inst.Alias,
			Attributes: inst.Latest.Attributes, Value: inst.Latest.Value,
			Backend: StatusBackend{ID: inst.Backend.ID, Abstract: inst.Backend.Abstract, Context: inst.Latest.Context}},
		Status: TypeInstanceStatus{LockedBy: inst.LockedBy, CreatedBy: inst.Latest.CreatedBy,
			ResourceVersion: inst.Latest.ResourceVersion, Uses: inst.Uses, UsedBy: inst.UsedBy},
	}
}

func (s *Server) listTypeInstances(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := parseListOptions(r, req.res)
	if err != nil {
		return err
	}
	if err := s.resolveSelectedID(r, &o); err != nil {
		return err
	}
	seq, err := s.hub.LastSeq(r.Context())
	if err != nil {
		return err
	}
	f, err := o.pageFilter(req)
	if err != nil {
		return err
	}
	if err := hubListFilter(r, &f); err != nil {
		return err
	}
	tr, cols, values, err := s.listShape(r, req, o)
	if err != nil {
		return err
	}
	insts, _, err := s.hub.ListInstancesWith(r.Context(), f, hub.ListOptions{Values: values, Secrets: o.values})
	if err != nil {
		return listErr(err, req.res, tr)
	}
	if !values {
		withoutValues(insts)
	}
	insts, more := o.page(insts)
	out := List{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeInstanceList", Items: []any{},
		Metadata: ListMeta{ResourceVersion: strconv.FormatInt(seq, 10)}}
	if more {
		out.Metadata.Continue = encodeContinue(insts[len(insts)-1], f.Order)
	}
	if tr.version != "" {
		matched := slices.DeleteFunc(insts, func(inst cairn.Instance) bool { return !o.matches(&inst) })
		return s.writeRows(w, tr, cols, req.res, out.Metadata, matched, values, func(insts []cairn.Instance) ([]any, error) {
			objs := make([]any, len(insts))
			for i := range insts {
				objs[i] = toTypeInstance(insts[i])
			}
			return objs, nil
		})
	}
	for i := range insts {
		if o.matches(&insts[i]) {
			out.Items = append(out.Items, toTypeInstance(insts[i]))
		}
	}
	writeReadAs(w, tr, cols, out)
	return nil
}

// typeInstanceID resolves typeinstances/{name}: an id, or the name of
// exactly one instance (the readable name kubectl get ti shows). Most ids
// are UUIDs; the hub gives a few of its own instances readable ids
// (Terraform states and outputs: terraformoutput.default.network-ip),
// which are tried as ids before names.
func (s *Server) typeInstanceID(r *http.Request, name string) (string, error) {
	if uuid.Validate(name) == nil {
		return name, nil
	}
	if strings.Count(name, ".") >= 2 {
		found, err := s.hub.GetInstances(r.Context(), []string{name})
		if err != nil {
			return "", err
		}
		if len(found) == 1 {
			return name, nil
		}
	}
	insts, err := s.hub.ListInstances(r.Context(), store.InstanceFilter{Name: name, Limit: 10}, false)
	if err != nil {
		return "", err
	}
	switch len(insts) {
	case 1:
		return insts[0].ID, nil
	case 0:
		return "", errStatus{notFoundStatus(fmt.Sprintf("typeinstances.%s %q not found", HubGroup, name))}
	}
	ids := make([]string, len(insts))
	for i, in := range insts {
		ids[i] = in.ID
	}
	return "", errStatus{notFoundStatus(fmt.Sprintf("typeinstances.%s %q is ambiguous: several TypeInstances are named so (of different Types or namespaces); use an id: %s", HubGroup, name, strings.Join(ids, ", ")))}
}

// resolveSelectedID reads a TypeInstance field selector's metadata.name
// as GET typeinstances/{name} reads its name: an id, or the name of
// exactly one instance. kubectl addresses an object by the name it was
// given (kubectl get ti NAME -w, wait ti/NAME, delete --wait), then
// lists and watches it with fieldSelector=metadata.name=NAME. One that
// names no instance, or several, selects nothing.
func (s *Server) resolveSelectedID(r *http.Request, o *listOptions) error {
	if o.fieldID == "" || uuid.Validate(o.fieldID) == nil {
		return nil
	}
	id, err := s.typeInstanceID(r, o.fieldID)
	if es, ok := errors.AsType[errStatus](err); ok && es.st.Code == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	o.fieldID = id
	return nil
}

func (s *Server) getTypeInstance(w http.ResponseWriter, r *http.Request, req request) error {
	id, err := s.typeInstanceID(r, req.name)
	if err != nil {
		return err
	}
	inst, err := s.hub.GetInstance(r.Context(), id, true)
	if err != nil {
		return asNotFound(err, req)
	}
	if _, err := s.hub.HideSecrets(r.Context(), &inst, req.res.objectAttrs(req.namespace, req.name)); err != nil {
		return err
	}
	s.writeRead(w, r, req.res, toTypeInstance(inst))
	return nil
}

func (s *Server) deleteTypeInstance(w http.ResponseWriter, r *http.Request, req request) error {
	opts, r, err := s.readDeleteOptions(w, r)
	if err != nil {
		return err
	}
	id, err := s.typeInstanceID(r, req.name)
	if err != nil {
		return err
	}
	// Preconditions as on every other resource, so a client deletes what
	// it read or nothing (the web console sends them).
	ifSeq, err := deletePreconditions(r, opts, id)
	if err != nil {
		return err
	}
	if opts.orphan() {
		inst, err := s.hub.GetInstance(r.Context(), id, false)
		if err != nil {
			return asNotFound(err, req)
		}
		if err := s.refuseOrphan(r.Context(), opts, "TypeInstance", req.name, inst); err != nil {
			return err
		}
	}
	if err := s.hub.DeleteInstanceIf(r.Context(), id, query(r).Get("lockOwner"), ifSeq); err != nil {
		return asNotFound(err, req)
	}
	writeJSON(w, http.StatusOK, Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Success", Code: http.StatusOK,
		Details: &StatusDetails{Name: req.name, Group: HubGroup, Kind: "typeinstances", UID: id}})
	return nil
}

// BackendObject is a storage backend served in hub.cairn.dev/v1.
type BackendObject struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   ObjectMeta  `json:"metadata"`
	Spec       BackendSpec `json:"spec"`
}

// BackendSpec is a backend's storage description.
type BackendSpec struct {
	TypeRef       cairn.TypeRef   `json:"typeRef"`
	Alias         string          `json:"alias,omitempty"`
	URL           string          `json:"url,omitempty"`
	AcceptValue   bool            `json:"acceptValue"`
	ContextSchema json.RawMessage `json:"contextSchema"`
	Abstract      bool            `json:"abstract,omitempty"`
}

func toBackend(sb cairn.StorageBackend, inst cairn.Instance) BackendObject {
	cs := sb.ContextSchema
	if cs == nil {
		cs = json.RawMessage("null")
	}
	return BackendObject{
		APIVersion: HubGroup + "/" + HubVersion,
		Kind:       "Backend",
		Metadata: ObjectMeta{Name: sb.ID, UID: sb.ID, ResourceVersion: strconv.FormatInt(inst.Seq, 10),
			CreationTimestamp: timestamp(inst.CreatedAt), Labels: inst.Labels},
		Spec: BackendSpec{TypeRef: sb.TypeRef, Alias: sb.Alias, URL: sb.URL, AcceptValue: sb.AcceptValue, ContextSchema: cs, Abstract: sb.Abstract},
	}
}

// listBackends lists the instances marked as storage backends (seed 000's
// cap.core.attribute.hub.storage.backend attribute) whose value satisfies
// the storage schema.
func (s *Server) listBackends(w http.ResponseWriter, r *http.Request, req request) error {
	insts, err := s.hub.ListInstances(r.Context(), store.InstanceFilter{
		Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
	}, false)
	if err != nil {
		return err
	}
	out := List{APIVersion: HubGroup + "/" + HubVersion, Kind: "BackendList", Items: []any{}}
	for _, inst := range insts {
		sb, err := s.hub.StorageBackend(r.Context(), inst.ID)
		if err != nil {
			continue // not a usable backend; GET by id says why
		}
		out.Items = append(out.Items, toBackend(sb, inst))
	}
	s.writeRead(w, r, req.res, out)
	return nil
}

func (s *Server) getBackend(w http.ResponseWriter, r *http.Request, req request) error {
	inst, err := s.hub.GetInstance(r.Context(), req.name, false)
	if err != nil {
		return asNotFound(err, req)
	}
	if !inst.IsStorageBackend() {
		// An instance that is no storage backend is no Backend object
		// (the list leaves it out too).
		st := notFoundObject(req.res, req.name)
		st.Message += fmt.Sprintf(": TypeInstance %q is not a storage backend (it lacks the attribute %s)", inst.ID, cairn.StorageAttributePath)
		return errStatus{st}
	}
	sb, err := s.hub.StorageBackend(r.Context(), req.name)
	if err != nil {
		return err
	}
	s.writeRead(w, r, req.res, toBackend(sb, inst))
	return nil
}

// LockRequest locks or unlocks instances, all or nothing:
//
//	{"apiVersion": "hub.cairn.dev/v1", "kind": "LockRequest",
//	 "spec": {"action": "Lock", "ids": ["<id>", ...], "owner": "alice"}}
//
// action is Lock (default) or Unlock. The answer echoes the request with
// status.succeeded; refusals are Status errors (404 naming missing ids, 409
// naming ids locked by another owner).
type LockRequest struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]any    `json:"metadata,omitempty"`
	Spec       LockRequestSpec   `json:"spec"`
	Status     LockRequestStatus `json:"status"`
}

// LockRequestSpec says what to lock or unlock.
type LockRequestSpec struct {
	Action string   `json:"action,omitempty"`
	IDs    []string `json:"ids"`
	Owner  string   `json:"owner"`
}

// LockRequestStatus reports the outcome.
type LockRequestStatus struct {
	Succeeded bool `json:"succeeded"`
}

func (s *Server) lockRequest(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if body, err = bodyJSON(r, body); err != nil {
		return err
	}
	var lr LockRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lr); err != nil {
		return errStatus{badRequest("the LockRequest is not valid: %v", err)}
	}
	switch lr.Spec.Action {
	case "", "Lock":
		lr.Spec.Action = "Lock"
		err = s.hub.LockInstances(r.Context(), lr.Spec.IDs, lr.Spec.Owner)
	case "Unlock":
		err = s.hub.UnlockInstances(r.Context(), lr.Spec.IDs, lr.Spec.Owner)
	default:
		return errStatus{badRequest("spec.action %q: want Lock or Unlock", lr.Spec.Action)}
	}
	if err != nil {
		return err
	}
	lr.APIVersion, lr.Kind, lr.Status.Succeeded = HubGroup+"/"+HubVersion, "LockRequest", true
	writeJSON(w, http.StatusCreated, lr)
	return nil
}
