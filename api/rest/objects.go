package rest

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// Annotations that select a new instance's backend and carry its context.
// They are consumed by create (and the context one by updates) and not
// stored; status.backend shows the result.
const (
	AnnotationBackend        = "hub.cairn.dev/backend"
	AnnotationBackendContext = "hub.cairn.dev/backend-context"
)

// Object is a served instance of a user Type:
// {apiVersion, kind, metadata, spec (the value), status}.
type Object struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ObjectMeta      `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Status     *ObjectStatus   `json:"status,omitempty"`
}

// ObjectMeta is the metadata of a served object.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp string            `json:"creationTimestamp,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	// DeletionTimestamp is set while the deletion of an installation waits
	// for its children to be gone (hub.AnnotationDeletionRequested).
	DeletionTimestamp string           `json:"deletionTimestamp,omitempty"`
	Finalizers        []string         `json:"finalizers,omitempty"`
	OwnerReferences   []OwnerReference `json:"ownerReferences,omitempty"`
	// ManagedFields says which field manager owns which fields
	// (server-side apply).
	ManagedFields json.RawMessage `json:"managedFields,omitempty"`
}

// OwnerReference names the installation that owns an object (the uses edge
// from the installation to it), as Kubernetes owner references do.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         bool   `json:"controller"`
	BlockOwnerDeletion bool   `json:"blockOwnerDeletion"`
}

// ObjectStatus shows what the hub knows beyond the value.
type ObjectStatus struct {
	TypeRef   cairn.TypeRef   `json:"typeRef"`
	Alias     string          `json:"alias,omitempty"`
	Backend   StatusBackend   `json:"backend"`
	LockedBy  string          `json:"lockedBy,omitempty"`
	CreatedBy string          `json:"createdBy,omitempty"`
	Uses      []string        `json:"uses,omitempty"`
	UsedBy    []string        `json:"usedBy,omitempty"`
	Context   json.RawMessage `json:"-"`
	// Reported is the instance's own status (conditions, outputs, ...), as
	// its controllers wrote it; its keys are served beside the hub's, which
	// win a clash so that nothing the hub reports changes meaning.
	Reported json.RawMessage `json:"-"`
}

// MarshalJSON serves the hub's fields merged with the reported status.
func (s ObjectStatus) MarshalJSON() ([]byte, error) {
	type plain ObjectStatus
	hubFields, err := json.Marshal(plain(s))
	if err != nil || len(s.Reported) == 0 {
		return hubFields, err
	}
	var reported map[string]json.RawMessage
	if err := json.Unmarshal(s.Reported, &reported); err != nil || len(reported) == 0 {
		return hubFields, nil
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(hubFields, &merged); err != nil {
		return nil, err
	}
	for k, v := range reported {
		if _, taken := merged[k]; !taken {
			merged[k] = v
		}
	}
	return json.Marshal(merged)
}

// UnmarshalJSON reads the hub's fields and keeps the whole document as
// Reported, so clients see what a controller wrote.
func (s *ObjectStatus) UnmarshalJSON(b []byte) error {
	type plain ObjectStatus
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = ObjectStatus(p)
	s.Reported = append(json.RawMessage(nil), b...)
	return nil
}

// StatusBackend is the backend of an instance and its context.
type StatusBackend struct {
	ID       string          `json:"id"`
	Abstract bool            `json:"abstract,omitempty"`
	Context  json.RawMessage `json:"context,omitempty"`
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// formatSeq is a resourceVersion; 0 (nothing stored: a dry-run create's
// answer) is none.
func formatSeq(seq int64) string {
	if seq == 0 {
		return ""
	}
	return strconv.FormatInt(seq, 10)
}

// toObject renders an instance as an object of resource r.
func toObject(r *resource, inst cairn.Instance) Object {
	o := Object{
		APIVersion: r.apiVersion(),
		Kind:       r.kind,
		Metadata: ObjectMeta{
			Name:              inst.Name,
			Namespace:         inst.Namespace,
			UID:               inst.ID,
			ResourceVersion:   formatSeq(inst.Seq),
			Generation:        int64(inst.Latest.ResourceVersion),
			CreationTimestamp: timestamp(inst.CreatedAt),
			Labels:            inst.Labels,
			Annotations:       inst.Annotations,
			ManagedFields:     inst.ManagedFields,
		},
		Spec: inst.Latest.Value,
		Status: &ObjectStatus{
			TypeRef:   inst.TypeRef,
			Alias:     inst.Alias,
			Backend:   StatusBackend{ID: inst.Backend.ID, Abstract: inst.Backend.Abstract, Context: inst.Latest.Context},
			LockedBy:  inst.LockedBy,
			CreatedBy: inst.Latest.CreatedBy,
			Uses:      inst.Uses,
			UsedBy:    inst.UsedBy,
			Reported:  inst.Status,
		},
	}
	if at := inst.Annotations[hub.AnnotationDeletionRequested]; at != "" {
		o.Metadata.DeletionTimestamp = at
		o.Metadata.Finalizers = []string{hub.FinalizerChildren}
	}
	return o
}

// inObject is an object as clients send it. Fields the server owns
// (uid, generation, creationTimestamp, status, managedFields, ...) are
// accepted and ignored, as Kubernetes does.
type inObject struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   inMeta          `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
	Status     json.RawMessage `json:"status"`
}

type inMeta struct {
	Name                       string            `json:"name"`
	GenerateName               string            `json:"generateName"`
	Namespace                  string            `json:"namespace"`
	UID                        string            `json:"uid"`
	ResourceVersion            string            `json:"resourceVersion"`
	Generation                 json.RawMessage   `json:"generation"`
	CreationTimestamp          json.RawMessage   `json:"creationTimestamp"`
	DeletionTimestamp          json.RawMessage   `json:"deletionTimestamp"`
	DeletionGracePeriodSeconds json.RawMessage   `json:"deletionGracePeriodSeconds"`
	Labels                     map[string]string `json:"labels"`
	Annotations                map[string]string `json:"annotations"`
	OwnerReferences            json.RawMessage   `json:"ownerReferences"`
	Finalizers                 json.RawMessage   `json:"finalizers"`
	ManagedFields              json.RawMessage   `json:"managedFields"`
	SelfLink                   json.RawMessage   `json:"selfLink"`
}

// decodeObject reads a request object; checkFields has judged its
// unknown fields.
func decodeObject(body []byte) (inObject, error) {
	if o, ok := decodeObjectPlain(body); ok {
		return o, nil
	}
	return unmarshalObject(body)
}

// unmarshalObject is decodeObject for a body that is not plain.
func unmarshalObject(body []byte) (inObject, error) {
	var o inObject
	if err := json.Unmarshal(body, &o); err != nil {
		return o, errStatus{badRequest("the request body is not a valid object: %v", err)}
	}
	return o, nil
}

// checkObject checks apiVersion and kind against the resource.
func checkObject(r *resource, o inObject) error {
	var causes []StatusCause
	if o.APIVersion != "" && o.APIVersion != r.apiVersion() {
		causes = append(causes, StatusCause{Type: "FieldValueInvalid", Field: "apiVersion",
			Message: fmt.Sprintf("must be %s, not %s", r.apiVersion(), o.APIVersion)})
	}
	if o.Kind != "" && o.Kind != r.kind {
		causes = append(causes, StatusCause{Type: "FieldValueInvalid", Field: "kind",
			Message: fmt.Sprintf("must be %s, not %s", r.kind, o.Kind)})
	}
	if len(causes) == 0 {
		return nil
	}
	st := newStatus(422, "Invalid", fmt.Sprintf("%s %q is invalid: %s %s", r.kind, o.Metadata.Name, causes[0].Field, causes[0].Message))
	st.Details = &StatusDetails{Name: o.Metadata.Name, Group: r.group, Kind: r.kind, Causes: causes}
	return errStatus{st}
}

// storedAnnotations drops the annotations the server consumes.
func storedAnnotations(a map[string]string) map[string]string {
	if a == nil {
		return nil
	}
	out := maps.Clone(a)
	delete(out, AnnotationBackend)
	delete(out, AnnotationBackendContext)
	return out
}

func parseSeq(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, errStatus{badRequest("resourceVersion %q is not valid: cairn resource versions are non-negative integers", rv)}
	}
	return n, nil
}
