package rest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// RBAC objects are served in rbac.authorization.k8s.io/v1 as the API server
// serves them, so kubectl create role|clusterrole|rolebinding|
// clusterrolebinding, get, delete and apply work. Bodies may be JSON, YAML
// or the protobuf client-go sends for built-in kinds. The hub holds the
// objects and decides (hub.CreateRBAC): the defaults and what --rbac-file
// gives are listed too, read-only.

// rbacResources are the four kinds.
func rbacResources() []*resource {
	verbs := []string{"create", "delete", "get", "list", "patch", "update"}
	none := []string{} // not in "all" nor "cairn", as in Kubernetes
	mk := func(kind string, namespaced bool) *resource {
		plural := strings.ToLower(kind) + "s"
		return &resource{group: rbacv1.GroupName, version: "v1", kind: kind, plural: plural, singular: strings.ToLower(kind),
			namespaced: namespaced, verbs: verbs, categories: none, hubKind: "rbac"}
	}
	return []*resource{
		mk(hub.KindClusterRole, false), mk(hub.KindClusterRoleBinding, false),
		mk(hub.KindRole, true), mk(hub.KindRoleBinding, true),
	}
}

// rbacCodecs decodes the RBAC kinds from JSON, YAML and protobuf; the
// strict one reports unknown and duplicate fields.
type rbacCodecs struct {
	strict runtime.Decoder
}

func newRBACCodecs() rbacCodecs {
	scheme := runtime.NewScheme()
	if err := rbacv1.AddToScheme(scheme); err != nil {
		panic(err) // static registration of generated types
	}
	metav1.AddToGroupVersion(scheme, rbacv1.SchemeGroupVersion)
	return rbacCodecs{strict: serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()}
}

var rbacCodec = newRBACCodecs()

func (s *Server) serveRBAC(w http.ResponseWriter, r *http.Request, req request) {
	var err error
	if req.sub != "" {
		writeStatus(w, notFoundStatus(fmt.Sprintf("the server could not find the requested resource: %s has no subresource %q", req.res.plural, req.sub)))
		return
	}
	switch {
	case r.Method == http.MethodGet && req.name == "":
		err = s.listRBAC(w, r, req)
	case r.Method == http.MethodGet:
		var o hub.RBACObject
		if o, err = s.hub.GetRBAC(r.Context(), req.res.kind, req.namespace, req.name); err == nil {
			s.writeRead(w, r, req.res, o)
		}
	case r.Method == http.MethodPost && req.name == "":
		err = s.writeRBAC(w, r, req, true)
	case r.Method == http.MethodPut && req.name != "":
		err = s.writeRBAC(w, r, req, false)
	case r.Method == http.MethodPatch && req.name != "":
		err = s.patchRBAC(w, r, req)
	case r.Method == http.MethodDelete && req.name != "":
		err = s.deleteRBAC(w, r, req)
	default:
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	if err != nil {
		st := statusOf(err, req.res.target(req.name))
		if st.Code == http.StatusUnprocessableEntity && cairn.HasCode(err, cairn.CodeInvalid) {
			st.Message = err.Error() // the hub's message names the object already
		}
		writeStatus(w, st)
	}
}

func (s *Server) listRBAC(w http.ResponseWriter, r *http.Request, req request) error {
	q := query(r)
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return errStatus{badRequest("labelSelector: %v", err)}
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return errStatus{badRequest("fieldSelector: %v", err)}
	}
	for _, rq := range fs.Requirements() {
		if rq.Field != "metadata.name" && rq.Field != "metadata.namespace" {
			return errStatus{badRequest("fieldSelector: field label %q is not supported: use metadata.name or metadata.namespace", rq.Field)}
		}
	}
	objs, seq, err := s.hub.ListRBAC(r.Context(), req.res.kind, req.namespace)
	if err != nil {
		return err
	}
	items := []any{}
	for _, o := range objs {
		if ls.Matches(labels.Set(o.GetLabels())) && fs.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()}) {
			items = append(items, o)
		}
	}
	meta := ListMeta{ResourceVersion: strconv.FormatInt(seq, 10)}
	tr, err := wantsTable(r)
	if err != nil {
		return err
	}
	if tr.version != "" {
		writeTable(w, tr, rbacColumns(req.res.kind), meta, items)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": rbacv1.SchemeGroupVersion.String(), "kind": req.res.kind + "List",
		"metadata": meta, "items": items})
	return nil
}

// decodeRBAC reads an object of the request's kind, applying
// fieldValidation as the API server does.
func (s *Server) decodeRBAC(w http.ResponseWriter, r *http.Request, req request, body []byte) (hub.RBACObject, error) {
	mode, err := fieldValidation(r)
	if err != nil {
		return nil, err
	}
	obj, gvk, err := rbacCodec.strict.Decode(body, nil, nil)
	if err != nil && runtime.IsStrictDecodingError(err) && obj != nil {
		if mode == "Strict" {
			return nil, errStatus{badRequest("%v", err)}
		}
		if mode == "Warn" {
			if se, ok := runtime.AsStrictDecodingError(err); ok {
				for _, e := range se.Errors() {
					addWarning(w, e.Error())
				}
			}
		}
		err = nil
	}
	if err != nil {
		return nil, errStatus{badRequest("the body is not a %s of %s: %v", req.res.kind, rbacv1.SchemeGroupVersion, err)}
	}
	o, ok := obj.(hub.RBACObject)
	if !ok || gvk.Kind != req.res.kind || gvk.GroupVersion() != rbacv1.SchemeGroupVersion {
		return nil, errStatus{badRequest("the body is a %s, not a %s of %s", gvk, req.res.kind, rbacv1.SchemeGroupVersion)}
	}
	switch ns := o.GetNamespace(); {
	case !req.res.namespaced && ns != "":
		return nil, errStatus{badRequest("a %s has no namespace (metadata.namespace is %q)", req.res.kind, ns)}
	case req.res.namespaced && ns == "":
		o.SetNamespace(req.namespace)
	case req.res.namespaced && ns != req.namespace:
		return nil, errStatus{badRequest("the namespace of the provided object (%s) does not match the namespace sent on the request (%s)", ns, req.namespace)}
	}
	if req.name != "" && o.GetName() != req.name {
		return nil, errStatus{badRequest("the name of the object (%s) does not match the name on the URL (%s)", o.GetName(), req.name)}
	}
	return o, nil
}

// readRBACBody reads a create or update body: JSON, YAML or the protobuf
// client-go sends for built-in kinds (kubectl create role).
func (s *Server) readRBACBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/yaml" && mt != "application/vnd.kubernetes.protobuf") {
			return nil, unsupportedMediaType(ct, bodyMediaTypes+", application/vnd.kubernetes.protobuf")
		}
	}
	return s.readAll(w, r)
}

func (s *Server) writeRBAC(w http.ResponseWriter, r *http.Request, req request, create bool) error {
	body, err := s.readRBACBody(w, r)
	if err != nil {
		return err
	}
	o, err := s.decodeRBAC(w, r, req, body)
	if err != nil {
		return err
	}
	if create {
		out, err := s.hub.CreateRBAC(r.Context(), o)
		if err != nil {
			req.name = o.GetName()
			st := statusOf(err, req.res.target(req.name))
			if st.Code == http.StatusUnprocessableEntity && cairn.HasCode(err, cairn.CodeInvalid) {
				st.Message = err.Error()
			}
			return errStatus{st}
		}
		writeJSON(w, http.StatusCreated, out)
		return nil
	}
	out, err := s.hub.UpdateRBAC(r.Context(), o)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// patchRBAC applies a JSON merge, JSON or strategic merge patch (what
// kubectl apply sends for built-in kinds) to the object as served.
func (s *Server) patchRBAC(w http.ResponseWriter, r *http.Request, req request) error {
	ct, body, apply, err := s.readPatch(w, r)
	if err != nil {
		return err
	}
	proto, err := hubRBACProto(req.res.kind)
	if err != nil {
		return err
	}
	switch {
	case apply != nil:
	case ct == "application/strategic-merge-patch+json":
		apply = func(doc []byte) ([]byte, error) { return strategicpatch.StrategicMergePatch(doc, body, proto) }
	case ct == "application/apply-patch+yaml":
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			"server-side apply is not supported for RBAC objects; use kubectl apply without --server-side")}
	default:
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got %q)", ct))}
	}
	for attempt := 0; ; attempt++ {
		cur, err := s.hub.GetRBAC(r.Context(), req.res.kind, req.namespace, req.name)
		if err != nil {
			return err
		}
		doc, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		patched, err := apply(doc)
		if err != nil {
			return errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("the patch could not be applied: %v", err))}
		}
		o, err := s.decodeRBAC(w, r, req, patched)
		if err != nil {
			return err
		}
		// A patch that does not set resourceVersion applies to whatever
		// is current: retry when another writer got in between.
		explicit := o.GetResourceVersion() != cur.GetResourceVersion()
		out, err := s.hub.UpdateRBAC(r.Context(), o)
		if err != nil && !explicit && attempt < maxWriteAttempts && isConflictStatus(err) {
			continue
		}
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

func hubRBACProto(kind string) (any, error) {
	switch kind {
	case hub.KindRole:
		return rbacv1.Role{}, nil
	case hub.KindClusterRole:
		return rbacv1.ClusterRole{}, nil
	case hub.KindRoleBinding:
		return rbacv1.RoleBinding{}, nil
	case hub.KindClusterRoleBinding:
		return rbacv1.ClusterRoleBinding{}, nil
	}
	return nil, fmt.Errorf("rest: unknown RBAC kind %q", kind)
}

func (s *Server) deleteRBAC(w http.ResponseWriter, r *http.Request, req request) error {
	opts, r, err := s.readDeleteOptions(w, r)
	if err != nil {
		return err
	}
	var ifRV string
	if p := opts.Preconditions; p != nil && p.ResourceVersion != nil {
		ifRV = *p.ResourceVersion
	}
	if p := opts.Preconditions; p != nil && p.UID != nil {
		cur, err := s.hub.GetRBAC(r.Context(), req.res.kind, req.namespace, req.name)
		if err != nil {
			return err
		}
		if string(cur.GetUID()) != *p.UID {
			return errStatus{newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, cur.GetUID()))}
		}
	}
	if err := s.hub.DeleteRBAC(r.Context(), req.res.kind, req.namespace, req.name, ifRV); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Success", Code: http.StatusOK,
		Details: &StatusDetails{Name: req.name, Group: rbacv1.GroupName, Kind: req.res.plural}})
	return nil
}

// rbacColumns are the API server's columns for the RBAC kinds.
func rbacColumns(kind string) []printColumn {
	created := newColumn(cairn.PrinterColumn{Name: "Created At", Type: "date", JSONPath: ".metadata.creationTimestamp", Description: "When the object was created."})
	switch kind {
	case hub.KindRole, hub.KindClusterRole:
		return []printColumn{nameColumn("Name must be unique within a namespace."), created}
	}
	return []printColumn{
		nameColumn("Name must be unique within a namespace."),
		{def: TableColumn{Name: "Role", Type: "string", Description: "RoleRef references a Role or a ClusterRole."},
			cell: func(o map[string]any) any {
				k, _ := nested(o, "roleRef", "kind").(string)
				n, _ := nested(o, "roleRef", "name").(string)
				return k + "/" + n
			}},
		newColumn(ageColumn),
		subjectsColumn("Users", "User"),
		subjectsColumn("Groups", "Group"),
		subjectsColumn("ServiceAccounts", "ServiceAccount"),
	}
}

func subjectsColumn(name, kind string) printColumn {
	return printColumn{def: TableColumn{Name: name, Type: "string", Priority: 1, Description: "Subjects of kind " + kind + "."},
		cell: func(o map[string]any) any {
			subs, _ := o["subjects"].([]any)
			var names []string
			for _, s := range subs {
				m, _ := s.(map[string]any)
				if m["kind"] != kind {
					continue
				}
				n, _ := m["name"].(string)
				if ns, _ := m["namespace"].(string); kind == "ServiceAccount" && ns != "" {
					n = ns + "/" + n
				}
				names = append(names, n)
			}
			return strings.Join(names, ", ")
		}}
}
