// Package hubrest is the gotemplate backend's Source when it runs as an
// external backend: it reads instances through a cairn hub's REST API
// (hub.cairn.dev/v1 typeinstances, the Capact view with spec.value), so the
// backend needs no access to the hub's store.
package hubrest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
)

// Source reads instance values from a hub over REST.
type Source struct {
	c *client.Client
}

// New returns a Source on c.
func New(c *client.Client) *Source { return &Source{c: c} }

// Value returns the latest value of an instance; the hub reads it from the
// instance's own backend, so a projection of a projection renders through.
// Errors keep the hub's codes (the client maps Status objects back).
func (s *Source) Value(ctx context.Context, id string) (json.RawMessage, error) {
	raw, err := s.c.Get(ctx, client.TypeInstances, "", id)
	if err != nil {
		return nil, fmt.Errorf("get TypeInstance %q from %s: %w", id, s.c.Server(), err)
	}
	var obj rest.TypeInstanceObject
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode TypeInstance %q from %s: %w", id, s.c.Server(), err)
	}
	return obj.Spec.Value, nil
}
