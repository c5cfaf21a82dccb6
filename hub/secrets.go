package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/schema"
	"github.com/cairn-dev/cairn/store"
)

// SecretMarker replaces each secret value (a Type's value or property marked
// "x-cairn-secret": true, and Terraform's sensitive outputs) wherever a value
// is shown without being asked for by id: lists, watch events, tables.
const SecretMarker = SensitiveMarker

// ListOptions say what ListInstancesWith returns.
type ListOptions struct {
	// Values reads each latest value from its backend.
	Values bool
	// Secrets keeps secret values in the clear; without it they are
	// replaced by SecretMarker. The façade decides who may ask (REST:
	// ?values=true and the get verb on the collection).
	Secrets bool
	// NotOlderThan, when set, lets the read cache answer with a list not
	// older than that position (ListInstancesNotOlderThan); unset, the
	// list is consistent.
	NotOlderThan *int64
	// Unreadable, when set with Values, keeps in the list an instance
	// whose external backend is unavailable or has no value for it (and
	// it is not being deleted), without its value, and is called with it
	// and the backend's error, instead of failing the list:
	// a table shows what it can (<unknown> cells). The other instances of
	// that backend are not asked for again.
	Unreadable func(inst cairn.Instance, err error)
}

// ListInstancesWith lists instances as ListInstancesAt does, with values and
// secrets as o says.
func (h *Hub) ListInstancesWith(ctx context.Context, f store.InstanceFilter, o ListOptions) ([]cairn.Instance, int64, error) {
	list, seq, err := h.listInstances(ctx, f, o)
	if err != nil || o.Secrets {
		return list, seq, err
	}
	// Without values, kubectl's last-applied annotation may still hold
	// them.
	if err := h.RedactSecrets(ctx, list); err != nil {
		return nil, 0, err
	}
	return list, seq, nil
}

// MayReveal reports whether the caller of ctx may see secret values of the
// object attrs names (its verb is ignored): the reveal verb on it.
// In-process callers may.
func (h *Hub) MayReveal(ctx context.Context, attrs rbac.Attributes) bool {
	if _, ok := cairn.UserFrom(ctx); !ok {
		return true
	}
	attrs.Verb = rbac.RevealVerb
	return h.Authorize(ctx, attrs).Allowed
}

// HideSecrets replaces the secret parts of inst, read by name, by
// SecretMarker (as RedactSecrets does) unless the caller of ctx may reveal
// them on the object attrs names; secret reports whether inst's Type marks
// any, whoever asked: the answer must then not be kept for other callers.
// It asks for the verb only when there is something to hide.
func (h *Hub) HideSecrets(ctx context.Context, inst *cairn.Instance, attrs rbac.Attributes) (secret bool, err error) {
	if secret, err = h.marksSecrets(ctx, inst); !secret || err != nil {
		return secret, err
	}
	if h.MayReveal(ctx, attrs) {
		return true, nil
	}
	one := []cairn.Instance{*inst}
	if err := h.RedactSecrets(ctx, one); err != nil {
		return true, err
	}
	*inst = one[0]
	return true, nil
}

// HideSecretVersions is HideSecrets for resource versions of inst (its
// history): their values are redacted as the latest one would be.
func (h *Hub) HideSecretVersions(ctx context.Context, inst cairn.Instance, rvs []cairn.ResourceVersion, attrs rbac.Attributes) error {
	if secret, err := h.marksSecrets(ctx, &inst); !secret || err != nil {
		return err
	}
	if h.MayReveal(ctx, attrs) {
		return nil
	}
	list := make([]cairn.Instance, len(rvs))
	for i, rv := range rvs {
		list[i] = cairn.Instance{ID: inst.ID, TypeRef: inst.TypeRef, CreatedAt: inst.CreatedAt, Latest: rv}
	}
	if err := h.RedactSecrets(ctx, list); err != nil {
		return err
	}
	for i := range rvs {
		rvs[i] = list[i].Latest
	}
	return nil
}

// marksSecrets reports whether inst's Type marks any part of its values
// secret (Terraform's state and sensitive outputs included), from what was
// learnt of the Type before where that holds (secretSchemaFor).
func (h *Hub) marksSecrets(ctx context.Context, inst *cairn.Instance) (bool, error) {
	if RedactsInLists(inst.TypeRef.Path) {
		return true, nil
	}
	s, err := h.secretSchemaFor(ctx, inst)
	return s != nil, err
}

// LastAppliedAnnotation is where kubectl apply keeps the whole object it
// applied, secret values included.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// RedactSecrets replaces, in place, the secret parts of each instance's
// latest value, and of the object in its LastAppliedAnnotation, by
// SecretMarker, as lists show them, and marks the value Redacted. Values
// and annotations are replaced, not modified, so those shared with the
// cache stay intact.
func (h *Hub) RedactSecrets(ctx context.Context, list []cairn.Instance) error {
	schemas := map[cairn.TypeRef]*schema.Schema{}
	for i := range list {
		inst := &list[i]
		applied, hasApplied := inst.Annotations[LastAppliedAnnotation]
		if inst.Latest.Value == nil && !hasApplied {
			continue
		}
		redactSensitive(inst)
		s, seen := schemas[inst.TypeRef]
		if !seen {
			var err error
			if s, err = h.secretSchemaFor(ctx, inst); err != nil {
				return err
			}
			schemas[inst.TypeRef] = s
		}
		if s == nil {
			continue
		}
		if inst.Latest.Value != nil {
			var fields []string
			inst.Latest.Value, fields = s.Redact("spec/value", inst.Latest.Value, SecretMarker)
			if len(fields) > 0 {
				inst.Latest.Redacted = true
			}
		}
		if hasApplied {
			if red, ok := redactApplied(s, applied); ok {
				inst.Annotations = maps.Clone(inst.Annotations)
				inst.Annotations[LastAppliedAnnotation] = red
				inst.Latest.Redacted = true
			}
		}
	}
	return nil
}

// StoredAnnotations returns the annotations of an instance of ref as the
// hub stores them: kubectl's last-applied object with the secret parts of
// its value replaced by SecretMarker (its keys kept, which is all kubectl
// apply's three-way merge reads of it), since annotations are metadata,
// which encryption at rest and SOPS leave in plaintext. The whole value is
// treated as secret there when the store encrypts the Type's values
// (Config.SealedValues). ann itself is not changed.
func (h *Hub) StoredAnnotations(ctx context.Context, ref cairn.TypeRef, ann map[string]string) (map[string]string, error) {
	applied, ok := ann[LastAppliedAnnotation]
	if !ok {
		return ann, nil
	}
	s, err := h.secretSchema(ctx, ref)
	if err != nil {
		return ann, err
	}
	if s == nil && h.sealedValues != nil && h.sealedValues(ref.Path) {
		// Compiled here, on the rare write that carries the annotation.
		if s, err = schema.Compile(json.RawMessage(`{"` + schema.SecretKeyword + `":true}`)); err != nil {
			return ann, fmt.Errorf("compile the schema of a secret value: %w", err)
		}
	}
	if s == nil {
		return ann, nil
	}
	red, changed := redactApplied(s, applied)
	if !changed || red == applied {
		return ann, nil
	}
	out := maps.Clone(ann)
	out[LastAppliedAnnotation] = red
	return out, nil
}

// redactApplied returns the object kubectl applied (a LastAppliedAnnotation)
// with the secret parts of its value replaced by SecretMarker, and whether
// anything was: the value is the object's spec.value when it was applied as
// a TypeInstance and its spec when applied through its Type's kind. An
// annotation that is not such an object is replaced whole.
func redactApplied(s *schema.Schema, applied string) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(applied), &obj) != nil || obj == nil {
		return SecretMarker, true
	}
	var apiVersion, kind string
	_ = json.Unmarshal(obj["apiVersion"], &apiVersion)
	_ = json.Unmarshal(obj["kind"], &kind)
	spec := obj["spec"]
	if spec == nil {
		return applied, false
	}
	if kind == "TypeInstance" && strings.HasPrefix(apiVersion, rbac.HubGroup+"/") {
		var fields map[string]json.RawMessage
		if json.Unmarshal(spec, &fields) != nil || fields == nil {
			return SecretMarker, true
		}
		v := fields["value"]
		if v == nil {
			return applied, false
		}
		red, replaced := s.RedactKeepingKeys("spec/value", v, SecretMarker)
		if len(replaced) == 0 {
			return applied, false
		}
		fields["value"] = red
		if spec, _ = json.Marshal(fields); spec == nil {
			return SecretMarker, true
		}
	} else {
		red, replaced := s.RedactKeepingKeys("spec", spec, SecretMarker)
		if len(replaced) == 0 {
			return applied, false
		}
		spec = red
	}
	obj["spec"] = spec
	b, err := json.Marshal(obj)
	if err != nil {
		return SecretMarker, true
	}
	if strings.HasSuffix(applied, "\n") {
		b = append(b, '\n')
	}
	return string(b), true
}

// SecretFields returns the fields of a Type's values that are secret, as
// "/"-joined paths under spec/value of the given value, for messages that
// must name them; nil when nothing is secret.
func (h *Hub) SecretFields(ctx context.Context, ref cairn.TypeRef, value []byte) ([]string, error) {
	s, err := h.secretSchema(ctx, ref)
	if s == nil || err != nil {
		return nil, err
	}
	_, fields := s.Redact("spec/value", value, SecretMarker)
	return fields, nil
}

// TypeHasSecrets reports whether a Type marks any part of its values
// secret.
func (h *Hub) TypeHasSecrets(ctx context.Context, ref cairn.TypeRef) (bool, error) {
	if ref.Path == TerraformSensitivePath {
		return true, nil
	}
	s, err := h.secretSchema(ctx, ref)
	return s != nil, err
}

// secretSchema returns the compiled schema of a Type that marks secrets,
// nil for a Type that marks none (without compiling it) or is unknown.
func (h *Hub) secretSchema(ctx context.Context, ref cairn.TypeRef) (*schema.Schema, error) {
	s, _, err := h.readSecretSchema(ctx, ref)
	return s, err
}

func (h *Hub) readSecretSchema(ctx context.Context, ref cairn.TypeRef) (s *schema.Schema, registered bool, err error) {
	t, err := h.st.GetType(ctx, ref)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get Type %s: %w", ref, err)
	}
	if !schema.MentionsSecrets(t.JSONSchema) {
		return nil, true, nil
	}
	s, _, err = h.typeSchema(ctx, h.st, ref)
	if err != nil || !s.HasSecrets() {
		return nil, true, err
	}
	return s, true, nil
}

// secretSchemaFor is secretSchema for one instance, from what the hub
// learnt of its Type before when that still holds: every watch event of
// every watcher redacts, and a store read each time made a watch fan-out
// on PostgreSQL wait on the pool. A Type revision is immutable and can
// only be deleted (and registered again otherwise) once it has no
// instances, so what was read of it holds for every instance created
// before that read. Instances created since (allowing for clocks of other
// replicas), unregistered Types and Type changes through this hub read
// the Type again.
func (h *Hub) secretSchemaFor(ctx context.Context, inst *cairn.Instance) (*schema.Schema, error) {
	gen := h.typesGen.Load()
	if k, ok := h.secretTypes.Load(inst.TypeRef); ok {
		k := k.(secretsKnown)
		if k.gen == gen && !inst.CreatedAt.IsZero() && inst.CreatedAt.Before(k.read.Add(-secretsClockSkew)) {
			return k.s, nil
		}
	}
	read := h.now()
	s, registered, err := h.readSecretSchema(ctx, inst.TypeRef)
	if err != nil || !registered {
		return s, err
	}
	h.secretTypes.Store(inst.TypeRef, secretsKnown{s: s, read: read, gen: gen})
	return s, nil
}

// secretsKnown is what secretSchemaFor read of a Type: its schema when it
// marks secrets, when, and at which of this hub's Type generations.
type secretsKnown struct {
	s    *schema.Schema
	read time.Time
	gen  int64
}

// secretsClockSkew is how far another replica's clock, which stamps the
// instances it creates, may be ahead of this one's (replicas share a
// database, and NTP keeps such machines within milliseconds).
const secretsClockSkew = time.Second
