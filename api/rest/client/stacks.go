package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/cairn-dev/cairn/api/rest"
)

const stacksPath = "/apis/" + rest.HubGroup + "/" + rest.HubVersion + "/stacks"

// AddStack adds a stack package (a gzipped tar archive) to the server's
// catalog. added is false when the same package was already there.
func (c *Client) AddStack(ctx context.Context, archive []byte) (obj rest.StackObject, added bool, err error) {
	body := rest.StackObject{APIVersion: rest.HubGroup + "/" + rest.HubVersion, Kind: "Stack", Spec: rest.StackSpec{Archive: archive}}
	resp, err := c.send(ctx, http.MethodPost, stacksPath, nil, "application/json", body)
	if err != nil {
		return obj, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return obj, false, decodeError(resp)
	}
	if err := decodeJSON(resp, &obj); err != nil {
		return obj, false, err
	}
	return obj, resp.StatusCode == http.StatusCreated, nil
}

// ListStacks lists the catalog.
func (c *Client) ListStacks(ctx context.Context) ([]rest.StackObject, error) {
	var l struct {
		Items []rest.StackObject `json:"items"`
	}
	err := c.do(ctx, http.MethodGet, stacksPath, nil, "", nil, &l)
	return l.Items, err
}

// GetStack returns name@version, or the highest version of name when
// version is "".
func (c *Client) GetStack(ctx context.Context, name, version string) (rest.StackObject, error) {
	n := name
	if version != "" {
		n += "@" + version
	}
	var o rest.StackObject
	err := c.do(ctx, http.MethodGet, stacksPath+"/"+url.PathEscape(n), nil, "", nil, &o)
	return o, err
}

func decodeJSON(resp *http.Response, out any) error {
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}
