package store

import (
	"strings"
)

// RevisionKey maps a revision ("0.10.0", "1.2.3-rc.1") to a string whose
// byte order is the version order, so stores can ORDER BY it: each numeric
// run is left-padded to 20 digits, other characters are kept.
func RevisionKey(rev string) string {
	var b strings.Builder
	b.Grow(len(rev) * 4)
	for i := 0; i < len(rev); {
		if rev[i] < '0' || rev[i] > '9' {
			b.WriteByte(rev[i])
			i++
			continue
		}
		j := i
		for j < len(rev) && rev[j] >= '0' && rev[j] <= '9' {
			j++
		}
		digits := strings.TrimLeft(rev[i:j], "0")
		if len(digits) < 20 {
			b.WriteString(strings.Repeat("0", 20-len(digits)))
		}
		b.WriteString(digits)
		i = j
	}
	return b.String()
}
