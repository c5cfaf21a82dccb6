package hub

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/store"
)

// The RBAC objects created through the API (Roles, ClusterRoles and their
// bindings) are kept, all of them, in the value of one instance of a core
// Type in SystemNamespace, as the policy is: they live in whichever store
// the hub runs on, replicas on one database share them, every change is a
// new resource version (its history is ResourceVersions(RBACID)), and a
// write is one transaction, so concurrent writers of different replicas
// cannot lose each other's objects. Replicas see a change within their
// poll interval (Config.PollInterval), as watchers do.
const (
	// RBACID is the fixed id of the instance holding the RBAC objects.
	RBACID = "3b8e4f0a-6c2d-4b7e-9a51-7d0c2e8f4a16"
	// RBACName and RBACAlias name it in namespace cairn-system.
	RBACName  = "rbac"
	RBACAlias = "cairn-rbac"
	// RBACTypePath is its Type (revision cairn.CoreRevision).
	RBACTypePath = "cap.core.type.hub.rbac"
	// RBACSourceAnnotation marks the objects that are not stored in the
	// hub and cannot be changed through it: "default" (the hub's own
	// roles) or "rbac-file" (cairn serve --rbac-file).
	RBACSourceAnnotation = "hub.cairn.dev/rbac-source"
)

// RBACObject is a *rbacv1.Role, *rbacv1.ClusterRole, *rbacv1.RoleBinding or
// *rbacv1.ClusterRoleBinding.
type RBACObject interface {
	metav1.Object
	runtime.Object
}

// RBAC kinds.
const (
	KindRole               = "Role"
	KindClusterRole        = "ClusterRole"
	KindRoleBinding        = "RoleBinding"
	KindClusterRoleBinding = "ClusterRoleBinding"
)

// rbacDoc is the stored value.
type rbacDoc struct {
	ClusterRoles        []rbacv1.ClusterRole        `json:"clusterRoles,omitempty"`
	Roles               []rbacv1.Role               `json:"roles,omitempty"`
	ClusterRoleBindings []rbacv1.ClusterRoleBinding `json:"clusterRoleBindings,omitempty"`
	RoleBindings        []rbacv1.RoleBinding        `json:"roleBindings,omitempty"`
}

func (d rbacDoc) policy() rbac.Policy {
	return rbac.Policy{ClusterRoles: d.ClusterRoles, Roles: d.Roles, ClusterRoleBindings: d.ClusterRoleBindings, RoleBindings: d.RoleBindings}
}

func docOf(objs []RBACObject) rbacDoc {
	var d rbacDoc
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			d.ClusterRoles = append(d.ClusterRoles, *o)
		case *rbacv1.Role:
			d.Roles = append(d.Roles, *o)
		case *rbacv1.ClusterRoleBinding:
			d.ClusterRoleBindings = append(d.ClusterRoleBindings, *o)
		case *rbacv1.RoleBinding:
			d.RoleBindings = append(d.RoleBindings, *o)
		}
	}
	return d
}

// objectsOf lists p's objects as RBACObjects (copies).
func objectsOf(p rbac.Policy) []RBACObject {
	var out []RBACObject
	for i := range p.ClusterRoles {
		out = append(out, p.ClusterRoles[i].DeepCopy())
	}
	for i := range p.Roles {
		out = append(out, p.Roles[i].DeepCopy())
	}
	for i := range p.ClusterRoleBindings {
		out = append(out, p.ClusterRoleBindings[i].DeepCopy())
	}
	for i := range p.RoleBindings {
		out = append(out, p.RoleBindings[i].DeepCopy())
	}
	return out
}

// RBACKind returns the kind of o.
func RBACKind(o RBACObject) string {
	switch o.(type) {
	case *rbacv1.ClusterRole:
		return KindClusterRole
	case *rbacv1.Role:
		return KindRole
	case *rbacv1.ClusterRoleBinding:
		return KindClusterRoleBinding
	case *rbacv1.RoleBinding:
		return KindRoleBinding
	}
	return ""
}

// rbacResource is the resource of a kind, qualified as the API server
// names it in messages: roles.rbac.authorization.k8s.io.
func rbacResource(kind string) string {
	return strings.ToLower(kind) + "s." + rbacv1.GroupName
}

func rbacKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func keyOf(o RBACObject) string { return rbacKey(RBACKind(o), o.GetNamespace(), o.GetName()) }

// readOnlyRBAC are the objects the hub evaluates but does not store: its
// defaults and what the server was configured with (--rbac-file), each
// annotated with RBACSourceAnnotation.
func (a *authz) readOnly() []RBACObject {
	var out []RBACObject
	mark := func(objs []RBACObject, src string) {
		for _, o := range objs {
			ann := map[string]string{}
			for k, v := range o.GetAnnotations() {
				ann[k] = v
			}
			ann[RBACSourceAnnotation] = src
			o.SetAnnotations(ann)
			out = append(out, o)
		}
	}
	mark(objectsOf(rbac.Defaults(a.groups...)), "default")
	mark(objectsOf(a.config), "rbac-file")
	return out
}

// ListRBAC returns the RBAC objects of kind in namespace ("" : every
// namespace), the read-only ones (defaults, --rbac-file) included, sorted
// by namespace and name, with the position of the stored objects' last
// change (a list's resourceVersion).
func (h *Hub) ListRBAC(ctx context.Context, kind, namespace string) ([]RBACObject, int64, error) {
	if err := h.refreshRBAC(ctx, true); err != nil {
		return nil, 0, err
	}
	a := &h.authz
	a.mu.Lock()
	all := append(a.readOnly(), objectsOf(a.stored)...)
	seq := a.seq
	a.mu.Unlock()
	var out []RBACObject
	seen := map[string]bool{}
	for _, o := range all {
		k := keyOf(o)
		if RBACKind(o) != kind || (namespace != "" && o.GetNamespace() != namespace) || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	slices.SortFunc(out, func(x, y RBACObject) int {
		return cmp.Or(cmp.Compare(x.GetNamespace(), y.GetNamespace()), cmp.Compare(x.GetName(), y.GetName()))
	})
	return out, seq, nil
}

// GetRBAC returns one RBAC object; CodeNotFound when there is none.
func (h *Hub) GetRBAC(ctx context.Context, kind, namespace, name string) (RBACObject, error) {
	list, _, err := h.ListRBAC(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	for _, o := range list {
		if o.GetName() == name && o.GetNamespace() == namespace {
			return o, nil
		}
	}
	return nil, rbacNotFound(kind, name)
}

func rbacNotFound(kind, name string) error {
	return cairn.Errorf(cairn.CodeNotFound, "%s %q not found", rbacResource(kind), name)
}

// CreateRBAC validates o and stores it. The caller (the user in ctx) must
// not grant more than it holds: a role's rules, or the rules of the role a
// binding refers to, must all be the caller's own in the object's
// namespace, unless it holds the escalate verb on the role (bind on the
// role a binding refers to), as in Kubernetes. A refusal is CodeForbidden
// and lists the rules the caller lacks.
func (h *Hub) CreateRBAC(ctx context.Context, o RBACObject) (RBACObject, error) {
	o = o.DeepCopyObject().(RBACObject)
	if err := validateRBAC(o); err != nil {
		return nil, err
	}
	if err := h.refreshRBAC(ctx, true); err != nil {
		return nil, err
	}
	if err := h.checkReadOnly(o, "create"); err != nil {
		return nil, err
	}
	if err := h.checkEscalation(ctx, o); err != nil {
		return nil, err
	}
	now := metav1.NewTime(h.now().UTC().Truncate(1e9))
	err := h.changeRBAC(ctx, func(objs []RBACObject, rv string) ([]RBACObject, error) {
		for _, x := range objs {
			if keyOf(x) == keyOf(o) {
				return nil, cairn.Errorf(cairn.CodeAlreadyExists, "%s %q already exists", rbacResource(RBACKind(o)), o.GetName())
			}
		}
		o.SetUID(newUID())
		o.SetResourceVersion(rv)
		o.SetCreationTimestamp(now)
		o.SetGeneration(1)
		o.SetManagedFields(nil)
		return append(objs, o), nil
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// UpdateRBAC replaces a stored RBAC object, with the checks of CreateRBAC.
// A resourceVersion in o must be the stored object's (optimistic
// concurrency); a binding's roleRef cannot change.
func (h *Hub) UpdateRBAC(ctx context.Context, o RBACObject) (RBACObject, error) {
	o = o.DeepCopyObject().(RBACObject)
	if err := validateRBAC(o); err != nil {
		return nil, err
	}
	if err := h.refreshRBAC(ctx, true); err != nil {
		return nil, err
	}
	if err := h.checkReadOnly(o, "update"); err != nil {
		return nil, err
	}
	if err := h.checkEscalation(ctx, o); err != nil {
		return nil, err
	}
	err := h.changeRBAC(ctx, func(objs []RBACObject, rv string) ([]RBACObject, error) {
		i := slices.IndexFunc(objs, func(x RBACObject) bool { return keyOf(x) == keyOf(o) })
		if i < 0 {
			return nil, rbacNotFound(RBACKind(o), o.GetName())
		}
		cur := objs[i]
		if err := checkRBACVersion(cur, o.GetResourceVersion()); err != nil {
			return nil, err
		}
		if before, after := roleRefOf(cur), roleRefOf(o); before != after {
			return nil, &cairn.Error{Code: cairn.CodeInvalid, Msg: fmt.Sprintf("%s %q is invalid: roleRef: cannot change roleRef (from %s %q to %s %q); delete the binding and create it again",
				rbacResource(RBACKind(o)), o.GetName(), before.Kind, before.Name, after.Kind, after.Name),
				Causes: []cairn.Cause{{Field: "roleRef", Message: "cannot change roleRef"}}}
		}
		o.SetUID(cur.GetUID())
		o.SetCreationTimestamp(cur.GetCreationTimestamp())
		o.SetResourceVersion(rv)
		o.SetGeneration(cur.GetGeneration() + 1)
		o.SetManagedFields(nil)
		objs[i] = o
		return objs, nil
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// DeleteRBAC removes a stored RBAC object; ifResourceVersion, when not
// empty, must be its resourceVersion.
func (h *Hub) DeleteRBAC(ctx context.Context, kind, namespace, name, ifResourceVersion string) error {
	probe, err := newRBAC(kind, namespace, name)
	if err != nil {
		return err
	}
	if err := h.refreshRBAC(ctx, true); err != nil {
		return err
	}
	if err := h.checkReadOnly(probe, "delete"); err != nil {
		return err
	}
	return h.changeRBAC(ctx, func(objs []RBACObject, _ string) ([]RBACObject, error) {
		i := slices.IndexFunc(objs, func(x RBACObject) bool { return keyOf(x) == keyOf(probe) })
		if i < 0 {
			return nil, rbacNotFound(kind, name)
		}
		if err := checkRBACVersion(objs[i], ifResourceVersion); err != nil {
			return nil, err
		}
		return slices.Delete(objs, i, i+1), nil
	})
}

// newRBAC returns an empty object of kind.
func newRBAC(kind, namespace, name string) (RBACObject, error) {
	var o RBACObject
	switch kind {
	case KindRole:
		o = &rbacv1.Role{}
	case KindClusterRole:
		o = &rbacv1.ClusterRole{}
	case KindRoleBinding:
		o = &rbacv1.RoleBinding{}
	case KindClusterRoleBinding:
		o = &rbacv1.ClusterRoleBinding{}
	default:
		return nil, cairn.Errorf(cairn.CodeInvalid, "RBAC kind %q: want Role, ClusterRole, RoleBinding or ClusterRoleBinding", kind)
	}
	o.SetNamespace(namespace)
	o.SetName(name)
	return o, nil
}

func checkRBACVersion(cur RBACObject, want string) error {
	if want == "" || want == cur.GetResourceVersion() {
		return nil
	}
	return cairn.Errorf(cairn.CodeConflict, "Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again",
		rbacResource(RBACKind(cur)), cur.GetName())
}

func roleRefOf(o RBACObject) rbacv1.RoleRef {
	switch o := o.(type) {
	case *rbacv1.RoleBinding:
		return o.RoleRef
	case *rbacv1.ClusterRoleBinding:
		return o.RoleRef
	}
	return rbacv1.RoleRef{}
}

// validateRBAC applies auth/rbac's rules and the API server's rules for
// names, and sets apiVersion and kind.
func validateRBAC(o RBACObject) error {
	kind := RBACKind(o)
	name := o.GetName()
	what := fmt.Sprintf("%s %q", rbacResource(kind), name)
	invalidName := func(msg string) error {
		return &cairn.Error{Code: cairn.CodeInvalid, Msg: what + " is invalid: metadata.name: " + msg,
			Causes: []cairn.Cause{{Field: "metadata/name", Message: msg}}}
	}
	switch {
	case name == "":
		return invalidName("Required value: name or generateName is required")
	case name == "." || name == "..":
		return invalidName(fmt.Sprintf("Invalid value: %q: may not be '.' or '..'", name))
	case strings.ContainsAny(name, "/%"):
		return invalidName(fmt.Sprintf("Invalid value: %q: may not contain '/' or '%%'", name))
	}
	if ns := o.GetNamespace(); ns != "" {
		if c := checkNamespace(ns); c != nil {
			return &cairn.Error{Code: cairn.CodeInvalid, Msg: what + " is invalid: metadata.namespace: " + c.Message,
				Causes: []cairn.Cause{{Field: "metadata/namespace", Message: c.Message}}}
		}
	}
	o.GetObjectKind().SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(kind))
	var err error
	switch o := o.(type) {
	case *rbacv1.ClusterRole:
		if o.AggregationRule != nil {
			err = errors.New("aggregationRule: aggregated ClusterRoles are not supported; list the rules")
		} else {
			err = rbac.ValidateClusterRole(o)
		}
	case *rbacv1.Role:
		err = rbac.ValidateRole(o)
	case *rbacv1.ClusterRoleBinding:
		err = rbac.ValidateClusterRoleBinding(o)
	case *rbacv1.RoleBinding:
		err = rbac.ValidateRoleBinding(o)
	}
	if err != nil {
		// auth/rbac names the object too: keep the field and the reason.
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "rbac: "), fmt.Sprintf("%s %q: ", kind, name))
		return &cairn.Error{Code: cairn.CodeInvalid, Msg: what + " is invalid: " + msg, Err: err}
	}
	return nil
}

// checkReadOnly refuses to write an object the hub does not store.
func (h *Hub) checkReadOnly(o RBACObject, verb string) error {
	a := &h.authz
	a.mu.Lock()
	ro := a.readOnly()
	a.mu.Unlock()
	for _, x := range ro {
		if keyOf(x) != keyOf(o) {
			continue
		}
		src := x.GetAnnotations()[RBACSourceAnnotation]
		why := "it is one of the hub's default roles"
		if src == "rbac-file" {
			why = "it is given by cairn serve --rbac-file; change that file and restart the server"
		}
		if verb == "create" {
			return cairn.Errorf(cairn.CodeAlreadyExists, "%s %q already exists: %s", rbacResource(RBACKind(o)), o.GetName(), why)
		}
		return cairn.Errorf(cairn.CodeForbidden, "%s %q is read-only: %s", rbacResource(RBACKind(o)), o.GetName(), why)
	}
	return nil
}

// checkEscalation is the API server's escalation check (see CreateRBAC).
// In-process callers (no user in ctx) are trusted.
func (h *Hub) checkEscalation(ctx context.Context, o RBACObject) error {
	u, ok := cairn.UserFrom(ctx)
	if !ok || slices.Contains(u.Groups, cairn.Masters) {
		return nil
	}
	a := h.authz.cur.Load()
	verbOn := func(verb, resource, namespace, name string) bool {
		return a.Authorize(rbac.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: rbacv1.GroupName,
			Resource: resource, Namespace: namespace, Name: name}).Allowed
	}
	var rules []rbacv1.PolicyRule
	ns := o.GetNamespace()
	switch o := o.(type) {
	case *rbacv1.Role:
		if verbOn("escalate", "roles", ns, o.Name) {
			return nil
		}
		rules = o.Rules
	case *rbacv1.ClusterRole:
		if verbOn("escalate", "clusterroles", "", o.Name) {
			return nil
		}
		rules = o.Rules
	case *rbacv1.RoleBinding, *rbacv1.ClusterRoleBinding:
		ref := roleRefOf(o)
		if verbOn("bind", strings.ToLower(ref.Kind)+"s", ns, ref.Name) {
			return nil
		}
		var found bool
		rules, found = a.RoleRules(ref.Kind, ns, ref.Name)
		if !found {
			return cairn.Errorf(cairn.CodeForbidden, "%s %q is forbidden: roleRef %s %q was not found; binding a role that does not exist needs the bind verb on it",
				rbacResource(RBACKind(o)), o.GetName(), ref.Kind, ref.Name)
		}
	}
	missing := rbac.Uncovered(a.RulesFor(u, ns), rules)
	if len(missing) == 0 {
		return nil
	}
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	return cairn.Errorf(cairn.CodeForbidden, "%s %q is forbidden: user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		rbacResource(RBACKind(o)), o.GetName(), u.Name, groups, rbac.FormatRules(missing))
}

// errRBACRace: another writer stored the next resource version first.
var errRBACRace = errors.New("the RBAC objects changed concurrently")

// changeRBAC runs mutate on the stored objects and stores what it returns
// as the next resource version of the RBAC instance, in one transaction;
// rv is that version, each changed object's resourceVersion. A race with
// another writer is retried on the objects it stored.
func (h *Hub) changeRBAC(ctx context.Context, mutate func(objs []RBACObject, rv string) ([]RBACObject, error)) error {
	ref := cairn.TypeRef{Path: RBACTypePath, Revision: cairn.CoreRevision}
	if _, _, err := h.ApplyType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		return fmt.Errorf("register the RBAC Type: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err := h.write(ctx, func(ctx context.Context, tx store.Tx) error {
			found, err := tx.GetInstancesBrief(ctx, []string{RBACID})
			if err != nil {
				return err
			}
			var doc rbacDoc
			rv := 0
			if len(found) == 1 {
				rv = found[0].Latest.ResourceVersion
				raw, err := tx.Value(ctx, RBACID, rv)
				if err != nil {
					return fmt.Errorf("read the RBAC objects: %w", err)
				}
				if err := json.Unmarshal(raw, &doc); err != nil {
					return fmt.Errorf("the stored RBAC objects (resource version %d) cannot be read: %w", rv, err)
				}
			}
			objs, err := mutate(objectsOf(doc.policy()), strconv.Itoa(rv+1))
			if err != nil {
				return err
			}
			value, err := json.Marshal(docOf(objs))
			if err != nil {
				return err
			}
			now := h.now().UTC()
			next := cairn.ResourceVersion{ResourceVersion: rv + 1, CreatedBy: cairn.Actor(ctx), CreatedAt: now}
			if rv == 0 {
				err = tx.CreateInstance(ctx, cairn.Instance{ID: RBACID, TypeRef: ref, Namespace: SystemNamespace, Name: RBACName,
					Alias: RBACAlias, Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}, CreatedAt: now, Latest: next})
			} else {
				err = tx.AddResourceVersion(ctx, RBACID, next)
			}
			if cairn.HasCode(err, cairn.CodeAlreadyExists) || cairn.HasCode(err, cairn.CodeConflict) {
				return fmt.Errorf("%w: %w", errRBACRace, err)
			}
			if err != nil {
				return err
			}
			if err := tx.PutValue(ctx, RBACID, rv+1, value); err != nil {
				if cairn.HasCode(err, cairn.CodeAlreadyExists) {
					return fmt.Errorf("%w: %w", errRBACRace, err)
				}
				return err
			}
			if rv == 0 {
				return tx.AddUses(ctx, RBACID, cairn.BuiltinBackendID)
			}
			return nil
		})
		if errors.Is(err, errRBACRace) && attempt < maxUpdateAttempts {
			continue
		}
		if errors.Is(err, errRBACRace) {
			return cairn.Errorf(cairn.CodeConflict, "change the RBAC objects: gave up after %d attempts: %v", attempt, err)
		}
		if err != nil {
			return err
		}
		if isDryRun(ctx) {
			return nil
		}
		return h.refreshRBAC(ctx, true)
	}
}

// refreshRBAC loads the stored RBAC objects when they changed: always when
// force, else at most once per poll interval, and then only by one caller
// while the others go on with what is loaded.
func (h *Hub) refreshRBAC(ctx context.Context, force bool) error {
	a := &h.authz
	if !force && !a.due(h.pollInterval) {
		return nil
	}
	if force {
		a.mu.Lock()
	} else if !a.mu.TryLock() {
		return nil
	}
	defer a.mu.Unlock()
	if !force && !a.due(h.pollInterval) {
		return nil // another caller just did
	}
	a.touch()
	found, err := h.st.GetInstancesBrief(ctx, []string{RBACID})
	if err != nil {
		return fmt.Errorf("read the RBAC objects: %w", err)
	}
	if len(found) == 0 {
		if a.seq != 0 {
			a.seq = 0
			a.setLocked(rbac.Policy{})
		}
		return nil
	}
	if found[0].Seq == a.seq {
		return nil
	}
	raw, err := h.st.Value(ctx, RBACID, found[0].Latest.ResourceVersion)
	if err != nil {
		return fmt.Errorf("read the RBAC objects: %w", err)
	}
	var doc rbacDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("the stored RBAC objects (resource version %d) cannot be read: %w", found[0].Latest.ResourceVersion, err)
	}
	a.seq = found[0].Seq
	a.setLocked(doc.policy())
	return nil
}

// refuseRBACInstance keeps generic instance writes (REST typeinstances,
// GraphQL, the CLI) off the RBAC objects' instance: they would bypass the
// escalation check.
func refuseRBACInstance(id string) error {
	if id != RBACID {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeForbidden, IDs: []string{id},
		Msg: fmt.Sprintf("TypeInstance %q holds the hub's RBAC objects: change them through rbac.authorization.k8s.io/v1 (kubectl create role, rolebinding, ...)", id)}
}

// refuseHubInstance refuses a generic write of an instance the hub keeps
// for itself (the RBAC objects, the policy): each has its own API, which
// checks what a generic write would not.
func refuseHubInstance(id string) error {
	if err := refuseRBACInstance(id); err != nil {
		return err
	}
	return refusePolicyInstance(id)
}

func newUID() types.UID { return types.UID(uuid.NewString()) }
