package git_test

import (
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/backendtest"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// conformanceContext names the resources of the suite: it calls the
// backend directly, without the hub's cairn.ResourceMeta, so the kind comes
// from the context and each name from the instance id.
var conformanceContext = json.RawMessage(`{"apiVersion":"conformance.cairn.dev/v1","kind":"Thing","namespace":"suite"}`)

func TestConformanceFile(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			return gittest.NewBackend(t, gittest.NewRemote(t).FileURL())
		},
		AcceptValue: true,
		Context:     conformanceContext,
	})
}

func TestConformanceSmartHTTP(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) cairn.Backend {
			r := gittest.NewRemote(t)
			return gittest.NewBackend(t, r.Serve(t))
		},
		AcceptValue: true,
		Context:     conformanceContext,
	})
}
