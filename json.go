package cairn

import (
	"bytes"
	"encoding/json"
)

// JSONEqual reports whether two JSON documents are equal as values: object
// members in any order, numbers by value. Two empty documents are equal; a
// document that does not parse equals only the same bytes. Writers use it
// to tell a no-op update from a change.
func JSONEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return equalJSONValues(x, y)
}

func equalJSONValues(x, y any) bool {
	switch xv := x.(type) {
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for k, v := range xv {
			w, ok := yv[k]
			if !ok || !equalJSONValues(v, w) {
				return false
			}
		}
		return true
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for i := range xv {
			if !equalJSONValues(xv[i], yv[i]) {
				return false
			}
		}
		return true
	default:
		return x == y
	}
}
