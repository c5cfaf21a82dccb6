package stack

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/filters/fieldspec"
	"sigs.k8s.io/kustomize/api/filters/refvar"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
)

// A stack's vars are substituted by cairn after kustomize's build, not
// given to kustomize as `vars:`: kustomize prints a deprecation warning
// straight to os.Stderr for every kustomization that has vars, which
// `cairn render` showed to users who never wrote one and `cairn serve`
// wrote into its structured log on every reconcile. The substitution is
// kustomize's own: the same public refvar filter and replacer over the same
// fields (its built-in varReference field specs and every varReference of
// the kustomizeconfig files of the build, merged in kustomize's order), with
// the values read from the installation object as kustomize built it, and
// at the same point (kustomize resolves vars after every transformer, name
// reference and hash suffix). When the package's own kustomizations use
// vars, or a patcher changed the overlay's, kustomize resolves them all as
// before (the warning is then about their own file).

// builtinVarReference is kustomize's built-in varReference config, a copy
// of sigs.k8s.io/kustomize/api/internal/konfig/builtinpluginconsts
// (internal, so it cannot be imported); TestBuiltinVarReferenceIsKustomizes
// compares it with the module's source.
const builtinVarReference = `
varReference:
- path: spec/jobTemplate/spec/template/spec/containers/args
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/containers/command
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/containers/env/value
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/containers/volumeMounts/mountPath
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/initContainers/args
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/initContainers/command
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/initContainers/env/value
  kind: CronJob

- path: spec/jobTemplate/spec/template/spec/initContainers/volumeMounts/mountPath
  kind: CronJob

- path: spec/jobTemplate/spec/template/volumes/nfs/server
  kind: CronJob

- path: spec/template/spec/containers/args
  kind: DaemonSet

- path: spec/template/spec/containers/command
  kind: DaemonSet

- path: spec/template/spec/containers/env/value
  kind: DaemonSet

- path: spec/template/spec/containers/volumeMounts/mountPath
  kind: DaemonSet

- path: spec/template/spec/initContainers/args
  kind: DaemonSet

- path: spec/template/spec/initContainers/command
  kind: DaemonSet

- path: spec/template/spec/initContainers/env/value
  kind: DaemonSet

- path: spec/template/spec/initContainers/volumeMounts/mountPath
  kind: DaemonSet

- path: spec/template/spec/volumes/nfs/server
  kind: DaemonSet

- path: spec/template/spec/containers/args
  kind: Deployment

- path: spec/template/spec/containers/command
  kind: Deployment

- path: spec/template/spec/containers/env/value
  kind: Deployment

- path: spec/template/spec/containers/volumeMounts/mountPath
  kind: Deployment

- path: spec/template/spec/initContainers/args
  kind: Deployment

- path: spec/template/spec/initContainers/command
  kind: Deployment

- path: spec/template/spec/initContainers/env/value
  kind: Deployment

- path: spec/template/spec/initContainers/volumeMounts/mountPath
  kind: Deployment

- path: spec/template/spec/volumes/nfs/server
  kind: Deployment

- path: spec/template/metadata/annotations
  kind: Deployment

- path: spec/rules/host
  kind: Ingress

- path: spec/tls/hosts
  kind: Ingress
  
- path: spec/tls/secretName
  kind: Ingress

- path: spec/template/spec/containers/args
  kind: Job

- path: spec/template/spec/containers/command
  kind: Job

- path: spec/template/spec/containers/env/value
  kind: Job

- path: spec/template/spec/containers/volumeMounts/mountPath
  kind: Job

- path: spec/template/spec/initContainers/args
  kind: Job

- path: spec/template/spec/initContainers/command
  kind: Job

- path: spec/template/spec/initContainers/env/value
  kind: Job

- path: spec/template/spec/initContainers/volumeMounts/mountPath
  kind: Job

- path: spec/template/spec/volumes/nfs/server
  kind: Job

- path: spec/containers/args
  kind: Pod

- path: spec/containers/command
  kind: Pod

- path: spec/containers/env/value
  kind: Pod

- path: spec/containers/volumeMounts/mountPath
  kind: Pod

- path: spec/initContainers/args
  kind: Pod

- path: spec/initContainers/command
  kind: Pod

- path: spec/initContainers/env/value
  kind: Pod

- path: spec/initContainers/volumeMounts/mountPath
  kind: Pod

- path: spec/volumes/nfs/server
  kind: Pod

- path: spec/template/spec/containers/args
  kind: ReplicaSet

- path: spec/template/spec/containers/command
  kind: ReplicaSet

- path: spec/template/spec/containers/env/value
  kind: ReplicaSet

- path: spec/template/spec/containers/volumeMounts/mountPath
  kind: ReplicaSet

- path: spec/template/spec/initContainers/args
  kind: ReplicaSet

- path: spec/template/spec/initContainers/command
  kind: ReplicaSet

- path: spec/template/spec/initContainers/env/value
  kind: ReplicaSet

- path: spec/template/spec/initContainers/volumeMounts/mountPath
  kind: ReplicaSet

- path: spec/template/spec/volumes/nfs/server
  kind: ReplicaSet

- path: spec/ports/port
  kind: Service

- path: spec/ports/targetPort
  kind: Service

- path: spec/template/spec/containers/args
  kind: StatefulSet

- path: spec/template/spec/containers/command
  kind: StatefulSet

- path: spec/template/spec/containers/env/value
  kind: StatefulSet

- path: spec/template/spec/containers/volumeMounts/mountPath
  kind: StatefulSet

- path: spec/template/spec/initContainers/args
  kind: StatefulSet

- path: spec/template/spec/initContainers/command
  kind: StatefulSet

- path: spec/template/spec/initContainers/env/value
  kind: StatefulSet

- path: spec/template/spec/initContainers/volumeMounts/mountPath
  kind: StatefulSet

- path: spec/volumeClaimTemplates/spec/nfs/server
  kind: StatefulSet

- path: spec/nfs/server
  kind: PersistentVolume

- path: metadata/labels

- path: metadata/annotations
`

// varReferenceConfig is the part of a kustomize transformer config (a
// kustomizeconfig.yaml) that vars use.
type varReferenceConfig struct {
	VarReference types.FsSlice `json:"varReference,omitempty"`
}

// parseVarReference reads a transformer config's varReference as kustomize
// does (sigs.k8s.io/yaml), sorted as kustomize sorts each config it reads.
func parseVarReference(b []byte) (types.FsSlice, error) {
	var c varReferenceConfig
	if err := sigsyaml.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	sort.Sort(c.VarReference)
	return c.VarReference, nil
}

// mergeVarReference is kustomize's TransformerConfig.Merge for
// varReference: a field spec another already selects is dropped, and the
// result is sorted. The order matters when two specs select one field
// (each substitutes once), so every merge kustomize does is done here too.
func mergeVarReference(acc, in types.FsSlice) (types.FsSlice, error) {
	out, err := slices.Clip(acc).MergeAll(in)
	if err != nil {
		return nil, err
	}
	out = slices.Clone(out)
	sort.Sort(out)
	return out, nil
}

// varFields walks a build's kustomizations for collectVarFields.
type varFields struct {
	fsys     filesys.FileSystem
	builtin  types.FsSlice
	ownVars  bool
	overlay  string
	topKust  *types.Kustomization
	visiting map[string]bool
}

// collectVarFields returns the varReference field specs of a build of the
// overlay directory as kustomize's KustTarget accumulates them
// (internal/target/kusttarget.go: each directory of resources accumulated
// alone and merged in, then the directory's own built-in and
// configurations config, then its components accumulated onto the
// result), and whether a kustomization of the build other than the overlay
// declares vars of its own. top is the overlay's Kustomization.
func collectVarFields(fsys filesys.FileSystem, overlay string, top *types.Kustomization) (types.FsSlice, bool, error) {
	builtin, err := parseVarReference([]byte(builtinVarReference))
	if err != nil {
		return nil, false, fmt.Errorf("kustomize's built-in varReference: %w", err)
	}
	w := &varFields{fsys: fsys, builtin: builtin, overlay: overlay, topKust: top, visiting: map[string]bool{}}
	specs, err := w.target(overlay, nil)
	if err != nil {
		return nil, false, err
	}
	return specs, w.ownVars, nil
}

func (w *varFields) kustomization(dir string) (*types.Kustomization, error) {
	if dir == w.overlay {
		k := *w.topKust
		k.FixKustomization()
		return &k, nil
	}
	var found []string
	for _, n := range konfig.RecognizedKustomizationFileNames() {
		if w.fsys.Exists(path.Join(dir, n)) {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s: %d kustomization files", dir, len(found))
	}
	b, err := w.fsys.ReadFile(path.Join(dir, found[0]))
	if err != nil {
		return nil, err
	}
	var k types.Kustomization
	if err := k.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path.Join(dir, found[0]), err)
	}
	if k.Vars != nil {
		w.ownVars = true
	}
	k.FixKustomization()
	return &k, nil
}

// target mirrors KustTarget.accumulateTarget for varReference; acc is the
// accumulator it starts from (nil, or the parent's for a component).
func (w *varFields) target(dir string, acc types.FsSlice) (types.FsSlice, error) {
	if w.visiting[dir] {
		return nil, fmt.Errorf("%s: kustomization cycle", dir)
	}
	w.visiting[dir] = true
	defer delete(w.visiting, dir)
	k, err := w.kustomization(dir)
	if err != nil {
		return nil, err
	}
	for _, r := range k.Resources {
		p := path.Join(dir, r)
		if !w.fsys.IsDir(p) {
			continue // a file of resources
		}
		sub, err := w.target(p, nil)
		if err != nil {
			return nil, err
		}
		if acc, err = mergeVarReference(acc, sub); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	// builtinconfig.MakeTransformerConfig: the built-in config merged
	// with the directory's configurations, themselves merged in turn.
	var files types.FsSlice
	for _, c := range k.Configurations {
		b, err := w.fsys.ReadFile(path.Join(dir, c))
		if err != nil {
			return nil, err
		}
		specs, err := parseVarReference(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, c), err)
		}
		if files, err = mergeVarReference(files, specs); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, c), err)
		}
	}
	own := w.builtin
	if len(k.Configurations) > 0 {
		if own, err = mergeVarReference(own, files); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	if acc, err = mergeVarReference(acc, own); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	// CRDs add no varReference, but kustomize merges (so sorts) again.
	if acc, err = mergeVarReference(acc, nil); err != nil {
		return nil, err
	}
	for _, c := range k.Components {
		p := path.Join(dir, c)
		sub, err := w.target(p, acc)
		if err != nil {
			return nil, err
		}
		// accumulateDirectory merges the component's result into an
		// empty accumulator.
		if acc, err = mergeVarReference(nil, sub); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return acc, nil
}

// substituteVars does what kustomize's ResolveVars does with the stack's
// vars (internal/accumulator): each var's value is the field of the
// installation object in the build, and every resource's fields of specs
// get refvar's substitution ($(NAME) alone takes the value's type, inside
// text it is formatted, $$( is a literal $(). It reports whether a
// resource's id changed (a varReference on a name or namespace), which
// would have changed kustomize's sort, applied after vars.
func substituteVars(m resmap.ResMap, vars []Var, specs types.FsSlice) (idChanged bool, err error) {
	if len(vars) == 0 {
		return false, nil
	}
	var inst *resource.Resource
	for _, res := range m.Resources() {
		if res.GetAnnotations()[installationMarker] == "true" {
			inst = res
			break
		}
	}
	if inst == nil {
		return false, cairn.Errorf(cairn.CodeInvalid, "vars: the installation object is not in kustomize's output")
	}
	values := make(map[string]any, len(vars))
	for _, v := range vars {
		val, err := inst.GetFieldValue(v.FieldPath)
		if err != nil {
			return false, cairn.Errorf(cairn.CodeInvalid, "var %s: the installation has no value at %s: %v", v.Name, v.FieldPath, err)
		}
		values[v.Name] = val
	}
	counts := map[string]int{}
	replace := refvar.MakePrimitiveReplacer(counts, values)
	for _, res := range m.Resources() {
		before := res.CurId()
		for _, fs := range specs {
			if err := res.ApplyFilter(refvar.Filter{MappingFunc: replace, FieldSpec: fs}); err != nil {
				return false, fmt.Errorf("vars: %s: %w", before, err)
			}
		}
		if res.CurId() != before {
			idChanged = true
		}
	}
	return idChanged, nil
}

// checkSubstituted finds a $(NAME) of a stack var in a field that no
// varReference field spec of the build selects: kustomize substitutes vars
// only there and leaves the rest as written, logging no more than
// "well-defined vars that were never replaced". A field a spec selects is
// never reported: what is there came from a value or an escaped $$(.
func (s *Stack) checkSubstituted(m resmap.ResMap, specs types.FsSlice, original func(string) string) error {
	var refs []string
	names := map[string]string{}
	for _, v := range s.usedVars() {
		ref := "$(" + v.Name + ")"
		refs = append(refs, ref)
		names[ref] = v.Name
	}
	if len(refs) == 0 {
		return nil
	}
	var msgs []string
	for _, res := range m.Resources() {
		if res.GetAnnotations()[installationMarker] == "true" {
			continue
		}
		covered := map[*yaml.Node]bool{}
		mark := func(n *yaml.RNode) error {
			covered[n.YNode()] = true
			return nil
		}
		for _, fs := range specs {
			fs.CreateIfNotPresent = false
			if err := res.RNode.PipeE(fieldspec.Filter{FieldSpec: fs, SetValue: mark}); err != nil {
				return fmt.Errorf("vars: %s: %w", res.CurId(), err)
			}
		}
		kind := res.GetKind()
		walkStrings(res.YNode(), nil, nil, false, covered, func(path, specPath []string, str string) {
			for _, ref := range refs {
				if strings.Contains(str, ref) {
					msgs = append(msgs, fmt.Sprintf(
						"%s %s: %s: %q: var %s is not substituted in this field: declare it under varReference (path: %s, kind: %s) in a kustomizeconfig.yaml listed under configurations: of the kustomization that lists the resource",
						kind, original(res.GetName()), strings.Join(path, "."), str, names[ref], strings.Join(specPath, "/"), kind))
					return
				}
			}
		})
	}
	if len(msgs) == 0 {
		return nil
	}
	return cairn.Errorf(cairn.CodeInvalid, "%s", strings.Join(msgs, "; "))
}

// walkStrings calls f with every string of n that no varReference covers,
// its path as written in errors (spec.args[0]) and as a kustomize fieldSpec
// path (spec/args). A string is covered when a field spec selects it, or
// selects the map or list it is directly in (refvar substitutes in those).
func walkStrings(n *yaml.Node, path, specPath []string, inCovered bool, covered map[*yaml.Node]bool, f func(path, specPath []string, s string)) {
	switch n.Kind {
	case yaml.ScalarNode:
		if yaml.IsYNodeString(n) && !inCovered && !covered[n] {
			f(path, specPath, n.Value)
		}
	case yaml.MappingNode:
		type entry struct {
			key string
			val *yaml.Node
		}
		var es []entry
		for i := 0; i+1 < len(n.Content); i += 2 {
			es = append(es, entry{n.Content[i].Value, n.Content[i+1]})
		}
		slices.SortFunc(es, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		for _, e := range es {
			walkStrings(e.val, append(slices.Clip(path), e.key), append(slices.Clip(specPath), e.key), covered[n], covered, f)
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			p := slices.Clone(path)
			if len(p) > 0 {
				p[len(p)-1] = fmt.Sprintf("%s[%d]", p[len(p)-1], i)
			}
			walkStrings(e, p, specPath, covered[n], covered, f)
		}
	}
}
