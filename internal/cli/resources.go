package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// kube holds the resource commands (get, describe, apply, create,
// replace, edit, delete, lock, unlock, api-resources): kubectl's verbs over
// the REST resources of the hub and of every served Type, through the
// client of the invocation (a.c), whichever mode gives it.
type kube struct {
	*app
	// resources is the discovery, read once per invocation and again after
	// this invocation registered Types.
	resources []client.Resource
	// backendAliases maps backend ids to aliases for tables; nil until
	// read.
	backendAliases map[string]string
}

func (r *kube) commands() []*cobra.Command {
	return []*cobra.Command{
		r.getCommand(),
		r.describeCommand(),
		r.applyCommand(),
		r.createCommand(),
		r.replaceCommand(),
		r.editCommand(),
		r.deleteCommand(),
		r.lockCommand(true),
		r.lockCommand(false),
		r.apiResourcesCommand(),
	}
}

// discover returns the served resources.
func (r *kube) discover(ctx context.Context) ([]client.Resource, error) {
	if r.resources == nil {
		list, err := r.c.Resources(ctx)
		if err != nil {
			return nil, err
		}
		r.resources = list
	}
	return r.resources, nil
}

// findResource resolves what a user typed, as kubectl does: a plural,
// singular, short name or kind, optionally qualified as NAME.GROUP or
// NAME.VERSION.GROUP. Of several versions of a group it takes the one
// discovery lists first, the preferred one.
func (r *kube) findResource(ctx context.Context, name string) (client.Resource, error) {
	all, err := r.discover(ctx)
	if err != nil {
		return client.Resource{}, err
	}
	n, qual, _ := strings.Cut(strings.ToLower(name), ".")
	var found []client.Resource
	for _, res := range all {
		if qual != "" && qual != res.Group && qual != res.Version+"."+res.Group {
			continue
		}
		if n == res.Plural || n == res.SingularName || n == strings.ToLower(res.Kind) || slices.Contains(res.ShortNames, n) {
			found = append(found, res)
		}
	}
	if len(found) == 0 {
		return client.Resource{}, cairn.Errorf(cairn.CodeNotFound, "the server doesn't have a resource type %q (cairn api-resources lists them)", name)
	}
	for _, res := range found[1:] {
		if res.Group != found[0].Group {
			return client.Resource{}, cairn.Errorf(cairn.CodeInvalid, "resource type %q is ambiguous: %s and %s; qualify it, e.g. %s.%s",
				name, found[0].GroupVersion(), res.GroupVersion(), n, found[0].Group)
		}
	}
	return found[0], nil
}

// resourceFor finds the resource that serves documents of apiVersion and
// kind.
func (r *kube) resourceFor(ctx context.Context, apiVersion, kind string) (client.Resource, error) {
	all, err := r.discover(ctx)
	if err != nil {
		return client.Resource{}, err
	}
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok || group == "" || version == "" || kind == "" {
		return client.Resource{}, cairn.Errorf(cairn.CodeInvalid, "apiVersion %q and kind %q do not name a resource: want GROUP/VERSION and a kind", apiVersion, kind)
	}
	for _, res := range all {
		if res.Group == group && res.Version == version && res.Kind == kind {
			return res, nil
		}
	}
	return client.Resource{}, cairn.Errorf(cairn.CodeNotFound, "no matches for kind %q in version %q: the server serves no such resource; apply its Type first", kind, apiVersion)
}

// kindName is how kubectl names a resource in messages: "flag.flipt.io".
func kindName(res client.Resource) string {
	return strings.ToLower(res.Kind) + "." + res.Group
}

// pluralName is the resource as "flags.flipt.io".
func pluralName(res client.Resource) string { return res.Plural + "." + res.Group }

// require refuses a verb the resource does not serve, before a request the
// server would answer with MethodNotAllowed.
func require(res client.Resource, verb string) error {
	if slices.Contains(res.Verbs, verb) {
		return nil
	}
	return cairn.Errorf(cairn.CodeInvalid, "%s does not support %s (it supports: %s)", pluralName(res), verb, strings.Join(res.Verbs, ", "))
}

// namespaceOf is the namespace a request about res uses.
func namespaceOf(res client.Resource, ns string) string {
	if !res.Namespaced {
		return ""
	}
	return cmp.Or(ns, cairn.DefaultNamespace)
}

// isHub reports whether res is one of the hub's own resources, plural.
func isHub(res client.Resource, plural string) bool {
	return res.Group == rest.HubGroup && res.Plural == plural
}

// resourceNames is a resource and the names a command got for it.
type resourceNames struct {
	res   client.Resource
	names []string
}

// parseResourceArgs reads "RESOURCE [NAME...]" or "RESOURCE/NAME...". Two
// shortcuts name TypeInstances whatever their Type: an id alone, and
// "TYPEPATH NAME..." (instances of that Type path by name in namespace).
func (r *kube) parseResourceArgs(ctx context.Context, args []string, namespace string) ([]resourceNames, error) {
	if len(args) == 0 {
		return nil, usageErrorf("you must specify the type of resource; cairn api-resources lists them")
	}
	if len(args) == 1 && uuid.Validate(args[0]) == nil {
		// An id alone names a TypeInstance, whatever its Type.
		return r.byID(ctx, args)
	}
	if !strings.Contains(args[0], "/") && strings.Contains(args[0], ",") {
		return r.kindsArgs(ctx, args)
	}
	if !strings.Contains(args[0], "/") {
		res, err := r.findResource(ctx, args[0])
		if cairn.HasCode(err, cairn.CodeNotFound) && len(args) == 1 && hub.IsTerraformID(args[0]) {
			// So does a Terraform state's or output's readable id
			// (terraformoutput.default.network-ip), unless it is a
			// resource type's name.
			return r.byID(ctx, args)
		}
		if cairn.HasCode(err, cairn.CodeNotFound) && len(args) > 1 {
			if byPath, ok, perr := r.byTypePath(ctx, args[0], args[1:], namespace); ok || perr != nil {
				return byPath, perr
			}
		}
		if err != nil {
			return nil, err
		}
		for _, n := range args[1:] {
			if strings.Contains(n, "/") {
				return nil, usageErrorf("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'cairn get resource/<resource_name>' instead of 'cairn get resource resource/<resource_name>')")
			}
		}
		return []resourceNames{{res: res, names: args[1:]}}, nil
	}
	var out []resourceNames
	for _, a := range args {
		typ, name, ok := strings.Cut(a, "/")
		if !ok || typ == "" || name == "" || strings.Contains(typ, ",") {
			return nil, usageErrorf("%q: arguments in resource/name form must have a single resource and name", a)
		}
		res, err := r.findResource(ctx, typ)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(out, func(x resourceNames) bool { return sameResource(x.res, res) }); i >= 0 {
			out[i].names = append(out[i].names, name)
			continue
		}
		out = append(out, resourceNames{res: res, names: []string{name}})
	}
	return out, nil
}

// kindsArgs resolves "KIND1,KIND2 [NAME...]" as kubectl does: every kind,
// each with the names given (none: all its objects), a kind named twice
// (or by two of its names) once, in the order given.
func (r *kube) kindsArgs(ctx context.Context, args []string) ([]resourceNames, error) {
	for _, n := range args[1:] {
		if strings.Contains(n, "/") {
			return nil, usageErrorf("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'cairn get resource/<resource_name>' instead of 'cairn get resource resource/<resource_name>')")
		}
	}
	var out []resourceNames
	for kind := range strings.SplitSeq(args[0], ",") {
		res, err := r.findResource(ctx, kind)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(out, func(x resourceNames) bool { return sameResource(x.res, res) }) {
			out = append(out, resourceNames{res: res, names: args[1:]})
		}
	}
	return out, nil
}

// byID names the TypeInstances of ids, whatever their Types.
func (r *kube) byID(ctx context.Context, ids []string) ([]resourceNames, error) {
	res, err := r.findResource(ctx, "typeinstances")
	if err != nil {
		return nil, err
	}
	return []resourceNames{{res: res, names: ids}}, nil
}

// byTypePath resolves "TYPEPATH NAME..." to the TypeInstances of that
// Type path with those names in namespace; ok is false when path names
// neither a Type nor the Type of the first instance asked for.
func (r *kube) byTypePath(ctx context.Context, path string, names []string, namespace string) ([]resourceNames, bool, error) {
	if !strings.Contains(path, ".") {
		return nil, false, nil
	}
	res, err := r.findResource(ctx, "typeinstances")
	if err != nil {
		return nil, false, nil
	}
	ids := make([]string, len(names))
	namespace = cmp.Or(namespace, cairn.DefaultNamespace)
	for i, n := range names {
		inst, err := r.c.GetInstanceByName(ctx, path, namespace, n, false)
		if i == 0 && cairn.HasCode(err, cairn.CodeNotFound) {
			types, terr := r.c.ListTypes(ctx, store.TypeFilter{PathPrefix: path})
			if terr != nil || !slices.ContainsFunc(types, func(t cairn.Type) bool { return t.Path == path }) {
				return nil, false, nil
			}
			if slices.ContainsFunc(types, func(t cairn.Type) bool { return t.Path == path && t.ClusterScoped() }) {
				// A cluster-scoped kind's instances have no namespace:
				// -n is ignored, as kubectl ignores it.
				namespace = ""
				inst, err = r.c.GetInstanceByName(ctx, path, namespace, n, false)
			}
		}
		if err != nil {
			return nil, true, err
		}
		ids[i] = inst.ID
	}
	return []resourceNames{{res: res, names: ids}}, true, nil
}

func sameResource(a, b client.Resource) bool {
	return a.Group == b.Group && a.Version == b.Version && a.Plural == b.Plural
}

// resolveName turns what a user typed into the name the server knows: a
// backend may be named by its alias.
func (r *kube) resolveName(ctx context.Context, res client.Resource, name string) (string, error) {
	if !isHub(res, "backends") || uuid.Validate(name) == nil {
		return name, nil
	}
	aliases, err := r.backendAliasMap(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for id, a := range aliases {
		if a == name {
			ids = append(ids, id)
		}
	}
	switch len(ids) {
	case 0:
		return name, nil // the server says it is not found
	case 1:
		return ids[0], nil
	}
	slices.Sort(ids)
	return "", cairn.Errorf(cairn.CodeInvalid, "%q is the alias of several backends (%s); use an id", name, cairn.QuoteIDs(ids))
}

// backendAliasMap maps each storage backend's id to its alias.
func (r *kube) backendAliasMap(ctx context.Context) (map[string]string, error) {
	if r.backendAliases != nil {
		return r.backendAliases, nil
	}
	l, err := r.c.ListAll(ctx, client.Backends, "", client.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the backends: %w", err)
	}
	m := map[string]string{}
	for _, raw := range l.Items {
		var b rest.BackendObject
		if json.Unmarshal(raw, &b) == nil && b.Spec.Alias != "" {
			m[b.Metadata.Name] = b.Spec.Alias
		}
	}
	r.backendAliases = m
	return m, nil
}

// backendName shows a backend by its alias when the server knows one; a
// table is still worth printing when the backends cannot be listed.
func (r *kube) backendName(ctx context.Context, id string) string {
	m, err := r.backendAliasMap(ctx)
	if err != nil {
		r.backendAliases = map[string]string{}
		return id
	}
	return cmp.Or(m[id], id)
}

// object is a served object as the CLI reads it: what every kind shares,
// the rest raw.
type object struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   rest.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
	Status     json.RawMessage `json:"status,omitempty"`
	raw        json.RawMessage
}

func decodeObject(raw json.RawMessage) (object, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return o, fmt.Errorf("the server answered with an object that does not decode: %w", err)
	}
	o.raw = raw
	return o, nil
}

// created is the object's creation time, zero when unknown.
func (o object) created() time.Time {
	t, _ := time.Parse(time.RFC3339, o.Metadata.CreationTimestamp)
	return t
}
