package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/expr"
)

// Labels every rendered resource carries (seed 004: "All resources should be
// labelled referring to the CR instance of the stack").
const (
	LabelName = "stacks.cairn.dev/name"
	LabelUID  = "stacks.cairn.dev/uid"
	// LabelPrefix is reserved: installation labels under it are not
	// propagated, so they cannot override the two above.
	LabelPrefix = "stacks.cairn.dev/"
	// installationMarker marks the installation object dumped into the
	// overlay, so it can be taken out of kustomize's output.
	installationMarker = "internal.stacks.cairn.dev/installation-object"
)

// DefaultingKey is the label and annotation seed 004 calls the defaulting
// mark of resource classes; KeepDefaultingLabels removes it unless the
// installation's spec.keepDefaultingLabels is true.
const DefaultingKey = "resourceclass.crossplane.io/is-default-class"

// Installation is the instance of a stack's kind being rendered: what
// seed 004 calls the stack CR.
type Installation struct {
	APIVersion  string
	Kind        string
	Namespace   string
	Name        string
	UID         string
	Labels      map[string]string
	Annotations map[string]string
	Spec        map[string]any
}

// NewInstallation returns an installation of s's kind.
func (s *Stack) NewInstallation(namespace, name, uid string, labels map[string]string, spec map[string]any) Installation {
	return Installation{
		APIVersion: s.Manifest.Kind.APIVersion(),
		Kind:       s.Manifest.Kind.Names.Kind,
		Namespace:  namespace,
		Name:       name,
		UID:        uid,
		Labels:     labels,
		Spec:       spec,
	}
}

// InstallationFromObject reads an installation of s's kind from a
// Kubernetes-style object (apiVersion, kind, metadata, spec), as kubectl
// sends it or a manifest holds it. The error names what does not fit.
func (s *Stack) InstallationFromObject(obj map[string]any) (Installation, error) {
	k := s.Manifest.Kind
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if av != k.APIVersion() || kind != k.Names.Kind {
		return Installation{}, cairn.Errorf(cairn.CodeInvalid, "an installation of stack %s is apiVersion %s, kind %s, not %s %s",
			s.Manifest.Name, k.APIVersion(), k.Names.Kind, cmpOr(av, `""`), cmpOr(kind, `""`))
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return Installation{}, cairn.Errorf(cairn.CodeInvalid, "installation: metadata must be an object")
	}
	inst := Installation{APIVersion: av, Kind: kind}
	inst.Name, _ = md["name"].(string)
	inst.Namespace, _ = md["namespace"].(string)
	inst.UID, _ = md["uid"].(string)
	var err error
	if inst.Labels, err = stringMap(md["labels"], "metadata.labels"); err != nil {
		return Installation{}, err
	}
	if inst.Annotations, err = stringMap(md["annotations"], "metadata.annotations"); err != nil {
		return Installation{}, err
	}
	switch spec := obj["spec"].(type) {
	case map[string]any:
		inst.Spec = spec
	case nil:
		inst.Spec = map[string]any{}
	default:
		return Installation{}, cairn.Errorf(cairn.CodeInvalid, "installation %s: spec must be an object", inst.Name)
	}
	return inst, nil
}

func stringMap(v any, field string) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, cairn.Errorf(cairn.CodeInvalid, "installation: %s must be an object of strings", field)
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, cairn.Errorf(cairn.CodeInvalid, "installation: %s.%s must be a string", field, k)
		}
		out[k] = s
	}
	return out, nil
}

// object is the installation as a Kubernetes object.
func (in Installation) object() map[string]any {
	md := map[string]any{"name": in.Name}
	if in.Namespace != "" {
		md["namespace"] = in.Namespace
	}
	if in.UID != "" {
		md["uid"] = in.UID
	}
	if len(in.Labels) > 0 {
		md["labels"] = toAnyMap(in.Labels)
	}
	if len(in.Annotations) > 0 {
		md["annotations"] = toAnyMap(in.Annotations)
	}
	spec := in.Spec
	if spec == nil {
		spec = map[string]any{}
	}
	return map[string]any{"apiVersion": in.APIVersion, "kind": in.Kind, "metadata": md, "spec": spec}
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// KustomizationPatcher changes the generated overlay Kustomization before
// kustomize runs (seed 004's first kind of custom patcher).
type KustomizationPatcher interface {
	PatchKustomization(ctx context.Context, inst Installation, k *types.Kustomization) error
}

// ChildResourcePatcher changes the rendered resources before they are
// applied (seed 004's second kind of custom patcher). It may add, remove or
// reorder resources.
type ChildResourcePatcher interface {
	PatchChildren(ctx context.Context, inst Installation, children []Resource) ([]Resource, error)
}

// KustomizationPatcherFunc adapts a function to KustomizationPatcher.
type KustomizationPatcherFunc func(ctx context.Context, inst Installation, k *types.Kustomization) error

func (f KustomizationPatcherFunc) PatchKustomization(ctx context.Context, inst Installation, k *types.Kustomization) error {
	return f(ctx, inst, k)
}

// ChildResourcePatcherFunc adapts a function to ChildResourcePatcher.
type ChildResourcePatcherFunc func(ctx context.Context, inst Installation, children []Resource) ([]Resource, error)

func (f ChildResourcePatcherFunc) PatchChildren(ctx context.Context, inst Installation, children []Resource) ([]Resource, error) {
	return f(ctx, inst, children)
}

// Renderer renders installations. The built-in patchers always run first:
// the stack's vars and replacements, PropagateLabels, then after kustomize
// DefaultNamespace and KeepDefaultingLabels; the Renderer's own patchers run
// after them, in order. The zero value renders with the built-ins only.
type Renderer struct {
	KustomizationPatchers []KustomizationPatcher
	ChildPatchers         []ChildResourcePatcher
}

// Render renders inst with seed 004's pipeline: generate the overlay
// Kustomization (namePrefix "<name>-", the stacks.cairn.dev labels), run the
// Kustomization patchers, run kustomize over the package's resources/ and
// the overlay on an in-memory filesystem, read the resources back without
// the installation object, run the child patchers. The same stack and
// installation always give the same resources in the same order.
//
// The installation's spec is completed with the parameters schema's
// defaults and validated first; errors are cairn.CodeInvalid and name the
// field, file or var at fault.
func (r Renderer) Render(ctx context.Context, s *Stack, inst Installation) ([]Resource, error) {
	inst, k, overlay, err := r.prepare(ctx, s, inst)
	if err != nil {
		return nil, err
	}
	fsys := filesys.MakeFsInMemory()
	if err := writeFiles(fsys, s.Files); err != nil {
		return nil, err
	}
	if err := writeFiles(fsys, overlay); err != nil {
		return nil, err
	}
	m, specs, err := s.build(fsys, inst, k, overlay)
	if err != nil {
		return nil, err
	}
	original := func(name string) string {
		name = strings.TrimPrefix(name, k.NamePrefix)
		return strings.TrimSuffix(name, k.NameSuffix)
	}
	if err := s.checkSubstituted(m, specs, original); err != nil {
		return nil, fmt.Errorf("render %s: %w", inst.Name, err)
	}
	children, err := readResources(m, original)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", inst.Name, err)
	}

	cps := append([]ChildResourcePatcher{DefaultNamespace{}, KeepDefaultingLabels{}}, r.ChildPatchers...)
	for _, p := range cps {
		children, err = p.PatchChildren(ctx, inst, children)
		if err != nil {
			return nil, fmt.Errorf("render %s: child resource patcher %T: %w", inst.Name, p, err)
		}
	}
	if err := s.checkNamespaces(inst, children); err != nil {
		return nil, fmt.Errorf("render %s: %w", inst.Name, err)
	}
	return children, nil
}

// checkNamespaces refuses a child outside the installation's namespace,
// however it got there (metadata.namespace in resources/, a kustomization's
// namespace:, a replacement from a parameter, a patcher): a namespaced
// owner owns only objects of its own namespace, as in Kubernetes, and the
// stack controller writes children with its own identity, so a child
// elsewhere would let whoever may create an installation in one namespace
// have objects created in another. Checked after every patcher, so none
// can move a child out either.
//
// A Cluster installation has no namespace: its children go to the
// namespaces the package's resources name (Namespaces), which whoever
// published the stack chose, or to none (a cluster-scoped child; the stack
// controller, which knows the children's Types, refuses a namespaced one
// without a namespace). Any other namespace fails the render, since it
// would let whoever may create the installation choose where the
// controller writes.
func (s *Stack) checkNamespaces(inst Installation, children []Resource) error {
	if inst.Namespace == "" {
		return s.checkClusterNamespaces(children)
	}
	var msgs []string
	for _, c := range children {
		if ns := c.Namespace(); ns != inst.Namespace {
			msgs = append(msgs, fmt.Sprintf("%s %s (%s) is rendered into namespace %q", c.Kind(), c.OriginalName, c.Name(), ns))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return cairn.Errorf(cairn.CodeInvalid, "%s: an installation's children live in its own namespace (%q); remove the namespace from the stack's resources, or install it in that namespace",
		strings.Join(msgs, "; "), inst.Namespace)
}

func (s *Stack) checkClusterNamespaces(children []Resource) error {
	named := s.Namespaces()
	var msgs []string
	for _, c := range children {
		if ns := c.Namespace(); ns != "" && !slices.Contains(named, ns) {
			msgs = append(msgs, fmt.Sprintf("%s %s (%s) is rendered into namespace %q", c.Kind(), c.OriginalName, c.Name(), ns))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	list := "none"
	if len(named) > 0 {
		list = strings.Join(named, ", ")
	}
	return cairn.Errorf(cairn.CodeInvalid, "%s, which the stack's resources do not name: a cluster-scoped installation's children go to the namespaces its package names (%s), never to one from a parameter or a patcher",
		strings.Join(msgs, "; "), list)
}

// Namespaces returns, sorted, the namespaces the package's resources/ puts
// resources in (metadata.namespace, a kustomization's namespace:): where a
// Cluster installation's namespaced children may go.
func (s *Stack) Namespaces() []string {
	var out []string
	for _, r := range s.base {
		if ns := r.Namespace(); ns != "" && !strings.Contains(ns, "$(") && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// NamespacedResources returns the resources of the package's resources/
// that it puts in a namespace (Namespaces), as built alone: named as in
// resources/, without the installation's prefix.
func (s *Stack) NamespacedResources() []Resource {
	var out []Resource
	for _, r := range s.base {
		if ns := r.Namespace(); ns != "" && !strings.Contains(ns, "$(") {
			out = append(out, r)
		}
	}
	return out
}

// prepare runs the steps before kustomize: it completes and validates the
// installation, generates the overlay and runs the Kustomization patchers.
// overlay holds the overlay's files by package-relative path.
func (r Renderer) prepare(ctx context.Context, s *Stack, inst Installation) (Installation, *types.Kustomization, map[string][]byte, error) {
	if inst.Name == "" {
		return inst, nil, nil, cairn.Errorf(cairn.CodeInvalid, "render %s: the installation has no name", s.Manifest.Name)
	}
	if inst.APIVersion == "" {
		inst.APIVersion = s.Manifest.Kind.APIVersion()
	}
	if inst.Kind == "" {
		inst.Kind = s.Manifest.Kind.Names.Kind
	}
	spec, err := s.Defaults(inst.Spec)
	if err != nil {
		return inst, nil, nil, err
	}
	inst.Spec = spec
	if err := s.ValidateParameters(inst.Spec); err != nil {
		return inst, nil, nil, err
	}
	obj := inst.object()
	if err := s.checkVars(obj); err != nil {
		return inst, nil, nil, err
	}

	dir, err := s.renderDir(inst)
	if err != nil {
		return inst, nil, nil, err
	}
	k := s.overlay(inst, dir)
	kps := append([]KustomizationPatcher{
		manifestVars{vars: s.usedVars()},
		manifestReplacements{replacements: s.Manifest.Replacements},
		PropagateLabels{},
	}, r.KustomizationPatchers...)
	for _, p := range kps {
		if err := p.PatchKustomization(ctx, inst, k); err != nil {
			return inst, nil, nil, fmt.Errorf("render %s: kustomization patcher %T: %w", inst.Name, p, err)
		}
	}
	kb, err := yaml.Marshal(k)
	if err != nil {
		return inst, nil, nil, fmt.Errorf("render %s: overlay kustomization: %w", inst.Name, err)
	}
	md := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	ann = maps.Clone(ann)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[installationMarker] = "true"
	md["annotations"] = ann
	ib, err := yaml.Marshal(obj)
	if err != nil {
		return inst, nil, nil, fmt.Errorf("render %s: installation object: %w", inst.Name, err)
	}
	overlay := map[string][]byte{
		overlayDir + "/kustomization.yaml": kb,
		overlayDir + "/installation.yaml":  ib,
	}
	return inst, k, overlay, nil
}

// overlay is the generated Kustomization of seed 004's step 1. It uses the
// labels field without selectors rather than the deprecated commonLabels:
// commonLabels also rewrites selectors (a Deployment's is immutable, and an
// installation's labels may change) and pod templates. dir is what it
// renders: resources/, or the installation's configuration set.
func (s *Stack) overlay(inst Installation, dir string) *types.Kustomization {
	pairs := map[string]string{LabelName: inst.Name}
	if inst.UID != "" {
		pairs[LabelUID] = inst.UID
	}
	k := &types.Kustomization{
		TypeMeta:   types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		NamePrefix: inst.Name + "-",
		Resources:  []string{"../" + dir, "installation.yaml"},
		Labels:     []types.Label{{Pairs: pairs}},
	}
	return k
}

// build runs kustomize over the overlay staged in fsys and returns its
// output and the build's varReference field specs. The stack's own vars
// are taken out of the overlay and substituted by cairn after the build, as
// kustomize would (substituteVars), so kustomize prints no deprecation
// warning for vars the user never wrote. kustomize resolves them itself, as
// the overlay says, when it resolves vars anyway (a kustomization of the
// package declares some, a patcher changed the overlay's), when the build
// cannot be read ahead (kustomize then reports what is wrong), or when a
// var renamed a resource (kustomize sorts after substituting).
func (s *Stack) build(fsys filesys.FileSystem, inst Installation, k *types.Kustomization, overlay map[string][]byte) (resmap.ResMap, types.FsSlice, error) {
	dir := "/" + overlayDir
	plain := *k
	plain.Vars = nil
	specs, ownVars, walkErr := collectVarFields(fsys, dir, &plain)
	if vars := s.usedVars(); len(vars) > 0 && walkErr == nil && !ownVars && reflect.DeepEqual(k.Vars, kustomizeVars(inst, vars)) {
		kb, err := yaml.Marshal(&plain)
		if err != nil {
			return nil, nil, fmt.Errorf("render %s: overlay kustomization: %w", inst.Name, err)
		}
		if err := fsys.WriteFile(dir+"/kustomization.yaml", kb); err != nil {
			return nil, nil, fmt.Errorf("render %s: stage the overlay: %w", inst.Name, err)
		}
		m, err := runKustomize(fsys, dir)
		if err != nil {
			return nil, nil, s.renderError(inst.Name, err)
		}
		renamed, err := substituteVars(m, vars, specs)
		if err != nil {
			return nil, nil, fmt.Errorf("render %s: %w", inst.Name, err)
		}
		if !renamed {
			return m, specs, nil
		}
		if err := writeFiles(fsys, overlay); err != nil {
			return nil, nil, err
		}
	}
	m, err := runKustomize(fsys, dir)
	if err != nil {
		return nil, nil, s.renderError(inst.Name, err)
	}
	if walkErr != nil {
		return nil, nil, fmt.Errorf("render %s: read the varReference of the build: %w", inst.Name, walkErr)
	}
	return m, specs, nil
}

// runKustomize runs krusty as `kubectl kustomize` does (legacy resource
// order), with plugins disabled and loading restricted to the package.
func runKustomize(fsys filesys.FileSystem, dir string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	return krusty.MakeKustomizer(opts).Run(fsys, dir)
}

func writeFiles(fsys filesys.FileSystem, files map[string][]byte) error {
	for p, b := range files {
		if err := fsys.WriteFile("/"+p, b); err != nil {
			return fmt.Errorf("stage %s in memory: %w", p, err)
		}
	}
	return nil
}

// readResources converts kustomize's output, dropping the installation
// object. original maps a rendered name back to the name in resources/.
func readResources(m resmap.ResMap, original func(string) string) ([]Resource, error) {
	out := make([]Resource, 0, m.Size())
	for _, res := range m.Resources() {
		if res.GetAnnotations()[installationMarker] == "true" {
			continue
		}
		j, err := res.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", res.CurId(), err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return nil, fmt.Errorf("read %s: %w", res.CurId(), err)
		}
		r := Resource{Object: obj}
		r.OriginalName = original(r.Name())
		out = append(out, r)
	}
	return out, nil
}

// usedVars are the manifest's vars that some file of resources/ writes as
// $(NAME): kustomize warns on its global logger about a var that is never
// replaced, which a stack with optional vars should not cause.
func (s *Stack) usedVars() []Var {
	var out []Var
	for _, v := range s.Manifest.Vars {
		ref := []byte("$(" + v.Name + ")")
		for p, b := range s.Files {
			if strings.HasPrefix(p, "resources/") && bytes.Contains(b, ref) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// checkVars resolves every var, and every replacement whose source is the
// installation, against the installation object first, so a missing or
// non-scalar value is reported by name rather than left as a literal
// $(NAME) or reported by kustomize without saying which parameter.
func (s *Stack) checkVars(obj map[string]any) error {
	for _, v := range s.usedVars() {
		val, ok := expr.Get(obj, v.FieldPath)
		if !ok || val == nil {
			return cairn.Errorf(cairn.CodeInvalid, "var %s: the installation has no value at %s (give the parameter, or a default in the parameters schema)", v.Name, v.FieldPath)
		}
		switch val.(type) {
		case map[string]any, []any:
			return cairn.Errorf(cairn.CodeInvalid, "var %s: %s is an object or a list; a var takes a string, number or boolean", v.Name, v.FieldPath)
		}
	}
	for i, r := range s.Manifest.Replacements {
		if r.Source == nil || r.Source.Kind != s.Manifest.Kind.Names.Kind {
			continue
		}
		fp := installationSourcePath(r)
		if val, ok := expr.Get(obj, fp); !ok || val == nil {
			return cairn.Errorf(cairn.CodeInvalid, "replacements[%d]: the installation has no value at %s (give the parameter, or a default in the parameters schema)", i, fp)
		}
	}
	return nil
}

// manifestVars adds the stack's vars, each reading the installation object.
type manifestVars struct{ vars []Var }

func (p manifestVars) PatchKustomization(_ context.Context, inst Installation, k *types.Kustomization) error {
	k.Vars = append(k.Vars, kustomizeVars(inst, p.vars)...)
	return nil
}

// kustomizeVars are vars as kustomize vars reading the installation object.
func kustomizeVars(inst Installation, vars []Var) []types.Var {
	var out []types.Var
	for _, v := range vars {
		out = append(out, types.Var{
			Name:     v.Name,
			ObjRef:   types.Target{Gvk: gvk(inst.APIVersion, inst.Kind), Name: inst.Name},
			FieldRef: types.FieldSelector{FieldPath: v.FieldPath},
		})
	}
	return out
}

// gvk splits an apiVersion ("group/version" or "v1") into a resid.Gvk.
func gvk(apiVersion, kind string) resid.Gvk {
	g, v, ok := strings.Cut(apiVersion, "/")
	if !ok {
		g, v = "", apiVersion
	}
	return resid.Gvk{Group: g, Version: v, Kind: kind}
}

// manifestReplacements adds the stack's replacements to the overlay.
type manifestReplacements struct{ replacements []types.Replacement }

func (p manifestReplacements) PatchKustomization(_ context.Context, _ Installation, k *types.Kustomization) error {
	for _, r := range p.replacements {
		k.Replacements = append(k.Replacements, types.ReplacementField{Replacement: r})
	}
	return nil
}

// PropagateLabels copies every label of the installation to every rendered
// resource (seed 004: "All the labels in the configuration stack CR is
// propagated down to all resources that it deploys"), except labels under
// stacks.cairn.dev/, which cairn sets itself.
type PropagateLabels struct{}

func (PropagateLabels) PatchKustomization(_ context.Context, inst Installation, k *types.Kustomization) error {
	pairs := map[string]string{}
	for key, v := range inst.Labels {
		if !strings.HasPrefix(key, LabelPrefix) {
			pairs[key] = v
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// Before cairn's own labels, so those win on any clash.
	k.Labels = append([]types.Label{{Pairs: pairs}}, k.Labels...)
	return nil
}

// DefaultNamespace puts every rendered resource without a namespace in the
// installation's namespace (nothing for a Cluster installation): a cairn
// instance always lives in a namespace.
type DefaultNamespace struct{}

func (DefaultNamespace) PatchChildren(_ context.Context, inst Installation, children []Resource) ([]Resource, error) {
	if inst.Namespace == "" {
		return children, nil
	}
	for _, c := range children {
		md, ok := c.Object["metadata"].(map[string]any)
		if !ok {
			continue
		}
		if ns, _ := md["namespace"].(string); ns == "" {
			md["namespace"] = inst.Namespace
		}
	}
	return children, nil
}

// KeepDefaultingLabels is seed 004's keepDefaultingLabels: unless the
// installation's spec.keepDefaultingLabels is true (seed 004's example also
// writes keepDefaultingAnnotations; either is honoured), the defaulting
// mark is removed from the labels and annotations of every child, so that
// two installations do not both claim the default class.
type KeepDefaultingLabels struct {
	// Keys are the marks to remove; nil means DefaultingKey.
	Keys []string
}

func (p KeepDefaultingLabels) PatchChildren(_ context.Context, inst Installation, children []Resource) ([]Resource, error) {
	if keep, _ := inst.Spec["keepDefaultingLabels"].(bool); keep {
		return children, nil
	}
	if keep, _ := inst.Spec["keepDefaultingAnnotations"].(bool); keep {
		return children, nil
	}
	keys := p.Keys
	if keys == nil {
		keys = []string{DefaultingKey}
	}
	for _, c := range children {
		md, ok := c.Object["metadata"].(map[string]any)
		if !ok {
			continue
		}
		for _, f := range []string{"labels", "annotations"} {
			m, ok := md[f].(map[string]any)
			if !ok {
				continue
			}
			for _, key := range keys {
				delete(m, key)
			}
			if len(m) == 0 {
				delete(md, f)
			}
		}
	}
	return children, nil
}

// EncodeYAML writes resources as a multi-document YAML stream, keys sorted:
// the same resources always give the same bytes.
func EncodeYAML(w io.Writer, rs []Resource) error {
	for i, r := range rs {
		b, err := yaml.Marshal(r.Object)
		if err != nil {
			return fmt.Errorf("encode %s: %w", r.Key(), err)
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
