package hub

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
)

// defaultName is the name of an instance created without one: readable in
// a listing rather than a bare id. It is the alias the caller gave, else
// the last node of the Type path, made a DNS subdomain and followed by the
// last 8 hex digits of the id, so that instances created with the same
// alias (aliases are batch-local) or of the same Type do not collide:
// "db-3f9c2a1e", "config-7d41b0c2". The last digits, not the first: ids
// are UUIDv7 (newID), whose first 12 digits are the creation time, alike
// for every instance created in the same minute; the last are random.
func defaultName(alias, typePath, id string) string {
	base := alias
	if base == "" {
		base = typePath[strings.LastIndex(typePath, ".")+1:]
	}
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-.")
	if len(s) > 200 {
		s = strings.TrimRight(s[:200], "-.")
	}
	suffix := strings.ReplaceAll(id, "-", "")
	if len(suffix) > 8 {
		suffix = suffix[len(suffix)-8:]
	}
	if s == "" {
		return id
	}
	return s + "-" + suffix
}

// printerColumnTypes are the column types a CustomResourceDefinition
// allows.
var printerColumnTypes = []string{"integer", "number", "string", "boolean", "date"}

// checkPrinterColumns applies the rules the API server applies to a CRD's
// additionalPrinterColumns.
func checkPrinterColumns(cols []cairn.PrinterColumn) []cairn.Cause {
	var causes []cairn.Cause
	seen := map[string]bool{}
	for i, c := range cols {
		f := fmt.Sprintf("additionalPrinterColumns/%d", i)
		switch {
		case c.Name == "":
			causes = append(causes, cairn.Cause{Field: f + "/name", Message: "is required"})
		case seen[strings.ToLower(c.Name)] || strings.EqualFold(c.Name, "name"):
			causes = append(causes, cairn.Cause{Field: f + "/name", Message: fmt.Sprintf("%q is already a column", c.Name)})
		}
		seen[strings.ToLower(c.Name)] = true
		if !slices.Contains(printerColumnTypes, c.Type) {
			causes = append(causes, cairn.Cause{Field: f + "/type", Message: fmt.Sprintf("%q must be one of %s", c.Type, strings.Join(printerColumnTypes, ", "))})
		}
		if !strings.HasPrefix(c.JSONPath, ".") {
			causes = append(causes, cairn.Cause{Field: f + "/jsonPath", Message: fmt.Sprintf("%q must be a simple JSON path starting with a dot, such as .spec.replicas", c.JSONPath)})
		}
		if c.Priority < 0 {
			causes = append(causes, cairn.Cause{Field: f + "/priority", Message: "must not be negative"})
		}
	}
	return causes
}
