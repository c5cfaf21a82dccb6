package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// rawDoc is one document of a source as JSON, before its kind is known.
type rawDoc struct {
	json json.RawMessage
	line int   // 1-based line where the document starts, or of err
	err  error // the document does not parse; json is nil
}

// splitSource turns a YAML or JSON stream into JSON documents. JSON input
// (first non-blank byte '{' or '[') is read as a stream of JSON values, so
// numbers and key order survive untouched; anything else is YAML, split at
// "---" lines as kubectl does and converted with sigs.k8s.io/yaml, so YAML
// means here what it means to kubectl (YAML 1.1 scalars included).
// Empty documents are dropped; documents that do not parse are kept, with
// their error, so the others keep their index.
func splitSource(data []byte) []rawDoc {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(data)
	}
	return splitYAML(data)
}

func splitJSON(data []byte) []rawDoc {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []rawDoc
	for {
		start := skipSpace(data, int(dec.InputOffset()))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			// A JSON stream cannot be resumed after a syntax error.
			line := lineAt(data, start)
			if se, ok := errors.AsType[*json.SyntaxError](err); ok {
				line = lineAt(data, int(se.Offset))
			}
			return append(docs, rawDoc{line: line, err: fmt.Errorf("invalid JSON: %w", err)})
		}
		docs = append(docs, rawDoc{json: raw, line: lineAt(data, start)})
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && bytes.IndexByte([]byte(" \t\r\n"), data[i]) >= 0 {
		i++
	}
	return i
}

// lineAt returns the 1-based line of byte offset off.
func lineAt(data []byte, off int) int {
	off = min(off, len(data))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// splitYAML converts every chunk it can; a chunk that does not parse is
// reported and the others still are, since chunks are independent.
func splitYAML(data []byte) []rawDoc {
	var docs []rawDoc
	for _, c := range yamlChunks(data) {
		j, err := yaml.YAMLToJSONStrict(c.data)
		if err != nil {
			line, err := yamlError(c, err)
			docs = append(docs, rawDoc{line: line, err: err})
			continue
		}
		if bytes.Equal(j, []byte("null")) {
			continue
		}
		docs = append(docs, rawDoc{json: j, line: c.line + leadingBlankLines(c.data)})
	}
	return docs
}

// yamlLineRE finds the document-relative line in a go-yaml error.
var yamlLineRE = regexp.MustCompile(`^(?:error converting YAML to JSON: )?yaml: line (\d+): `)

// yamlError turns the parser's document-relative line into a line of the
// source and drops the parser's prefixes from the message.
func yamlError(c chunk, err error) (int, error) {
	msg := err.Error()
	line := c.line
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		line = c.line + n - 1
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, "error converting YAML to JSON: "), "yaml: ")
	}
	return line, errors.New("invalid YAML: " + msg)
}

type chunk struct {
	data []byte
	line int
}

// yamlChunks splits at lines that start with "---" followed by the end of
// the line or a blank. The separator line stays with the document it opens,
// so "--- !tag" or "--- {a: 1}" keep their meaning and line numbers match.
func yamlChunks(data []byte) []chunk {
	var out []chunk
	start, startLine, line := 0, 1, 1
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		if i > start && isSeparator(data[i:next]) {
			out = append(out, chunk{data: data[start:i], line: startLine})
			start, startLine = i, line
		}
		i = next
		line++
	}
	return append(out, chunk{data: data[start:], line: startLine})
}

func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	return ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r' || rest[0] == '\n')
}

// leadingBlankLines counts the blank, comment and "---" lines before a
// document's content, so its line points at its first field.
func leadingBlankLines(data []byte) int {
	n := 0
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			return n
		}
		n++
		data = rest
	}
	return n
}
