package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/store"
)

// checkDependencyAnnotations refuses a caller's write that sets or changes
// an annotation the dependency installer acts on, when it names an
// instance the caller may not read. The stack controller installs an
// installation's dependencies as itself, from its annotations: without
// this check a caller who may write only their own installation could
// have it handed another namespace's credentials (deps.cairn.dev/
// credentials, or a dependency's answered credential in dependency-inputs)
// or another team's installation (dependency-overrides), and read them
// through what it renders. cairn install writes these annotations after
// checking the same rights, so its writes pass. An instance the caller may
// not read is answered as one that does not exist. In-process writers (no
// user in ctx) are not checked.
func (h *Hub) checkDependencyAnnotations(ctx context.Context, ns string, before, after map[string]string) error {
	if _, ok := cairn.UserFrom(ctx); !ok {
		return nil
	}
	// cluster: the reference may name a cluster-scoped installation (a
	// dependency override's KIND/NAME or global/KIND/NAME), which has no
	// namespace.
	type ref struct {
		field, ns, name string
		cluster         bool
	}
	var refs []ref
	changed := func(key string) (string, bool) {
		v, ok := after[key]
		return v, ok && v != before[key]
	}
	bad := func(key, why string) error {
		return &cairn.Error{Code: cairn.CodeInvalid, Msg: fmt.Sprintf("metadata.annotations[%s]: %s", key, why),
			Causes: []cairn.Cause{{Field: "metadata/annotations/" + key, Message: why}}}
	}
	credential := func(key, what, v string) error {
		rns, name, ok := strings.Cut(v, "/")
		if !ok || rns == "" || name == "" || strings.Contains(name, "/") {
			return bad(key, fmt.Sprintf("credential %s: %q is not a reference NAMESPACE/NAME", what, v))
		}
		refs = append(refs, ref{field: key + " credential " + what, ns: rns, name: name})
		return nil
	}
	if v, ok := changed(AnnotationCredentials); ok {
		var creds map[string]string
		if err := json.Unmarshal([]byte(v), &creds); err != nil {
			return bad(AnnotationCredentials, "must be a JSON object of credential name to NAMESPACE/NAME")
		}
		for _, k := range slices.Sorted(maps.Keys(creds)) {
			if err := credential(AnnotationCredentials, k, creds[k]); err != nil {
				return err
			}
		}
	}
	if v, ok := changed(AnnotationDependencyInputs); ok {
		var inputs map[string]deps.Inputs
		if err := json.Unmarshal([]byte(v), &inputs); err != nil {
			return bad(AnnotationDependencyInputs, "must be a JSON object of dependency path to its answers")
		}
		for _, p := range slices.Sorted(maps.Keys(inputs)) {
			for _, k := range slices.Sorted(maps.Keys(inputs[p].Credentials)) {
				if err := credential(AnnotationDependencyInputs, p+"."+k, inputs[p].Credentials[k]); err != nil {
					return err
				}
			}
		}
	}
	if v, ok := changed(AnnotationDependencyOverrides); ok {
		var overrides []string
		if err := json.Unmarshal([]byte(v), &overrides); err != nil {
			return bad(AnnotationDependencyOverrides, "must be a JSON array of PATH=[NAMESPACE/]KIND/NAME or PATH=STACK@VERSION")
		}
		for _, o := range overrides {
			ov, err := deps.ParseOverride(o)
			if err != nil {
				return bad(AnnotationDependencyOverrides, err.Error())
			}
			if ov.Installation != nil {
				rns := ov.Installation.Namespace
				if rns == "" {
					rns = ns
				}
				refs = append(refs, ref{AnnotationDependencyOverrides + " " + ov.Path, rns, ov.Installation.Name,
					ov.Installation.Namespace == "" || ov.Installation.Namespace == deps.DefaultGlobalNamespace})
			}
		}
	}
	for _, r := range refs {
		found, err := h.ListInstances(ctx, store.InstanceFilter{Namespace: r.ns, Name: r.name}, false)
		if err != nil {
			return fmt.Errorf("check %s: %w", r.field, err)
		}
		if len(found) == 0 && r.cluster {
			// A filter's empty namespace is every namespace: keep those
			// without one.
			all, err := h.ListInstances(ctx, store.InstanceFilter{Name: r.name}, false)
			if err != nil {
				return fmt.Errorf("check %s: %w", r.field, err)
			}
			found = slices.DeleteFunc(all, func(in cairn.Instance) bool { return in.Namespace != "" })
		}
		readable := len(found) > 0
		for _, in := range found {
			ok, err := h.MayRead(ctx, in)
			if err != nil {
				return fmt.Errorf("check %s: %w", r.field, err)
			}
			readable = readable && ok
		}
		if !readable {
			return &cairn.Error{Code: cairn.CodeInvalid, Msg: fmt.Sprintf("%s: no instance %s/%s", r.field, r.ns, r.name)}
		}
	}
	return nil
}
