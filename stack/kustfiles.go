package stack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

// checkResources checks resources/ as a kustomize base and builds it alone.
// It returns the base's resources (names as in resources/), or nil when a
// problem was recorded.
//
// Every entry of resources, components and bases must be a file or a
// directory of the package: kustomize would fetch a URL or clone a remote
// repository for anything else, and a stack is self-contained (the hub
// renders it, and must neither reach the network nor run git for it).
func checkResources(p *problems, files map[string][]byte) []Resource {
	before := len(p.causes)
	if kustomizationIn(files, "resources") == "" {
		p.add("resources/kustomization.yaml", 0, "", "is missing: a stack's resources/ is a kustomize base (seed 004)")
		return nil
	}
	c := resourceChecker{p: p, files: files, seen: map[string]bool{}}
	c.dir("resources")
	if len(p.causes) > before {
		return nil
	}
	fsys := filesys.MakeFsInMemory()
	if err := writeFiles(fsys, files); err != nil {
		p.add("resources", 0, "", err.Error())
		return nil
	}
	m, err := runKustomize(fsys, "/resources")
	if err != nil {
		p.add("resources", 0, "", "kustomize: "+err.Error())
		return nil
	}
	rs, err := readResources(m, func(n string) string { return n })
	if err != nil {
		p.add("resources", 0, "", err.Error())
		return nil
	}
	return rs
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
	for _, list := range []struct {
		field   string
		entries []string
	}{{"resources", k.Resources}, {"components", k.Components}, {"bases", k.Bases}} {
		for i, e := range list.entries {
			line := 0
			if doc != nil {
				line = doc.line(list.field, i)
			}
			target := path.Join(dir, e)
			switch {
			case strings.Contains(e, "://") || strings.HasPrefix(e, "git@") || path.IsAbs(e) || !inPackage(target):
				c.p.add(kf, line, fieldName(list.field, i),
					fmt.Sprintf("%q is not a path inside the stack package: a stack is self-contained (no remote or absolute resources)", e))
			case c.files[target] != nil:
				if list.field == "resources" {
					c.resourceFile(target)
				}
			case c.isDir(target):
				c.dir(target)
			default:
				c.p.add(kf, line, fieldName(list.field, i), fmt.Sprintf("%q: no such file or directory in the stack package", e))
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
