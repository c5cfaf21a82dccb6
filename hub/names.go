package hub

import (
	"strings"
)

// defaultName is the name of an instance created without one: readable in
// a listing rather than a bare id. It is the alias the caller gave, else
// the last node of the Type path, made a DNS subdomain and followed by the
// first 8 characters of the id, so that instances created with the same
// alias (aliases are batch-local) or of the same Type do not collide:
// "db-3f9c2a1e", "config-7d41b0c2".
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
		suffix = suffix[:8]
	}
	if s == "" {
		return id
	}
	return s + "-" + suffix
}
