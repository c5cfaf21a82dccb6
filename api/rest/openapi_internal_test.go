package rest

import (
	"encoding/json"
	"testing"
)

// The secret mark of a Type's schema survives the conversion to OpenAPI,
// at the root, on a property and through a $ref, so a client that may read
// only the OpenAPI document still knows what to hide.
func TestToOpenAPIKeepsSecretMark(t *testing.T) {
	var schema any
	if err := json.Unmarshal([]byte(`{"type": "object",
		"$defs": {"auth": {"type": "string", "x-cairn-secret": true}},
		"properties": {"host": {"type": "string"}, "dsn": {"type": "string", "x-cairn-secret": true},
			"replicas": {"type": "array", "items": {"type": "object", "properties": {"auth": {"$ref": "#/$defs/auth"}}}}}}`), &schema); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(toOpenAPI(schema, schema, 0))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Properties map[string]struct {
			Secret bool `json:"x-cairn-secret"`
			Items  struct {
				Properties map[string]struct {
					Secret bool `json:"x-cairn-secret"`
				} `json:"properties"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(got, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Properties["dsn"].Secret || out.Properties["host"].Secret || !out.Properties["replicas"].Items.Properties["auth"].Secret {
		t.Errorf("x-cairn-secret not kept where the schema marks it: %s", got)
	}
}
