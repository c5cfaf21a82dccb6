// Package template is cup's template controller (seed 003): Go text/template
// path templates decide where each resource lives in the repository tree,
// one file per resource, JSON or YAML by the file's extension. The Git
// backend uses it unless a backend names another controller.
package template

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller"
)

// Defaults are cup's: one JSON file per resource, under its namespace.
const (
	DefaultResource = `{{ .Namespace }}/{{ .Group }}-{{ .Version }}-{{ .Kind }}-{{ .Name }}.json`
	DefaultList     = `{{ .Namespace }}/{{ .Group }}-{{ .Version }}-{{ .Kind }}-*.json`
)

// funcs are the functions cup's template controller gives its templates,
// so a cup path_template works here unchanged.
func funcs() template.FuncMap {
	return template.FuncMap{
		"replace": strings.ReplaceAll, // {{ replace .Group "." "-" }}
	}
}

// Paths are the path templates, over Data.
type Paths struct {
	// Resource is where one resource lives. Default DefaultResource.
	Resource string `json:"resource,omitempty"`
	// List is a glob (path.Match syntax) matching every file of a kind in
	// a namespace; Namespace is "*" when listing across namespaces.
	// Default DefaultList.
	List string `json:"list,omitempty"`
}

// Data is what the path templates see.
type Data struct {
	Group, Version, Kind string
	Namespace, Name      string
	Labels               map[string]string
}

// Controller is the template controller. It implements
// controller.Controller and is safe for concurrent use.
type Controller struct {
	resource *template.Template
	list     *template.Template
	codec    Codec // nil: plain files
}

// Codec encrypts resource files (backend/sops): Encrypt turns the plain file
// into what is written, Decrypt reads either back into the plain file.
type Codec interface {
	Encrypt(name string, plain []byte) ([]byte, error)
	Decrypt(name string, data []byte) ([]byte, error)
}

// NewWithCodec is New with files encrypted by codec (nil: plain files).
func NewWithCodec(p Paths, codec Codec) (*Controller, error) {
	c, err := New(p)
	if err != nil {
		return nil, err
	}
	c.codec = codec
	return c, nil
}

// decode reads a file of this controller: decrypted, then parsed.
func (c *Controller) decode(name string, data []byte) (json.RawMessage, error) {
	if c.codec != nil {
		plain, err := c.codec.Decrypt(name, data)
		if err != nil {
			return nil, err
		}
		data = plain
	}
	return Decode(name, data)
}

var _ controller.Controller = (*Controller)(nil)

// New parses p; empty templates take cup's defaults.
func New(p Paths) (*Controller, error) {
	if p.Resource == "" {
		p.Resource = DefaultResource
	}
	if p.List == "" {
		p.List = DefaultList
	}
	r, err := template.New("resource").Funcs(funcs()).Option("missingkey=error").Parse(p.Resource)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "paths.resource: %w", err)
	}
	l, err := template.New("list").Funcs(funcs()).Option("missingkey=error").Parse(p.List)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "paths.list: %w", err)
	}
	// A template that parses can still fail on every resource (a field
	// Data lacks, a path out of the tree): try each on a sample, with
	// missing labels allowed, since a real resource may have them.
	sample := Data{Group: "example.com", Version: "v1", Kind: "Widget", Namespace: "default", Name: "sample"}
	for _, t := range []struct {
		field string
		tmpl  *template.Template
		name  string
	}{{"paths.resource", r, sample.Name}, {"paths.list", l, "*"}} {
		c, err := t.tmpl.Clone()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.field, err)
		}
		d := sample
		d.Name = t.name
		if _, err := render(c.Option("missingkey=zero"), d); err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "%s: %w", t.field, err)
		}
	}
	return &Controller{resource: r, list: l}, nil
}

// Resource is the cup/Kubernetes shape of a stored resource.
type Resource struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   Metadata        `json:"metadata"`
	Spec       json.RawMessage `json:"spec,omitempty"`
}

// Metadata identifies a resource.
type Metadata struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// APIVersion renders group and version as Kubernetes does ("v1" alone for
// the empty group).
func APIVersion(k controller.Kind) string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// Path renders where the resource of kind, namespace and name lives,
// relative to the tree's root. The Git backend reads the file at any
// commit through it without checking the tree out.
func (c *Controller) Path(kind controller.Kind, namespace, name string, labels map[string]string) (string, error) {
	return render(c.resource, Data{Group: kind.Group, Version: kind.Version, Kind: kind.Kind,
		Namespace: namespace, Name: name, Labels: labels})
}

func render(t *template.Template, d Data) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", cairn.Errorf(cairn.CodeInvalid, "path template: %w", err)
	}
	p := strings.TrimPrefix(b.String(), "/")
	// The template is configuration, the data comes from requests: a name
	// must never steer a write outside the tree.
	if !filepath.IsLocal(filepath.FromSlash(p)) || strings.HasPrefix(p, ".git/") || p == ".git" {
		return "", cairn.Errorf(cairn.CodeInvalid, "path template: %q is not a path inside the repository", b.String())
	}
	return p, nil
}

// Decode parses a resource file by its extension (.yaml, .yml: YAML;
// anything else: JSON) into JSON. Its error is a *DecodeError.
func Decode(name string, data []byte) (json.RawMessage, error) {
	if isYAML(name) {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, &DecodeError{Name: name, Err: err} // YAML's errors give the line
		}
		return j, nil
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		de := &DecodeError{Name: name, Err: errors.New("not valid JSON")}
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			de.Err = se
			de.Line, de.Column = position(data, se.Offset)
		}
		return nil, de
	}
	return json.RawMessage(bytes.TrimSpace(data)), nil
}

// DecodeError is a resource file that does not parse: its name and where
// in it (Line 0: the error says where, or cannot).
type DecodeError struct {
	Name         string
	Line, Column int
	Err          error
}

func (e *DecodeError) Error() string { return e.Name + ": " + e.Detail() }

// Detail is the error without the file's name, for a caller that names
// the file already.
func (e *DecodeError) Detail() string {
	if e.Line == 0 {
		return e.Err.Error()
	}
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// position is the 1-based line and column of the byte at offset in data
// (encoding/json reports offsets just past the offending byte).
func position(data []byte, offset int64) (line, column int) {
	before := data[:min(max(offset-1, 0), int64(len(data)))]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, len(before) - bytes.LastIndexByte(before, '\n')
}

// encode renders a resource for a file: indented JSON, or YAML, with a
// final newline, so diffs in the repository read well.
func encode(name string, resource json.RawMessage) ([]byte, error) {
	if isYAML(name) {
		return yaml.JSONToYAML(resource)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, resource, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func isYAML(name string) bool {
	ext := strings.ToLower(path.Ext(name))
	return ext == ".yaml" || ext == ".yml"
}

func notFound(kind controller.Kind, namespace, name string) error {
	return cairn.Errorf(cairn.CodeNotFound, "%s %s/%s not found", kind.Kind, namespace, name)
}

// Get reads one resource.
func (c *Controller) Get(ctx context.Context, root string, kind controller.Kind, namespace, name string) (json.RawMessage, error) {
	p, err := c.Path(kind, namespace, name, nil)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("template controller: %w", err)
	}
	defer r.Close()
	data, err := r.ReadFile(filepath.FromSlash(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notFound(kind, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("template controller: read %s: %w", p, err)
	}
	return c.decode(p, data)
}

// List reads every resource of kind in namespace ("" for all) whose labels
// include labels.
func (c *Controller) List(ctx context.Context, root string, kind controller.Kind, namespace string, labels map[string]string) ([]json.RawMessage, error) {
	ns := namespace
	if ns == "" {
		ns = "*"
	}
	glob, err := render(c.list, Data{Group: kind.Group, Version: kind.Version, Kind: kind.Kind, Namespace: ns, Name: "*"})
	if err != nil {
		return nil, err
	}
	matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(glob)))
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "paths.list %q: %w", glob, err)
	}
	slices.Sort(matches)
	var out []json.RawMessage
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			return nil, fmt.Errorf("template controller: %w", err)
		}
		doc, err := c.decode(m, data)
		if err != nil {
			return nil, fmt.Errorf("template controller: %w", err)
		}
		var r Resource
		if json.Unmarshal(doc, &r) != nil || r.Kind != kind.Kind || r.APIVersion != APIVersion(kind) {
			continue // another kind sharing the glob, or not a resource
		}
		if namespace != "" && r.Metadata.Namespace != namespace {
			continue
		}
		if !hasLabels(r.Metadata.Labels, labels) {
			continue
		}
		out = append(out, doc)
	}
	return out, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Put writes the resource to the file its identity renders to.
func (c *Controller) Put(ctx context.Context, root string, kind controller.Kind, resource json.RawMessage) error {
	var r Resource
	if err := json.Unmarshal(resource, &r); err != nil {
		return cairn.Errorf(cairn.CodeInvalid, "template controller: resource: %w", err)
	}
	if r.Metadata.Name == "" || r.Metadata.Namespace == "" {
		return cairn.Errorf(cairn.CodeInvalid, "template controller: resource: metadata.namespace and metadata.name are required")
	}
	p, err := c.Path(kind, r.Metadata.Namespace, r.Metadata.Name, r.Metadata.Labels)
	if err != nil {
		return err
	}
	data, err := encode(p, resource)
	if err != nil {
		return fmt.Errorf("template controller: encode %s: %w", p, err)
	}
	rt, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("template controller: %w", err)
	}
	defer rt.Close()
	if c.codec != nil {
		// Encryption is randomised: keep a file that already holds this
		// resource, so an unchanged value makes no commit.
		if old, err := rt.ReadFile(filepath.FromSlash(p)); err == nil {
			if doc, err := c.decode(p, old); err == nil && cairn.JSONEqual(doc, resource) {
				return nil
			}
		}
		if data, err = c.codec.Encrypt(p, data); err != nil {
			return fmt.Errorf("template controller: encrypt %s: %w", p, err)
		}
	}
	if dir := path.Dir(p); dir != "." {
		if err := rt.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return fmt.Errorf("template controller: %w", err)
		}
	}
	if err := rt.WriteFile(filepath.FromSlash(p), data, 0o644); err != nil {
		return fmt.Errorf("template controller: write %s: %w", p, err)
	}
	return nil
}

// Delete removes the resource's file, and the directories it leaves empty.
func (c *Controller) Delete(ctx context.Context, root string, kind controller.Kind, namespace, name string) error {
	p, err := c.Path(kind, namespace, name, nil)
	if err != nil {
		return err
	}
	rt, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("template controller: %w", err)
	}
	defer rt.Close()
	err = rt.Remove(filepath.FromSlash(p))
	if errors.Is(err, fs.ErrNotExist) {
		return notFound(kind, namespace, name)
	}
	if err != nil {
		return fmt.Errorf("template controller: delete %s: %w", p, err)
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if rt.Remove(filepath.FromSlash(dir)) != nil {
			break // not empty
		}
	}
	return nil
}
