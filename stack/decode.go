package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn"
)

// problems collects what is wrong with a package, each located by file,
// line and field, so one attempt reports everything at once.
type problems struct {
	causes []cairn.Cause
}

// add records msg about field (dotted, may be empty) at file:line (line 0
// when unknown).
func (p *problems) add(file string, line int, field, msg string) {
	where := file
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	if field != "" {
		where += ": " + field
	}
	p.causes = append(p.causes, cairn.Cause{Field: where, Message: msg})
}

func (p *problems) empty() bool { return len(p.causes) == 0 }

// err returns the problems as one cairn.CodeInvalid error whose Causes list
// them, or nil.
func (p *problems) err() error {
	if len(p.causes) == 0 {
		return nil
	}
	parts := make([]string, len(p.causes))
	for i, c := range p.causes {
		parts[i] = c.Field + ": " + c.Message
	}
	e := cairn.Errorf(cairn.CodeInvalid, "invalid stack package: %s", strings.Join(parts, "; "))
	e.Causes = slices.Clone(p.causes)
	return e
}

// yamlDoc is a parsed YAML document that can say on which line a field is.
type yamlDoc struct {
	file string
	root *yaml.Node // the document's top mapping (nil for an empty document)
}

func parseYAMLDoc(file string, data []byte) (*yamlDoc, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	d := &yamlDoc{file: file}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		d.root = n.Content[0]
	}
	return d, nil
}

// node returns the node at path (string keys, int indexes), or the deepest
// node found on the way and false.
func (d *yamlDoc) node(path ...any) (*yaml.Node, bool) {
	cur := d.root
	if cur == nil {
		return nil, false
	}
	for _, step := range path {
		for cur.Kind == yaml.AliasNode && cur.Alias != nil {
			cur = cur.Alias
		}
		var next *yaml.Node
		switch s := step.(type) {
		case string:
			if cur.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(cur.Content); i += 2 {
					if cur.Content[i].Value == s {
						next = cur.Content[i+1]
						break
					}
				}
			}
		case int:
			if cur.Kind == yaml.SequenceNode && s < len(cur.Content) {
				next = cur.Content[s]
			}
		}
		if next == nil {
			return cur, false
		}
		cur = next
	}
	return cur, true
}

// line is the line of the node at path, or of the closest node above it.
func (d *yamlDoc) line(path ...any) int {
	n, _ := d.node(path...)
	if n == nil {
		return 0
	}
	return n.Line
}

// fieldName renders a path as readers write it: kind.names.plural,
// readiness[1].fieldPath.
func fieldName(path ...any) string {
	var b strings.Builder
	for _, s := range path {
		switch s := s.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		}
	}
	return b.String()
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// unknownFields reports every mapping key under n that the Go type t (read
// through its json tags) does not have.
func (d *yamlDoc) unknownFields(p *problems, n *yaml.Node, t reflect.Type, path []any) {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		return
	}
	switch t.Kind() {
	case reflect.String:
		// version: 1.2 or name: 2024 are meant as strings; reading them so
		// lets the field's own check say what is wrong.
		if n.Kind == yaml.ScalarNode && n.Tag != "!!null" && n.Tag != "!!str" {
			n.Tag = "!!str"
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for i, c := range n.Content {
				d.unknownFields(p, c, t.Elem(), append(slices.Clone(path), i))
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				d.unknownFields(p, n.Content[i+1], t.Elem(), append(slices.Clone(path), n.Content[i].Value))
			}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for name := range fields {
					known = append(known, name)
				}
				slices.Sort(known)
				p.add(d.file, k.Line, fieldName(append(slices.Clone(path), k.Value)...),
					fmt.Sprintf("unknown field (known: %s)", strings.Join(known, ", ")))
				continue
			}
			d.unknownFields(p, n.Content[i+1], ft, append(slices.Clone(path), k.Value))
		}
	}
}

// jsonFields maps the JSON names of t's exported fields (embedded and
// ",inline" structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// decodeInto decodes the YAML document into v through JSON (so json tags
// and json.RawMessage fields apply), reporting unknown fields and type
// mismatches with their lines.
func (d *yamlDoc) decodeInto(p *problems, v any) {
	if d.root == nil {
		p.add(d.file, 0, "", "is empty")
		return
	}
	if d.root.Kind != yaml.MappingNode {
		p.add(d.file, d.root.Line, "", "must be a mapping of fields")
		return
	}
	d.unknownFields(p, d.root, reflect.TypeOf(v), nil)
	var generic any
	if err := d.root.Decode(&generic); err != nil {
		p.add(d.file, 0, "", err.Error())
		return
	}
	j, err := json.Marshal(generic)
	if err != nil {
		p.add(d.file, 0, "", fmt.Sprintf("cannot be read as JSON: %v", err))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			var path []any
			for _, s := range strings.Split(te.Field, ".") {
				path = append(path, s)
			}
			p.add(d.file, d.line(path...), te.Field, fmt.Sprintf("must be %s, not %s", jsonKind(te.Type), te.Value))
			return
		}
		p.add(d.file, 0, "", err.Error())
	}
}

// jsonKind names a Go type the way a stack author thinks of it.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// ManifestLine is the line of stack.yaml at path (string keys, int
// indexes), or of the closest field above it; 0 when the package has no
// stack.yaml that parses. Errors found after loading (the hub's) use it to
// say where to change the manifest.
func (s *Stack) ManifestLine(path ...any) int {
	d, err := parseYAMLDoc(ManifestFile, s.Files[ManifestFile])
	if err != nil {
		return 0
	}
	return d.line(path...)
}
