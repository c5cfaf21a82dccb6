package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/controller/install"
	"github.com/cairn-dev/cairn/deps"
)

const (
	plansPath    = "/apis/" + rest.HubGroup + "/" + rest.HubVersion + "/plans"
	installsPath = "/apis/" + rest.HubGroup + "/" + rest.HubVersion + "/installs"
)

// Plan asks the server for the plan of an install.
func (c *Client) Plan(ctx context.Context, r install.Request) (rest.PlanStatus, error) {
	var o rest.PlanObject
	body := rest.PlanObject{APIVersion: rest.HubGroup + "/" + rest.HubVersion, Kind: "Plan", Spec: r}
	if err := c.do(ctx, http.MethodPost, plansPath, nil, "application/json", body, &o); err != nil {
		return rest.PlanStatus{}, err
	}
	if o.Status == nil {
		return rest.PlanStatus{}, errors.New("the server answered a plan without status")
	}
	return *o.Status, nil
}

// Install has the server execute an install, calling progress for each
// node event as it streams in; it returns the plan and the result, or the
// install's error.
func (c *Client) Install(ctx context.Context, r install.Request, progress func(deps.Event)) (*rest.PlanStatus, *deps.Result, error) {
	body := rest.PlanObject{APIVersion: rest.HubGroup + "/" + rest.HubVersion, Kind: "Install", Spec: r}
	resp, err := c.send(ctx, http.MethodPost, installsPath, nil, "application/json", body)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return nil, nil, decodeError(resp)
	}
	var plan *rest.PlanStatus
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var l rest.InstallLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return plan, nil, fmt.Errorf("install: the server's answer: %w", err)
		}
		switch {
		case l.Event != nil:
			if progress != nil {
				progress(*l.Event)
			}
		case l.Plan != nil:
			plan = l.Plan
		case l.Status != nil:
			return plan, nil, statusError(*l.Status)
		case l.Error != "":
			return plan, nil, errors.New(l.Error)
		case l.Result != nil:
			return plan, l.Result, nil
		}
	}
	if err := sc.Err(); err != nil {
		return plan, nil, fmt.Errorf("install: reading the server's answer: %w", err)
	}
	return plan, nil, errors.New("install: the server's answer ended before the result (the install may still be running; run it again to resume)")
}
