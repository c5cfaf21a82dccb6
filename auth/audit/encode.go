package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendJSON appends ev as json.Marshal writes it, byte for byte
// (TestAppendJSONIsMarshal), without reflection: an event is written per
// request, and encoding it by reflection cost a tenth of a cached read.
func (ev *Event) appendJSON(b []byte) []byte {
	b = append(b, `{"kind":`...)
	b = appendString(b, ev.Kind)
	b = append(b, `,"apiVersion":`...)
	b = appendString(b, ev.APIVersion)
	b = append(b, `,"level":`...)
	b = appendString(b, string(ev.Level))
	b = append(b, `,"auditID":`...)
	b = appendString(b, ev.AuditID)
	b = append(b, `,"stage":`...)
	b = appendString(b, ev.Stage)
	b = append(b, `,"requestURI":`...)
	b = appendString(b, ev.RequestURI)
	b = append(b, `,"verb":`...)
	b = appendString(b, ev.Verb)
	b = append(b, `,"user":`...)
	b = ev.User.appendJSON(b)
	if ev.ImpersonatedUser != nil {
		b = append(b, `,"impersonatedUser":`...)
		b = ev.ImpersonatedUser.appendJSON(b)
	}
	if len(ev.SourceIPs) > 0 {
		b = append(b, `,"sourceIPs":`...)
		b = appendStrings(b, ev.SourceIPs)
	}
	if ev.UserAgent != "" {
		b = append(b, `,"userAgent":`...)
		b = appendString(b, ev.UserAgent)
	}
	if r := ev.ObjectRef; r != nil {
		b = append(b, `,"objectRef":{`...)
		n := len(b)
		b = appendField(b, n, "resource", r.Resource)
		b = appendField(b, n, "namespace", r.Namespace)
		b = appendField(b, n, "name", r.Name)
		b = appendField(b, n, "apiGroup", r.APIGroup)
		b = appendField(b, n, "apiVersion", r.APIVersion)
		b = appendField(b, n, "subresource", r.Subresource)
		b = append(b, '}')
	}
	if s := ev.ResponseStatus; s != nil {
		b = append(b, `,"responseStatus":{"code":`...)
		b = strconv.AppendInt(b, int64(s.Code), 10)
		b = appendField(b, 0, "status", s.Status)
		b = appendField(b, 0, "reason", s.Reason)
		b = appendField(b, 0, "message", s.Message)
		b = append(b, '}')
	}
	if len(ev.RequestObject) > 0 {
		b = append(b, `,"requestObject":`...)
		var buf bytes.Buffer
		if err := json.Compact(&buf, ev.RequestObject); err != nil {
			b = append(b, "null"...) // not JSON: RequestObject never makes such
		} else {
			var esc bytes.Buffer
			json.HTMLEscape(&esc, buf.Bytes())
			b = append(b, esc.Bytes()...)
		}
	}
	b = append(b, `,"requestReceivedTimestamp":`...)
	b = appendTime(b, ev.RequestReceivedTimestamp)
	b = append(b, `,"stageTimestamp":`...)
	b = appendTime(b, ev.StageTimestamp)
	if len(ev.Annotations) > 0 {
		b = append(b, `,"annotations":{`...)
		var kept [4]string // the guard's two, and room: no allocation
		keys := kept[:0]
		for k := range ev.Annotations {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, ev.Annotations[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func (u *UserInfo) appendJSON(b []byte) []byte {
	b = append(b, `{"username":`...)
	b = appendString(b, u.Username)
	b = appendField(b, 0, "uid", u.UID)
	if len(u.Groups) > 0 {
		b = append(b, `,"groups":`...)
		b = appendStrings(b, u.Groups)
	}
	return append(b, '}')
}

// appendField appends an omitempty string field; first is where the
// object's fields begin (no comma before the first), 0 when one came
// before.
func appendField(b []byte, first int, name, v string) []byte {
	if v == "" {
		return b
	}
	if len(b) != first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, `":`...)
	return appendString(b, v)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hex = "0123456789abcdef"

// verbatim holds the ASCII bytes encoding/json writes as they are in a
// string: one lookup per byte of an event's strings instead of six
// comparisons (the audit line is encoded at every request).
var verbatim = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s quoted as encoding/json quotes it: HTML-safe,
// invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if verbatim[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
