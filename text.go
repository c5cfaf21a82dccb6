package cairn

import (
	"fmt"
	"strings"
)

// BoundText is s cut to at most max bytes (on a rune boundary) with the
// count of what was cut said, control characters replaced by spaces and
// invalid UTF-8 by U+FFFD: text that something outside cairn chose (a
// storage backend's error), kept printable and short wherever it is shown.
func BoundText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !startsRune(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:cut], len(s)-cut)
}

func startsRune(b byte) bool { return b&0xC0 != 0x80 }

// isControl reports C0 and C1 controls, DEL, and the Unicode format
// characters that reorder or hide text on a terminal or page (bidi
// overrides and isolates, zero-width characters).
func isControl(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7F && r < 0xA0:
		return true
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0xFEFF:
		return true
	}
	return false
}

// MaxErrorText bounds the part of an error that a service outside cairn
// wrote (a storage backend's, a Git server's, an S3 service's message) in
// what cairn shows and logs.
const MaxErrorText = 1024

// BoundError is err with its text bounded as BoundText bounds it (at most
// max bytes, printable); errors.Is and errors.As still see err. Nil stays
// nil.
func BoundError(err error, max int) error {
	if err == nil {
		return nil
	}
	return boundError{err: err, msg: BoundText(err.Error(), max)}
}

type boundError struct {
	err error
	msg string
}

func (e boundError) Error() string { return e.msg }
func (e boundError) Unwrap() error { return e.err }
