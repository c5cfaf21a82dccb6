package store

import (
	"strings"
)

// RevisionKey maps a revision ("0.10.0", "1.2.3-rc.1") to a string whose
// byte order is the version order, so stores can ORDER BY it: each numeric
// run is left-padded to 20 digits, other characters are kept.
func RevisionKey(rev string) string {
	// Sized first, written once: every create computes its Type's key
	// (the writer's insert, the read cache's index).
	n := 0
	for i := 0; i < len(rev); {
		j := digitsEnd(rev, i)
		if j == i {
			n++
			i++
			continue
		}
		n += max(20, len(strings.TrimLeft(rev[i:j], "0")))
		i = j
	}
	var b strings.Builder
	b.Grow(n)
	for i := 0; i < len(rev); {
		j := digitsEnd(rev, i)
		if j == i {
			b.WriteByte(rev[i])
			i++
			continue
		}
		digits := strings.TrimLeft(rev[i:j], "0")
		if len(digits) < 20 {
			b.WriteString(zeros[:20-len(digits)])
		}
		b.WriteString(digits)
		i = j
	}
	return b.String()
}

// zeros pads a numeric run of a revision key.
const zeros = "00000000000000000000"

// digitsEnd returns where the run of digits at i in s ends (i when s[i]
// is no digit).
func digitsEnd(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
