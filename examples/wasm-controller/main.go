// Command wasm-controller is an example cairn WASM controller built on
// sdk/controller. Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -o wasm-controller.wasm ./examples/wasm-controller
//
// It stores each resource as YAML, one file per resource, at
//
//	<namespace>/<kind>.<group>/<name>.yaml   (kind lower-cased; ".<group>" only when there is a group)
//
// e.g. team-a/widget.example.com/blue.yaml. That is a layout the template
// controller (one JSON file per resource named after group, version and
// kind) cannot express, which is the point of WASM controllers: the layout
// a repository already has, or reviewers prefer, is the controller's choice.
// The version is not part of the path, so a resource keeps its file when its
// apiVersion moves on.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/sdk/controller"
)

func main() { controller.Main(yamlTree{}) }

type yamlTree struct{}

// Prime converts a resource between JSON and YAML once before the call
// comes, when the host starts instances ahead of their calls (cairn does):
// the YAML library's first conversion in a fresh instance costs more than
// the call's own (see controller.Primer).
func (yamlTree) Prime() {
	data, err := yaml.JSONToYAML([]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"b","labels":{"k":"v"}},"spec":{"n":1,"on":true,"list":["x",null]}}`))
	if err == nil {
		_, _ = yaml.YAMLToJSON(data)
	}
	_, _ = filePath(controller.Kind{Group: "example.com", Version: "v1", Kind: "Widget"}, "b", "a")
}

// kindDir is the directory of kind's resources within a namespace.
func kindDir(kind controller.Kind) string {
	d := strings.ToLower(kind.Kind)
	if kind.Group != "" {
		d += "." + strings.ToLower(kind.Group)
	}
	return d
}

// segment refuses names that would not be one path element; os.Root
// would stop an escape anyway, but a clear message is better than EPERM.
func segment(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
		return controller.Invalid("%s %q cannot be used as a file name", what, s)
	}
	return nil
}

func filePath(kind controller.Kind, namespace, name string) (string, error) {
	if err := segment("namespace", namespace); err != nil {
		return "", err
	}
	if err := segment("name", name); err != nil {
		return "", err
	}
	return path.Join(namespace, kindDir(kind), name+".yaml"), nil
}

func (yamlTree) Get(root *os.Root, kind controller.Kind, namespace, name string) (json.RawMessage, error) {
	p, err := filePath(kind, namespace, name)
	if err != nil {
		return nil, err
	}
	return readResource(root, p, kind, namespace, name)
}

func readResource(root *os.Root, p string, kind controller.Kind, namespace, name string) (json.RawMessage, error) {
	data, err := root.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, controller.NotFound("%s %q not found in namespace %q", kind.Kind, name, namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	doc, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid YAML: %w", p, err)
	}
	return doc, nil
}

func (yamlTree) List(root *os.Root, kind controller.Kind, namespace string, labels map[string]string) ([]json.RawMessage, error) {
	namespaces := []string{namespace}
	if namespace == "" {
		entries, err := fs.ReadDir(root.FS(), ".")
		if err != nil {
			return nil, fmt.Errorf("list namespaces: %w", err)
		}
		namespaces = namespaces[:0]
		for _, e := range entries {
			// Dot directories (.git, .github) are not namespaces.
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				namespaces = append(namespaces, e.Name())
			}
		}
	} else if err := segment("namespace", namespace); err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, ns := range namespaces {
		dir := path.Join(ns, kindDir(kind))
		entries, err := fs.ReadDir(root.FS(), dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".yaml")
			if !ok || e.IsDir() {
				continue
			}
			doc, err := readResource(root, path.Join(dir, e.Name()), kind, ns, name)
			if err != nil {
				return nil, err
			}
			md, err := controller.ParseMetadata(doc)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path.Join(dir, e.Name()), err)
			}
			if controller.MatchLabels(md.Labels, labels) {
				out = append(out, doc)
			}
		}
	}
	return out, nil
}

func (yamlTree) Put(root *os.Root, kind controller.Kind, res controller.Resource) error {
	ns := res.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	p, err := filePath(kind, ns, res.Metadata.Name)
	if err != nil {
		return err
	}
	data, err := yaml.JSONToYAML(res.Raw)
	if err != nil {
		return fmt.Errorf("encode %s as YAML: %w", p, err)
	}
	if err := root.MkdirAll(path.Dir(p), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", path.Dir(p), err)
	}
	if err := root.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func (yamlTree) Delete(root *os.Root, kind controller.Kind, namespace, name string) error {
	p, err := filePath(kind, namespace, name)
	if err != nil {
		return err
	}
	err = root.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return controller.NotFound("%s %q not found in namespace %q", kind.Kind, name, namespace)
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}
