package sops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlFormat reads and writes sops' YAML files: one branch per document,
// comments kept as items where sops keeps them (it moves some: an inline
// comment of a sequence element is written above it), written with
// yaml.v3 at an indent of four, sops' default. Reading and writing a file
// gives what sops gives, comment placement included.
type yamlFormat struct{}

func (yamlFormat) load(in []byte) ([]branch, error) {
	if len(bytes.TrimSpace(in)) > 0 {
		// yaml.v3 reports a duplicate key only when decoding to a map.
		if err := yaml.NewDecoder(bytes.NewReader(in)).Decode(map[string]any{}); err != nil {
			return nil, err
		}
	}
	var docs []branch
	dec := yaml.NewDecoder(bytes.NewReader(in))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err == io.EOF {
			return docs, nil
		} else if err != nil {
			return nil, err
		}
		b, err := yamlMapping(&doc, branch{}, false)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
}

// yamlComments splits a node's comment into comment items, one a line.
func yamlComments(text string, inline bool) []comment {
	var out []comment
	for _, line := range strings.Split(text, "\n") {
		if line != "" {
			out = append(out, comment{text: line[1:], inline: inline})
		}
	}
	return out
}

func (b branch) withComments(text string, inline bool) branch {
	for _, c := range yamlComments(text, inline) {
		b = append(b, item{key: c})
	}
	return b
}

func listWithComments(l []any, text string, inline bool) []any {
	for _, c := range yamlComments(text, inline) {
		l = append(l, c)
	}
	return l
}

// yamlMapping appends the items of a document or mapping node to b. The
// comments of the node itself are added unless its parent did so.
func yamlMapping(n *yaml.Node, b branch, commentsDone bool) (branch, error) {
	if !commentsDone {
		b = b.withComments(n.HeadComment, false).withComments(n.LineComment, false)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			var err error
			if b, err = yamlMapping(c, b, false); err != nil {
				return nil, err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			b = b.withComments(k.HeadComment, false).withComments(k.LineComment, false)
			// A scalar's comments belong to the mapping; a collection
			// keeps its own.
			scalar := v.Kind == yaml.ScalarNode || v.Kind == yaml.AliasNode
			if scalar {
				b = b.withComments(v.HeadComment, false).withComments(v.LineComment, true)
			}
			var key any
			if err := k.Decode(&key); err != nil {
				return nil, err
			}
			val, err := yamlValue(v, scalar)
			if err != nil {
				return nil, err
			}
			b = append(b, item{key: key, value: val})
			if scalar {
				b = b.withComments(v.FootComment, false)
			}
			b = b.withComments(k.FootComment, false)
		}
	case yaml.SequenceNode:
		return nil, errors.New("sops reads YAML documents that are mappings, not sequences")
	case yaml.ScalarNode:
		if n.ShortTag() != "!!null" { // an empty document is null
			return nil, errors.New("sops reads YAML documents that are mappings, not single values")
		}
	case yaml.AliasNode:
		var err error
		if b, err = yamlMapping(n.Alias, b, false); err != nil {
			return nil, err
		}
	}
	if !commentsDone {
		b = b.withComments(n.FootComment, false)
	}
	return b, nil
}

func yamlValue(n *yaml.Node, commentsDone bool) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		return yamlMapping(n, branch{}, commentsDone)
	case yaml.SequenceNode:
		l := []any{}
		if !commentsDone {
			l = listWithComments(listWithComments(l, n.HeadComment, false), n.LineComment, false)
		}
		for _, e := range n.Content {
			l = listWithComments(listWithComments(l, e.HeadComment, false), e.LineComment, true)
			v, err := yamlValue(e, true)
			if err != nil {
				return nil, err
			}
			l = listWithComments(append(l, v), e.FootComment, false)
		}
		if !commentsDone {
			l = listWithComments(l, n.FootComment, false)
		}
		return l, nil
	case yaml.AliasNode:
		return yamlValue(n.Alias, false)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
	return nil, nil
}

// emit writes the documents with yaml.v3 at sops' indent of four.
func (yamlFormat) emit(docs []branch) ([]byte, error) {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(4)
	for _, b := range docs {
		m := &yaml.Node{Kind: yaml.MappingNode}
		if err := yamlFill(m, b, nil); err != nil {
			return nil, err
		}
		if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{m}}); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// yamlFill fills a mapping node from a branch, or a sequence node from a
// list (b nil). Comments go where sops puts them: those before the first
// entry on the collection, the others above the next entry (inline ones
// after its value), those after the last entry below it.
func yamlFill(n *yaml.Node, b branch, l []any) error {
	var head, inline []string
	first := true
	entry := func(key *yaml.Node, v any) error {
		if first {
			addComment(&n.HeadComment, head, true)
			head, first = nil, false
		}
		vn, err := yamlNode(v)
		if err != nil {
			return err
		}
		if key != nil {
			addComment(&key.HeadComment, head, true)
			n.Content = append(n.Content, key)
		} else {
			addComment(&vn.HeadComment, head, true)
		}
		addComment(&vn.LineComment, inline, false)
		head, inline = nil, nil
		n.Content = append(n.Content, vn)
		return nil
	}
	note := func(c comment) {
		if c.inline {
			inline = append(inline, c.text)
		} else {
			head = append(head, c.text)
		}
	}
	if n.Kind == yaml.MappingNode {
		for _, it := range b {
			if c, ok := it.key.(comment); ok {
				note(c)
				continue
			}
			k := &yaml.Node{}
			if err := k.Encode(it.key); err != nil {
				return err
			}
			if err := entry(k, it.value); err != nil {
				return err
			}
		}
	} else {
		for _, e := range l {
			if c, ok := e.(comment); ok {
				note(c)
				continue
			}
			if err := entry(nil, e); err != nil {
				return err
			}
		}
	}
	rest := append(head, inline...)
	switch {
	case len(rest) == 0:
	case first:
		addComment(&n.HeadComment, rest, true)
	case n.Kind == yaml.MappingNode:
		addComment(&n.Content[len(n.Content)-2].FootComment, rest, false)
	default:
		addComment(&n.Content[len(n.Content)-1].FootComment, rest, false)
	}
	return nil
}

// addComment adds comment lines to a node's comment, before what is there
// (a head comment) or after it.
func addComment(to *string, lines []string, before bool) {
	if len(lines) == 0 {
		return
	}
	c := "#" + strings.Join(lines, "\n#")
	switch {
	case *to == "":
		*to = c
	case before:
		*to = c + "\n" + *to
	default:
		*to += "\n" + c
	}
}

func yamlNode(v any) (*yaml.Node, error) {
	switch v := v.(type) {
	case branch:
		n := &yaml.Node{Kind: yaml.MappingNode}
		return n, yamlFill(n, v, nil)
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		return n, yamlFill(n, nil, v)
	}
	n := &yaml.Node{}
	return n, n.Encode(v)
}
