package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/manifest"
	"github.com/cairn-dev/cairn/store"
)

// serveHub serves hub.cairn.dev/v1: types, typeinstances (every instance by
// id, the Capact view) and backends.
func (s *Server) serveHub(w http.ResponseWriter, r *http.Request, req request) {
	var err error
	switch req.res.hubKind + " " + r.Method + " " + strconv.FormatBool(req.name != "") {
	case "types GET false":
		err = s.listTypes(w, r)
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
	case "typeinstances DELETE true":
		err = s.deleteTypeInstance(w, r, req)
	case "backends GET false":
		err = s.listBackends(w, r)
	case "backends GET true":
		err = s.getBackend(w, r, req)
	default:
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	if err != nil {
		writeStatus(w, statusOf(err, req.res.target(req.name)))
	}
}

// TypeName is the name of a Type object: "<path>:<revision>".
func TypeName(ref cairn.TypeRef) string { return ref.Path + ":" + ref.Revision }

type typeObject struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       typeSpec   `json:"spec"`
}

type typeSpec struct {
	Path           string          `json:"path"`
	Revision       string          `json:"revision"`
	AdditionalRefs []string        `json:"additionalRefs,omitempty"`
	JSONSchema     json.RawMessage `json:"jsonSchema,omitempty"`
	REST           *typeREST       `json:"rest,omitempty"`
}

type typeREST struct {
	Group   string       `json:"group"`
	Version string       `json:"version"`
	Names   *cairn.Names `json:"names"`
}

func toTypeObject(t cairn.Type) typeObject {
	o := typeObject{
		APIVersion: HubGroup + "/" + HubVersion,
		Kind:       "Type",
		Metadata:   objectMeta{Name: TypeName(t.Ref()), CreationTimestamp: timestamp(t.CreatedAt)},
		Spec:       typeSpec{Path: t.Path, Revision: t.Revision, AdditionalRefs: t.AdditionalRefs, JSONSchema: t.JSONSchema},
	}
	if t.Group != "" {
		o.Spec.REST = &typeREST{Group: t.Group, Version: t.Version, Names: t.Names}
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

func (s *Server) listTypes(w http.ResponseWriter, r *http.Request) error {
	f := store.TypeFilter{PathPrefix: r.URL.Query().Get("pathPrefix"), Parent: r.URL.Query().Get("parent")}
	ts, err := s.hub.ListTypes(r.Context(), f)
	if err != nil {
		return err
	}
	out := list{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeList", Items: []any{}}
	for _, t := range ts {
		out.Items = append(out.Items, toTypeObject(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getType(w http.ResponseWriter, r *http.Request, req request) error {
	ref, err := parseTypeName(req.name)
	if err != nil {
		return err
	}
	t, err := s.hub.GetType(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTypeObject(t))
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
	writeJSON(w, http.StatusCreated, list{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeList", Items: created})
	return nil
}

func (s *Server) deleteType(w http.ResponseWriter, r *http.Request, req request) error {
	ref, err := parseTypeName(req.name)
	if err != nil {
		return err
	}
	if err := s.hub.DeleteType(r.Context(), ref); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Success", Code: http.StatusOK,
		Details: &StatusDetails{Name: req.name, Group: HubGroup, Kind: "types"}})
	return nil
}

// typeInstanceObject is the Capact view of an instance, named by its id.
type typeInstanceObject struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   objectMeta         `json:"metadata"`
	Spec       typeInstanceSpec   `json:"spec"`
	Status     typeInstanceStatus `json:"status"`
}

type typeInstanceSpec struct {
	TypeRef    cairn.TypeRef        `json:"typeRef"`
	Namespace  string               `json:"namespace"`
	Name       string               `json:"name"`
	Alias      string               `json:"alias,omitempty"`
	Attributes []cairn.AttributeRef `json:"attributes,omitempty"`
	Value      json.RawMessage      `json:"value,omitempty"`
	Backend    statusBackend        `json:"backend"`
}

type typeInstanceStatus struct {
	LockedBy        string   `json:"lockedBy,omitempty"`
	CreatedBy       string   `json:"createdBy,omitempty"`
	ResourceVersion int      `json:"resourceVersion"`
	Uses            []string `json:"uses,omitempty"`
	UsedBy          []string `json:"usedBy,omitempty"`
}

func toTypeInstance(inst cairn.Instance) typeInstanceObject {
	return typeInstanceObject{
		APIVersion: HubGroup + "/" + HubVersion,
		Kind:       "TypeInstance",
		Metadata: objectMeta{Name: inst.ID, UID: inst.ID, ResourceVersion: strconv.FormatInt(inst.Seq, 10),
			Generation: int64(inst.Latest.ResourceVersion), CreationTimestamp: timestamp(inst.CreatedAt),
			Labels: inst.Labels, Annotations: inst.Annotations},
		Spec: typeInstanceSpec{TypeRef: inst.TypeRef, Namespace: inst.Namespace, Name: inst.Name, Alias: inst.Alias,
			Attributes: inst.Latest.Attributes, Value: inst.Latest.Value,
			Backend: statusBackend{ID: inst.Backend.ID, Abstract: inst.Backend.Abstract, Context: inst.Latest.Context}},
		Status: typeInstanceStatus{LockedBy: inst.LockedBy, CreatedBy: inst.Latest.CreatedBy,
			ResourceVersion: inst.Latest.ResourceVersion, Uses: inst.Uses, UsedBy: inst.UsedBy},
	}
}

func (s *Server) listTypeInstances(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := parseListOptions(r)
	if err != nil {
		return err
	}
	seq, err := s.hub.LastSeq(r.Context())
	if err != nil {
		return err
	}
	f := o.filter(req)
	if p := r.URL.Query().Get("typePath"); p != "" {
		f.TypePath = p
	}
	insts, err := s.hub.ListInstances(r.Context(), f, true)
	if err != nil {
		return err
	}
	out := list{APIVersion: HubGroup + "/" + HubVersion, Kind: "TypeInstanceList", Items: []any{},
		Metadata: listMeta{ResourceVersion: strconv.FormatInt(seq, 10)}}
	for _, inst := range insts {
		if o.matches(inst) {
			out.Items = append(out.Items, toTypeInstance(inst))
		}
	}
	if o.limit > 0 && len(insts) == o.limit {
		out.Metadata.Continue = encodeContinue(insts[len(insts)-1])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getTypeInstance(w http.ResponseWriter, r *http.Request, req request) error {
	inst, err := s.hub.GetInstance(r.Context(), req.name, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTypeInstance(inst))
	return nil
}

func (s *Server) deleteTypeInstance(w http.ResponseWriter, r *http.Request, req request) error {
	if err := s.hub.DeleteInstance(r.Context(), req.name, r.URL.Query().Get("lockOwner")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Success", Code: http.StatusOK,
		Details: &StatusDetails{Name: req.name, Group: HubGroup, Kind: "typeinstances", UID: req.name}})
	return nil
}

type backendObject struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   objectMeta  `json:"metadata"`
	Spec       backendSpec `json:"spec"`
}

type backendSpec struct {
	TypeRef       cairn.TypeRef   `json:"typeRef"`
	Alias         string          `json:"alias,omitempty"`
	URL           string          `json:"url,omitempty"`
	AcceptValue   bool            `json:"acceptValue"`
	ContextSchema json.RawMessage `json:"contextSchema"`
	Abstract      bool            `json:"abstract,omitempty"`
}

func toBackend(sb cairn.StorageBackend, inst cairn.Instance) backendObject {
	cs := sb.ContextSchema
	if cs == nil {
		cs = json.RawMessage("null")
	}
	return backendObject{
		APIVersion: HubGroup + "/" + HubVersion,
		Kind:       "Backend",
		Metadata: objectMeta{Name: sb.ID, UID: sb.ID, ResourceVersion: strconv.FormatInt(inst.Seq, 10),
			CreationTimestamp: timestamp(inst.CreatedAt), Labels: inst.Labels},
		Spec: backendSpec{TypeRef: sb.TypeRef, Alias: sb.Alias, URL: sb.URL, AcceptValue: sb.AcceptValue, ContextSchema: cs, Abstract: sb.Abstract},
	}
}

// listBackends lists the instances marked as storage backends (seed 000's
// cap.core.attribute.hub.storage.backend attribute) whose value satisfies
// the storage schema.
func (s *Server) listBackends(w http.ResponseWriter, r *http.Request) error {
	insts, err := s.hub.ListInstances(r.Context(), store.InstanceFilter{
		Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
	}, false)
	if err != nil {
		return err
	}
	out := list{APIVersion: HubGroup + "/" + HubVersion, Kind: "BackendList", Items: []any{}}
	for _, inst := range insts {
		sb, err := s.hub.StorageBackend(r.Context(), inst.ID)
		if err != nil {
			continue // not a usable backend; GET by id says why
		}
		out.Items = append(out.Items, toBackend(sb, inst))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getBackend(w http.ResponseWriter, r *http.Request, req request) error {
	inst, err := s.hub.GetInstance(r.Context(), req.name, false)
	if err != nil {
		return err
	}
	sb, err := s.hub.StorageBackend(r.Context(), req.name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toBackend(sb, inst))
	return nil
}
