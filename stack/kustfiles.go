package stack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// checkResources checks the kustomize directories an installation may
// render (resources/, or each configuration set's) and builds each alone.
// It returns every directory's resources together (names as in
// resources/; a resource several sets render once) and by directory, or
// nil when a problem was recorded, and where resources/ sets namespaces.
//
// Every path a kustomization loads (resources, components, bases, crds,
// configurations, generators, transformers, validators, patch and
// replacement files, generator files, openapi) must be a file or a
// directory of the package: kustomize would fetch a URL or clone a remote
// repository otherwise, and a stack is self-contained (the hub renders it,
// and must neither reach the network nor run git for it).
func checkResources(p *problems, files map[string][]byte, dirs []string) ([]Resource, map[string][]Resource, *namespaceSources) {
	before := len(p.causes)
	if len(dirs) == 0 {
		return nil, nil, nil
	}
	c := resourceChecker{p: p, files: files, seen: map[string]bool{}, ns: &namespaceSources{docs: map[string]location{}}}
	for _, dir := range dirs {
		if kustomizationIn(files, dir) == "" {
			p.add(dir+"/kustomization.yaml", 0, "", "is missing: a stack's resources/ is a kustomize base (seed 004)")
			return nil, nil, nil
		}
		c.dir(dir)
	}
	if len(p.causes) > before {
		return nil, nil, nil
	}
	fsys := filesys.MakeFsInMemory()
	if err := writeFiles(fsys, files); err != nil {
		p.add("resources", 0, "", err.Error())
		return nil, nil, nil
	}
	var all []Resource
	seen := map[string]bool{}
	byDir := map[string][]Resource{}
	for _, dir := range dirs {
		m, err := runKustomize(fsys, "/"+dir)
		if err != nil {
			at, msg := kustomizeMessage(err)
			if at == "" {
				at = dir
			}
			p.add(at, 0, "", "kustomize: "+msg)
			continue
		}
		rs, err := readResources(m, func(n string) string { return n })
		if err != nil {
			p.add(dir, 0, "", err.Error())
			continue
		}
		byDir[dir] = rs
		for _, r := range rs {
			if k := r.Key(); !seen[k] {
				seen[k] = true
				all = append(all, r)
			}
		}
	}
	if len(p.causes) > before {
		return nil, nil, nil
	}
	return all, byDir, c.ns
}

// location is a place in a package's files, for messages.
type location struct {
	file, field string
	line        int
	value       string
}

// namespaceSources is where resources/ sets a namespace: a kustomization's
// namespace: field (outermost first) and a resource's metadata.namespace,
// by KIND/NAME.
type namespaceSources struct {
	kustomizations []location
	docs           map[string]location
}

// checkNoNamespace reports every resource of the base that resources/ puts
// in a namespace, at the field that does, when it can tell which: an
// installation's children live in its own namespace, which cairn sets, so
// a package that fixes one would render only for installations there. A
// namespace still holding a var ($(NS)) is judged when rendered.
func (s *Stack) checkNoNamespace(p *problems) {
	var order []location
	found := map[location][]string{}
	for _, r := range s.base {
		ns := r.Namespace()
		if ns == "" || strings.Contains(ns, "$(") {
			continue
		}
		at := location{file: "resources", value: ns}
		if i := slices.IndexFunc(s.nsSources.kustomizations, func(l location) bool { return l.value == ns }); i >= 0 {
			at = s.nsSources.kustomizations[i]
		} else if l, ok := s.nsSources.docs[r.Kind()+"/"+r.OriginalName]; ok && l.value == ns {
			at = l
		}
		if found[at] == nil {
			order = append(order, at)
		}
		found[at] = append(found[at], r.Kind()+" "+r.OriginalName)
	}
	for _, at := range order {
		verb := "is"
		if len(found[at]) > 1 {
			verb = "are"
		}
		p.add(at.file, at.line, at.field, fmt.Sprintf("%s %s put in namespace %q: an installation's children live in the installation's own namespace, which cairn sets; remove it",
			joinAnd(found[at]), verb, at.value))
	}
}

// kustomizationIn returns the path of dir's kustomization file, "" if none.
func kustomizationIn(files map[string][]byte, dir string) string {
	for _, n := range konfig.RecognizedKustomizationFileNames() {
		if _, ok := files[path.Join(dir, n)]; ok {
			return path.Join(dir, n)
		}
	}
	return ""
}

type resourceChecker struct {
	p     *problems
	files map[string][]byte
	seen  map[string]bool
	ns    *namespaceSources
}

func (c *resourceChecker) isDir(p string) bool {
	prefix := p + "/"
	for f := range c.files {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}

// dir checks the kustomization of dir and everything it includes.
func (c *resourceChecker) dir(dir string) {
	if c.seen[dir] {
		return
	}
	c.seen[dir] = true
	kf := kustomizationIn(c.files, dir)
	if kf == "" {
		c.p.add(dir, 0, "", "is included as a kustomize directory but has no kustomization.yaml")
		return
	}
	var k types.Kustomization
	if err := sigsyaml.Unmarshal(c.files[kf], &k); err != nil {
		c.p.add(kf, 0, "", "is not a valid kustomization: "+err.Error())
		return
	}
	doc, _ := parseYAMLDoc(kf, c.files[kf])
	line := func(path ...any) int {
		if doc == nil {
			return 0
		}
		return doc.line(path...)
	}
	if k.Namespace != "" {
		// Before the included directories: an outer namespace wins.
		c.ns.kustomizations = append(c.ns.kustomizations, location{file: kf, line: line("namespace"), field: "namespace", value: k.Namespace})
	}
	// local checks one entry that kustomize loads: it must be a file of the
	// package, or a directory when dirOK (a kustomization, checked in turn).
	local := func(entry string, dirOK bool, at ...any) {
		target := path.Join(dir, entry)
		switch {
		case strings.Contains(entry, "://") || strings.HasPrefix(entry, "git@") || path.IsAbs(entry) || !inPackage(target):
			c.p.add(kf, line(at...), fieldName(at...),
				fmt.Sprintf("%q is not a path inside the stack package: a stack is self-contained (no remote or absolute paths)", entry))
		case c.files[target] != nil:
			switch at[0] {
			case "resources":
				c.resourceFile(target)
			case "configurations":
				c.configFile(target)
			}
		case dirOK && c.isDir(target) && (target == dir || strings.HasPrefix(dir, target+"/")):
			// kustomize refuses it ("cycle detected: candidate root ...
			// contains visited root ...", inside an accumulation chain).
			c.p.add(kf, line(at...), fieldName(at...), fmt.Sprintf("%q is %s, which contains this kustomization: kustomize refuses a directory that contains the one including it; put what is shared in a directory beside it (e.g. resources/base)", entry, target))
		case dirOK && c.isDir(target):
			c.dir(target)
		default:
			c.p.add(kf, line(at...), fieldName(at...), fmt.Sprintf("%q: no such file or directory in the stack package", entry))
		}
	}
	// inlineOr accepts inline YAML (a transformer's configuration, a
	// strategic merge patch written in place) or a local path.
	inlineOr := func(entry string, dirOK bool, at ...any) {
		if strings.Contains(entry, "\n") {
			return
		}
		local(entry, dirOK, at...)
	}
	for i, e := range k.Resources {
		local(e, true, "resources", i)
	}
	for i, e := range k.Bases {
		local(e, true, "bases", i)
	}
	for i, e := range k.Components {
		local(e, true, "components", i)
	}
	for i, e := range k.Crds {
		local(e, false, "crds", i)
	}
	for i, e := range k.Configurations {
		local(e, false, "configurations", i)
	}
	for _, l := range []struct {
		field   string
		entries []string
	}{{"generators", k.Generators}, {"transformers", k.Transformers}, {"validators", k.Validators}} {
		for i, e := range l.entries {
			inlineOr(e, true, l.field, i)
		}
	}
	for i, e := range k.PatchesStrategicMerge {
		inlineOr(string(e), false, "patchesStrategicMerge", i)
	}
	for _, l := range []struct {
		field   string
		patches []types.Patch
	}{{"patches", k.Patches}, {"patchesJson6902", k.PatchesJson6902}} {
		for i, e := range l.patches {
			if e.Path != "" {
				local(e.Path, false, l.field, i, "path")
			}
		}
	}
	for i, r := range k.Replacements {
		if r.Path != "" {
			local(r.Path, false, "replacements", i, "path")
		}
	}
	if p := k.OpenAPI["path"]; p != "" {
		local(p, false, "openapi", "path")
	}
	gens := map[string][]types.GeneratorArgs{}
	for _, g := range k.ConfigMapGenerator {
		gens["configMapGenerator"] = append(gens["configMapGenerator"], g.GeneratorArgs)
	}
	for _, g := range k.SecretGenerator {
		gens["secretGenerator"] = append(gens["secretGenerator"], g.GeneratorArgs)
	}
	for field, list := range gens {
		for i, g := range list {
			for j, f := range g.FileSources {
				_, file, found := strings.Cut(f, "=")
				if !found {
					file = f
				}
				local(file, true, field, i, "files", j)
			}
			for j, f := range g.EnvSources {
				local(f, false, field, i, "envs", j)
			}
			if g.EnvSource != "" {
				local(g.EnvSource, false, field, i, "env")
			}
		}
	}
}

func inPackage(p string) bool {
	return p != ".." && !strings.HasPrefix(p, "../")
}

// resourceFile checks that every document of a resource file is an object
// with apiVersion, kind and metadata.name.
func (c *resourceChecker) resourceFile(file string) {
	dec := yaml.NewDecoder(bytes.NewReader(c.files[file]))
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			c.p.add(file, 0, "", fmt.Sprintf("document %d: %v", i, err))
			return
		}
		d := &yamlDoc{file: file}
		if len(n.Content) == 1 {
			d.root = n.Content[0]
		}
		if d.root == nil || d.root.Kind == yaml.ScalarNode && d.root.Tag == "!!null" {
			continue // an empty document, as after a trailing ---
		}
		if d.root.Kind != yaml.MappingNode {
			c.p.add(file, d.root.Line, "", fmt.Sprintf("document %d is not an object", i))
			continue
		}
		var missing []string
		for _, f := range [][]any{{"apiVersion"}, {"kind"}, {"metadata", "name"}} {
			if n, ok := d.node(f...); !ok || n.Kind != yaml.ScalarNode || n.Value == "" {
				missing = append(missing, fieldName(f...))
			}
		}
		if len(missing) > 0 && !isList(d) {
			c.p.add(file, d.root.Line, "", fmt.Sprintf("document %d has no %s (every resource needs apiVersion, kind and metadata.name)", i, joinAnd(missing)))
		}
		if n, ok := d.node("metadata", "namespace"); ok && n.Kind == yaml.ScalarNode && n.Value != "" && len(missing) == 0 {
			kind, _ := d.node("kind")
			name, _ := d.node("metadata", "name")
			c.ns.docs[kind.Value+"/"+name.Value] = location{file: file, line: n.Line, field: "metadata.namespace", value: n.Value}
		}
	}
}

// isList reports a kind: List document, whose items kustomize unpacks.
func isList(d *yamlDoc) bool {
	n, ok := d.node("kind")
	return ok && n.Value == "List"
}

func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
