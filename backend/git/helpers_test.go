package git_test

import "encoding/json"

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
