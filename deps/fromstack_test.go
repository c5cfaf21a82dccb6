package deps

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/stack"
)

func TestFromManifest(t *testing.T) {
	st, err := stack.Load(context.Background(), "../examples/stacks/minimal-gcp")
	if err != nil {
		t.Fatal(err)
	}
	s, err := FromManifest(&st.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "minimal-gcp" || s.Kind != "MinimalGCP" || s.parameter("region") == nil || !s.parameter("region").Required ||
		s.parameter("keepDefaultingLabels").Required || !s.parameter("keepDefaultingLabels").HasDefault || len(s.Outputs) == 0 {
		t.Fatalf("%+v", s)
	}

	m := st.Manifest
	m.Credentials = []byte(`[{"name": "sa-key", "type": "cap.type.gcp.credentials"}]`)
	m.Dependencies = []byte(`{"requires": [{"name": "dns", "bundle": "dns@1.0.0", "credentials": {"key": "${bundle.credentials.sa-key}"}, "parameters": {"zone": "${bundle.parameters.regoin}"}}]}`)
	if _, err := FromManifest(&m); err == nil || !strings.Contains(err.Error(), `dependencies.requires[0].parameters.zone: ${bundle.parameters.regoin}: stack minimal-gcp has no parameter "regoin"`) {
		t.Fatalf("error %v", err)
	}
}
