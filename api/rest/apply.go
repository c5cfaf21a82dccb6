package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// Server-side apply and field ownership are the API server's own code:
// k8s.io/apimachinery's managedfields FieldManager (on
// sigs.k8s.io/structured-merge-diff), set up as the API server sets it up
// for a custom resource. What the façade adds is the translation between
// an instance and the object the field manager sees:
// {apiVersion, kind, metadata {name, namespace, uid, resourceVersion,
// generation, creationTimestamp, labels, annotations, managedFields}, spec}.
// status is the hub's and is never owned, as a custom resource's status
// is not owned through its main resource.

// fieldManager returns the resource's field manager, built once from the
// OpenAPI schema cairn serves for it. A schema structured-merge-diff cannot
// take (JSON Schema beyond what a structural schema allows) falls back to
// a deduced type: every field still has an owner, lists are atomic.
func (r *resource) fieldManager() (*managedfields.FieldManager, error) {
	r.fmOnce.Do(func() {
		gvk := r.gvk()
		tc, err := typeConverter(r)
		if err != nil {
			tc = managedfields.NewDeducedTypeConverter()
		}
		r.fm, r.fmErr = managedfields.NewDefaultCRDFieldManager(tc, objectConvertor{}, objectDefaulter{}, objectCreater{},
			gvk, gvk.GroupVersion(), "", nil)
	})
	return r.fm, r.fmErr
}

func (r *resource) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.group, Version: r.version, Kind: r.kind}
}

// typeConverter builds a structured-merge-diff type from the kind's OpenAPI
// schema, as the API server does from a CRD's.
func typeConverter(r *resource) (managedfields.TypeConverter, error) {
	gvk := []map[string]string{{"group": r.group, "version": r.version, "kind": r.kind}}
	docs := metaSchemas()
	docs[schemaName(r.group, r.version, r.kind)] = kindSchema(r, gvk)
	schemas := map[string]*spec.Schema{}
	for name, d := range docs {
		raw, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		var s spec.Schema
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		schemas[name] = &s
	}
	return managedfields.NewTypeConverter(schemas, true)
}

// objectConvertor converts between versions of a kind that has one: an
// instance belongs to one Type revision, served at one version.
type objectConvertor struct{}

func (objectConvertor) Convert(in, out, _ any) error {
	u, ok1 := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	o.Object = u.DeepCopy().Object
	return nil
}

func (objectConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%s cannot be converted to %v: cairn serves each kind at one version", u.GroupVersionKind(), gv)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(target)
	return out, nil
}

func (objectConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// objectDefaulter: cairn fills no defaults into objects.
type objectDefaulter struct{}

func (objectDefaulter) Default(runtime.Object) {}

type objectCreater struct{}

func (objectCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// managedObject is the object the field manager sees for an instance:
// what decoding its served JSON without status gives, built without
// encoding and decoding the metadata (TestManagedObjectAsDecoded).
func managedObject(res *resource, inst cairn.Instance) (*unstructured.Unstructured, error) {
	o := toObject(res, inst)
	m := o.Metadata
	md := map[string]any{"name": m.Name, "resourceVersion": m.ResourceVersion}
	setString(md, "namespace", m.Namespace)
	setString(md, "uid", m.UID)
	setString(md, "creationTimestamp", m.CreationTimestamp)
	setString(md, "deletionTimestamp", m.DeletionTimestamp)
	if m.Generation != 0 {
		md["generation"] = m.Generation
	}
	if len(m.Labels) > 0 {
		md["labels"] = stringMap(m.Labels)
	}
	if len(m.Annotations) > 0 {
		md["annotations"] = stringMap(m.Annotations)
	}
	if len(m.Finalizers) > 0 {
		fs := make([]any, len(m.Finalizers))
		for i, f := range m.Finalizers {
			fs[i] = f
		}
		md["finalizers"] = fs
	}
	obj := map[string]any{"apiVersion": o.APIVersion, "kind": o.Kind, "metadata": md}
	if err := setDecoded(md, "managedFields", m.ManagedFields); err != nil {
		return nil, fmt.Errorf("the object of %s %q for field management: %w", res.kind, inst.Name, err)
	}
	if err := setDecoded(obj, "spec", o.Spec); err != nil {
		return nil, fmt.Errorf("the object of %s %q for field management: %w", res.kind, inst.Name, err)
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

func setString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// setDecoded sets m[k] to raw decoded as unstructured objects decode it
// (integers as int64), when raw is not empty.
func setDecoded(m map[string]any, k string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := utiljson.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%s: %w", k, err)
	}
	m[k] = v
	return nil
}

// desiredObject is the object a create, replace or patch asks for, in the
// form managedObject gives.
func desiredObject(res *resource, name, namespace string, o inObject) (*unstructured.Unstructured, error) {
	m := map[string]any{"apiVersion": res.apiVersion(), "kind": res.kind}
	md := map[string]any{"name": name, "namespace": namespace}
	if len(o.Metadata.Labels) > 0 {
		md["labels"] = stringMap(o.Metadata.Labels)
	}
	if a := storedAnnotations(o.Metadata.Annotations); len(a) > 0 {
		md["annotations"] = stringMap(a)
	}
	if len(o.Metadata.ManagedFields) > 0 && string(o.Metadata.ManagedFields) != "null" {
		var mf any
		if err := json.Unmarshal(o.Metadata.ManagedFields, &mf); err != nil {
			return nil, errStatus{badRequest("metadata.managedFields is not valid: %v", err)}
		}
		md["managedFields"] = mf
	}
	m["metadata"] = md
	if len(o.Spec) > 0 && string(o.Spec) != "null" {
		var v any
		if err := json.Unmarshal(o.Spec, &v); err != nil {
			return nil, errStatus{badRequest("spec is not valid JSON: %v", err)}
		}
		m["spec"] = v
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// managerOf is the field manager of a request: ?fieldManager, else the
// User-Agent's product, as the API server names it.
func managerOf(r *http.Request) string {
	if m := query(r).Get("fieldManager"); m != "" {
		return m
	}
	m, _, _ := strings.Cut(r.Header.Get("User-Agent"), "/")
	if len(m) > 128 {
		m = m[:128]
	}
	return m
}

// checkManager refuses a fieldManager the API server refuses.
func checkManager(r *http.Request, apply bool) error {
	m, given := query(r)["fieldManager"]
	if apply && (!given || m[0] == "") {
		return invalidOption("PatchOptions", "fieldManager", "Required value: is required for apply patch")
	}
	if given && len(m[0]) > 128 {
		return invalidOption("PatchOptions", "fieldManager", "Too long: may not be more than 128 bytes")
	}
	return nil
}

func invalidOption(kind, field, msg string) error {
	st := newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("%s.meta.k8s.io \"\" is invalid: %s: %s", kind, field, msg))
	st.Details = &StatusDetails{Group: "meta.k8s.io", Kind: kind, Causes: []StatusCause{{Type: "FieldValueInvalid", Field: field, Message: msg}}}
	return errStatus{st}
}

// trackUpdate returns the managed fields after a non-apply write that turns
// live (nil for a create) into desired, as the API server records them.
// Managed fields it cannot compute are kept as they were, as the API
// server keeps them, rather than failing the write.
func (s *Server) trackUpdate(r *http.Request, res *resource, live *cairn.Instance, desired *unstructured.Unstructured) json.RawMessage {
	return s.trackLiveUpdate(r, res, live, desired, false)
}

// trackLiveUpdate is trackUpdate; with liveFields, desired carries no
// managed fields: it was sent with live's, or with none, which makes the
// field manager take live's.
func (s *Server) trackLiveUpdate(r *http.Request, res *resource, live *cairn.Instance, desired *unstructured.Unstructured, liveFields bool) json.RawMessage {
	fm, err := res.fieldManager()
	if err != nil {
		return nil
	}
	var liveObj *unstructured.Unstructured
	if live == nil {
		liveObj = &unstructured.Unstructured{Object: map[string]any{}}
		liveObj.SetGroupVersionKind(res.gvk())
	} else if liveObj, err = managedObject(res, *live); err != nil {
		return nil
	}
	manager := managerOf(r)
	var key string
	if liveFields {
		moved, err := moveManagedFields(liveObj, desired, live.ManagedFields)
		if err != nil {
			return nil
		}
		if moved {
			key = res.fmMemo.key(manager, live.ManagedFields, liveObj, desired)
			if mf, ok := res.fmMemo.get(key); ok {
				return mf
			}
		}
	}
	out, err := fm.Update(liveObj, desired, manager)
	if err != nil {
		s.log.WarnContext(r.Context(), "managed fields not updated", "kind", res.kind, "err", hideValues(err.Error()))
		return nil
	}
	mf := encodeManagedFields(out)
	res.fmMemo.put(key, mf)
	return mf
}

// moveManagedFields gives desired the managed fields raw, which live
// has: the field manager takes desired's and compares live with desired
// without them. Moved from live (moved is true) when nobody owns a field
// of them (their ownership would be dropped by the comparison) and they
// hold strings only (decoded for desired, numbers would be float64): the
// field manager's result is the same, without decoding them again and
// walking them in the live object (TestLiveFieldsUpdateAsBefore).
func moveManagedFields(live, desired *unstructured.Unstructured, raw json.RawMessage) (moved bool, err error) {
	liveMeta, _ := live.Object["metadata"].(map[string]any)
	desiredMeta, _ := desired.Object["metadata"].(map[string]any)
	if liveMeta == nil || desiredMeta == nil {
		return false, fmt.Errorf("no metadata")
	}
	if v, ok := liveMeta["managedFields"]; ok && v != nil && stringsOnly(v) && !bytes.Contains(raw, []byte("f:managedFields")) {
		desiredMeta["managedFields"] = v
		delete(liveMeta, "managedFields")
		return true, nil
	}
	if string(raw) == "null" {
		return false, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, err
	}
	desiredMeta["managedFields"] = v
	return false, nil
}

// stringsOnly reports whether v, decoded JSON, holds no number, boolean or
// null.
func stringsOnly(v any) bool {
	switch v := v.(type) {
	case string:
		return true
	case map[string]any:
		for _, e := range v {
			if !stringsOnly(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !stringsOnly(e) {
				return false
			}
		}
		return true
	}
	return false
}

// encodeManagedFields returns the managed fields the field manager set on
// obj, as json.Marshal writes []metav1.ManagedFieldsEntry: entries whose
// form is the one the field manager writes are encoded from the
// unstructured object as they are, others through the converter
// (TestEncodeManagedFieldsAsConverted).
func encodeManagedFields(obj runtime.Object) json.RawMessage {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	if raw, ok := managedFieldsOf(u); ok {
		return raw
	}
	return convertManagedFields(u)
}

// convertManagedFields is encodeManagedFields through the unstructured
// converter.
func convertManagedFields(u *unstructured.Unstructured) json.RawMessage {
	mf := u.GetManagedFields()
	if mf == nil {
		return json.RawMessage(`[]`)
	}
	raw, err := json.Marshal(mf)
	if err != nil {
		return nil
	}
	return raw
}

// managedFieldsOf encodes u's managed fields when every entry holds
// strings where the converter wants them (a time in RFC 3339) and a
// fieldsV1 object; ok is false otherwise.
func managedFieldsOf(u *unstructured.Unstructured) (json.RawMessage, bool) {
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return nil, false
	}
	items, ok := md["managedFields"].([]any)
	if !ok {
		return nil, false
	}
	out := make([]metav1.ManagedFieldsEntry, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, false
		}
		e := &out[i]
		for k, v := range m {
			if k == "fieldsV1" {
				fm, ok := v.(map[string]any)
				if !ok {
					return nil, false
				}
				raw, err := json.Marshal(fm)
				if err != nil {
					return nil, false
				}
				e.FieldsV1 = &metav1.FieldsV1{}
				if err := e.FieldsV1.UnmarshalJSON(raw); err != nil {
					return nil, false
				}
				continue
			}
			s, ok := v.(string)
			if !ok {
				return nil, false
			}
			switch k {
			case "manager":
				e.Manager = s
			case "operation":
				e.Operation = metav1.ManagedFieldsOperationType(s)
			case "apiVersion":
				e.APIVersion = s
			case "fieldsType":
				e.FieldsType = s
			case "subresource":
				e.Subresource = s
			case "time":
				t, err := time.Parse(time.RFC3339, s)
				if err != nil {
					return nil, false
				}
				e.Time = &metav1.Time{Time: t.Local()}
			default:
				return nil, false
			}
		}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, false
	}
	return raw, true
}

// apply is a server-side apply (PATCH application/apply-patch+yaml): the
// body is the manager's whole intent; the field manager merges it with
// the live object, refusing with 409 to take fields another manager owns
// unless ?force=true, and the merged object is created or written. A
// write that lost a race with another writer is computed again on the new
// live object, as the API server does.
func (s *Server) apply(w http.ResponseWriter, r *http.Request, req request, body []byte) error {
	if req.sub != "" {
		// A grant of the status subresource covers status alone, and an
		// apply configuration cannot own status (the hub's): the apply
		// would write the spec, or create the object, instead.
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType", fmt.Sprintf(
			"server-side apply of the %s subresource is not supported: %s is the hub's and an apply configuration cannot own it; "+
				"write it with PUT or a merge or JSON patch (kubectl patch --subresource=%s --type=merge)", req.sub, req.sub, req.sub))}
	}
	if err := checkManager(r, true); err != nil {
		return err
	}
	force := false
	if f := query(r).Get("force"); f != "" {
		b, err := strconv.ParseBool(f)
		if err != nil {
			return errStatus{badRequest("force %q is not a boolean", f)}
		}
		force = b
	}
	patch := &unstructured.Unstructured{Object: map[string]any{}}
	if err := yaml.Unmarshal(body, &patch.Object); err != nil {
		return errStatus{badRequest("error decoding YAML: %v", err)}
	}
	if patch.Object == nil {
		return errStatus{badRequest("the apply patch is empty: it must be an object with apiVersion, kind and metadata.name")}
	}
	if err := checkFields(w, r, mustJSON(patch.Object), inObjectFields); err != nil {
		return err
	}
	// status is the hub's: an apply configuration cannot own it.
	unstructured.RemoveNestedField(patch.Object, "status")
	if n := patch.GetName(); n != "" && n != req.name {
		return errStatus{badRequest("the name of the object (%s) does not match the name on the URL (%s)", n, req.name)}
	}
	if !req.res.namespaced {
		// As the API server does for a cluster-scoped kind (clearNamespace).
		patch.SetNamespace("")
	}
	if ns := patch.GetNamespace(); ns != "" && ns != req.namespace {
		return errStatus{badRequest("the namespace of the object (%s) does not match the namespace on the request (%s)", ns, req.namespace)}
	}
	// A resourceVersion in the configuration is a precondition, checked
	// and never retried; without one the apply goes to whatever is live.
	ifSeq, err := parseSeq(patch.GetResourceVersion())
	if err != nil {
		return err
	}
	fm, err := req.res.fieldManager()
	if err != nil {
		return fmt.Errorf("field manager of %s: %w", req.res.kind, err)
	}
	manager := managerOf(r)
	for attempt := 0; ; attempt++ {
		cur, err := s.instance(r, req)
		found := err == nil
		var live runtime.Object
		switch {
		case found:
			if live, err = managedObject(req.res, cur); err != nil {
				return err
			}
		case isNotFoundStatus(err) && ifSeq == 0:
			live, _ = objectCreater{}.New(req.res.gvk())
		default:
			return err
		}
		if ifSeq != 0 && ifSeq != cur.Seq {
			return s.conflictStatus(req, cairn.Errorf(cairn.CodeConflict, "resourceVersion %d is not current", ifSeq))
		}
		merged, err := fm.Apply(live, patch.DeepCopy(), manager, force)
		if err != nil {
			return applyError(err)
		}
		u := merged.(*unstructured.Unstructured)
		o, err := inObjectOf(u)
		if err != nil {
			return err
		}
		mf := encodeManagedFields(u)
		if !found {
			if err := s.authorizeCreate(r, req); err != nil {
				return err
			}
			created, err := s.createObject(r, req, o, req.name, mf)
			if err != nil && attempt < maxWriteAttempts && errors.As(err, new(alreadyExists)) {
				continue // created meanwhile: apply to it
			}
			if err != nil {
				return err
			}
			writeWrite(w, http.StatusCreated, req.res, dryRunView(r, created, nil), true)
			return nil
		}
		o.Metadata.ResourceVersion = strconv.FormatInt(cur.Seq, 10)
		inst, err := s.write(r, req, cur, o, mf)
		if err != nil && ifSeq == 0 && attempt < maxWriteAttempts && isConflictStatus(err) {
			continue
		}
		if err != nil {
			return err
		}
		writeWrite(w, http.StatusOK, req.res, dryRunView(r, inst, &cur), inst.Latest.ResourceVersion != cur.Latest.ResourceVersion)
		return nil
	}
}

// authorizeCreate refuses an apply that creates the object to a caller who
// may patch it but not create it: the guard authorized the PATCH, and, as
// in the API server, an apply that creates needs create as well. Asked
// only when the object is missing, so a patcher applies to what exists.
func (s *Server) authorizeCreate(r *http.Request, req request) error {
	a := rbac.Attributes{Verb: "create", ResourceRequest: true, APIGroup: req.res.group, Resource: req.res.plural,
		Namespace: req.namespace, Name: req.name}
	if s.hub.Authorize(r.Context(), a).Allowed {
		return nil
	}
	u, _ := cairn.UserFrom(r.Context())
	st := newStatus(http.StatusForbidden, "Forbidden", fmt.Sprintf(
		"%s.%s %q is forbidden: User %q cannot create resource %q in API group %q in the namespace %q: a server-side apply that creates the object needs create as well as patch",
		req.res.plural, req.res.group, req.name, u.Name, req.res.plural, req.res.group, req.namespace))
	st.Details = &StatusDetails{Name: req.name, Group: req.res.group, Kind: req.res.plural}
	return errStatus{st}
}

func isNotFoundStatus(err error) bool {
	var es errStatus
	return (errors.As(err, &es) && es.st.Code == http.StatusNotFound) || cairn.HasCode(err, cairn.CodeNotFound)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// inObjectOf reads the merged object back as a request object.
func inObjectOf(u *unstructured.Unstructured) (inObject, error) {
	raw, err := u.MarshalJSON()
	if err != nil {
		return inObject{}, err
	}
	return decodeObject(raw)
}

// applyError turns the field manager's errors (a conflict is already a
// Kubernetes Status) into Status errors.
func applyError(err error) error {
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		in := se.ErrStatus
		st := newStatus(int(in.Code), string(in.Reason), hideValues(in.Message))
		if d := in.Details; d != nil {
			st.Details = &StatusDetails{Name: d.Name, Group: d.Group, Kind: d.Kind}
			for _, c := range d.Causes {
				st.Details.Causes = append(st.Details.Causes, StatusCause{Type: string(c.Type), Message: hideValues(c.Message), Field: c.Field})
			}
		}
		return errStatus{st}
	}
	return errStatus{badRequest("the apply patch could not be applied: %s", hideValues(err.Error()))}
}

// gotValue is how structured-merge-diff quotes a value of the wrong type
// ("expected string, got &value.valueUnstructured{...}").
var gotValue = regexp.MustCompile(`(expected [^,\n]+), got [^\n]*`)

// hideValues replaces the values structured-merge-diff quotes in its
// errors: a value refused for its type may be a secret, and the message
// goes to the server's log and the audit log. The field and the type
// expected stay.
func hideValues(msg string) string {
	return gotValue.ReplaceAllString(msg, "$1, got a value of another type (not shown)")
}

// maxWriteAttempts bounds how often a patch or an apply without a
// resourceVersion is computed again on the new live object after losing a
// race with another writer; the API server retries such writes inside its
// storage until they go through.
const maxWriteAttempts = 64
