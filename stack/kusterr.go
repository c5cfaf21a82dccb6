package stack

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
)

// kustomizeMessage turns a kustomize error into one line that says what is
// wrong, and returns the package directory whose kustomization it arose in
// ("" when kustomize does not say). kustomize tries each resources entry
// as a file and then as a directory, and reports both attempts chained:
// "accumulation err='<as a file>': <as a directory>", where one of the two
// is only "it is not a file" or "it is not a directory"; the real one is
// kept, the other dropped, and a recursion into a directory names it. A
// value dumped across lines ("node contents:\n...") is folded into the
// line.
func kustomizeMessage(err error) (dir, msg string) {
	msg = err.Error()
	const accum = "accumulation err='"
	for {
		i := strings.Index(msg, accum)
		if i < 0 {
			break
		}
		rest := msg[i+len(accum):]
		if j := strings.Index(rest, "': recursed accumulation of path '"); j >= 0 {
			// The entry is a directory: the error is in it.
			rest = rest[j+len("': recursed accumulation of path '"):]
			k := strings.Index(rest, "': ")
			if k < 0 {
				break
			}
			dir = strings.TrimPrefix(rest[:k], "/")
			msg = rest[k+len("': "):]
			continue
		}
		if j := strings.LastIndex(rest, "': must build at directory: "); j >= 0 {
			// The entry is a file: the error is the file's.
			msg = rest[:j]
			continue
		}
		break
	}
	msg = strings.TrimPrefix(msg, "accumulating resources: ")
	msg = strings.ReplaceAll(msg, "error unmarshaling JSON: while decoding JSON: json: ", "")
	if before, dump, ok := strings.Cut(msg, ": node contents:\n"); ok {
		msg = before + " (the node there is: " + foldLines(dump) + ")"
	}
	return dir, foldLines(msg)
}

// foldLines joins the non-blank lines of s with "; ".
func foldLines(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

var replacementFieldRE = regexp.MustCompile(`unable to find field "([^"]*)" in replacement target`)

// renderError is the error of a render that kustomize refused. A
// replacement of stack.yaml whose target fieldPath does not fit the
// rendered resource is named with its line in stack.yaml: kustomize only
// quotes the fieldPath.
func (s *Stack) renderError(name string, err error) error {
	dir, msg := kustomizeMessage(err)
	if dir != "" && dir != overlayDir {
		msg = dir + ": " + msg
	}
	if m := replacementFieldRE.FindStringSubmatch(msg); m != nil {
		for i, r := range s.Manifest.Replacements {
			for j, t := range r.Targets {
				if t == nil {
					continue
				}
				if k := slices.Index(t.FieldPaths, m[1]); k >= 0 {
					where := "stack.yaml"
					if doc, derr := parseYAMLDoc("stack.yaml", s.Files["stack.yaml"]); derr == nil {
						if line := doc.line("replacements", i, "targets", j, "fieldPaths", k); line > 0 {
							where = fmt.Sprintf("stack.yaml:%d", line)
						}
					}
					return cairn.Errorf(cairn.CodeInvalid, "render %s of stack %s: %s: %s: %q: %s", name, s.Manifest.Name,
						where, fieldName("replacements", i, "targets", j, "fieldPaths", k), m[1], msg)
				}
			}
		}
	}
	return cairn.Errorf(cairn.CodeInvalid, "render %s of stack %s: kustomize: %s", name, s.Manifest.Name, msg)
}

// kustomizeConfigFields are the fields of a kustomize transformer
// configuration (kustomizeconfig.yaml), which kustomize decodes strictly
// but reports without the file.
var kustomizeConfigFields = []string{"commonAnnotations", "commonLabels", "images", "labels", "namePrefix", "nameReference",
	"nameSuffix", "namespace", "replicas", "templateLabels", "varReference", "volumeClaimTemplateLabels"}

// configFile checks a file listed under a kustomization's configurations:
// each top-level field must be one kustomize knows, reported with its line
// (a misspelled varReference would otherwise fail the build naming no
// file).
func (c *resourceChecker) configFile(file string) {
	doc, err := parseYAMLDoc(file, c.files[file])
	if err != nil || doc.root == nil || len(doc.root.Content)%2 != 0 {
		return // kustomize reports what it cannot read
	}
	for i := 0; i < len(doc.root.Content); i += 2 {
		k := doc.root.Content[i]
		if !slices.Contains(kustomizeConfigFields, k.Value) {
			c.p.add(path.Clean(file), k.Line, k.Value, "unknown field (known: "+strings.Join(kustomizeConfigFields, ", ")+")")
		}
	}
}
