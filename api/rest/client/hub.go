package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/hub"
)

// Policies is the hub's policy, a singleton (rest.PolicyName).
var Policies = Resource{Group: rest.HubGroup, Version: rest.HubVersion, Plural: "policies", Kind: "Policy"}

// History reads every resource version of the TypeInstance id,
// oldest first (typeinstances/{id}/resourceversions).
func (c *Client) History(ctx context.Context, id string, withValues bool) ([]cairn.ResourceVersion, error) {
	q := url.Values{}
	if !withValues {
		q.Set("values", "false")
	}
	var out rest.ResourceVersionList
	err := c.do(ctx, http.MethodGet, TypeInstances.path("", id)+"/resourceversions", q, "", nil, &out)
	return out.Items, err
}

// BackendHealth asks the server to connect to the backend id and report
// its health (backends/{id}/check).
func (c *Client) BackendHealth(ctx context.Context, id string) (rest.BackendCheck, error) {
	var out rest.BackendCheck
	err := c.do(ctx, http.MethodGet, Backends.path("", id)+"/check", nil, "", nil, &out)
	return out, err
}

// RotateKeys re-encrypts a SOPS Git backend's files to new age recipients
// (backends/{id}/rotatekeys).
func (c *Client) RotateKeys(ctx context.Context, id string, r hub.KeyRotation) (hub.KeyRotationResult, error) {
	in := rest.KeyRotation{APIVersion: rest.HubGroup + "/" + rest.HubVersion, Kind: "KeyRotation", Spec: r}
	var out rest.KeyRotation
	if err := c.do(ctx, http.MethodPost, Backends.path("", id)+"/rotatekeys", nil, "application/json", in, &out); err != nil {
		return hub.KeyRotationResult{}, err
	}
	if out.Status == nil {
		return hub.KeyRotationResult{}, fmt.Errorf("rotate keys of backend %q: the server's answer has no status", id)
	}
	return *out.Status, nil
}

// Explain says which rule and backend the policy picks for a Type
// (policies/default/explain).
func (c *Client) Explain(ctx context.Context, path, revision string) (hub.PolicyExplanation, error) {
	q := url.Values{"path": {path}}
	if revision != "" {
		q.Set("revision", revision)
	}
	var out hub.PolicyExplanation
	err := c.do(ctx, http.MethodGet, Policies.path("", rest.PolicyName)+"/explain", q, "", nil, &out)
	return out, err
}
