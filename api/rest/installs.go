package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/cairn-dev/cairn/controller/install"
	"github.com/cairn-dev/cairn/deps"
)

// Plans and installs of stacks with dependencies (docs/dependencies.md).
// A plan needs the catalog and the installations, and executing it needs
// the plan made in the same process, so both are computed by the server:
// POST plans answers a PlanObject; POST installs executes and streams its
// progress as JSON lines (InstallLine), one per node event, then the
// result. Running the same install again resumes it.

// PlanObject is a plan request and its answer.
type PlanObject struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Spec       install.Request `json:"spec"`
	Status     *PlanStatus     `json:"status,omitempty"`
}

// PlanStatus is the plan (JSON, as `cairn plan -o json`), its text form,
// and why it cannot run, if it cannot (unmapped inputs).
type PlanStatus struct {
	Plan  *deps.Plan `json:"plan,omitempty"`
	Text  string     `json:"text,omitempty"`
	Ready bool       `json:"ready"`
	Error string     `json:"error,omitempty"`
}

// InstallLine is one line of an install's answer: an event, or (last)
// the result or the error.
type InstallLine struct {
	Event  *deps.Event  `json:"event,omitempty"`
	Plan   *PlanStatus  `json:"plan,omitempty"`
	Result *deps.Result `json:"result,omitempty"`
	Error  string       `json:"error,omitempty"`
	// Status is the error as the Status a request failing with it would
	// answer (its code and reason), since the stream has answered 200
	// before the error is known.
	Status *Status `json:"status,omitempty"`
}

// Installs plans and executes installs: install.Service over the hub by
// default.
type Installs interface {
	Plan(ctx context.Context, r install.Request) (*deps.Plan, error)
	Install(ctx context.Context, r install.Request, progress func(deps.Event)) (*deps.Plan, *deps.Result, error)
}

func planStatus(p *deps.Plan, err error) *PlanStatus {
	st := &PlanStatus{Plan: p, Ready: err == nil}
	if err != nil {
		st.Error = err.Error()
	}
	if p != nil {
		var b bytes.Buffer
		if p.Node(p.Root) != nil {
			_ = p.WriteText(&b)
		}
		st.Text = b.String()
	}
	return st
}

func (s *Server) readPlanObject(w http.ResponseWriter, r *http.Request) (PlanObject, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return PlanObject{}, err
	}
	var o PlanObject
	if err := json.Unmarshal(body, &o); err != nil {
		return o, errStatus{badRequest("the request body is not a Plan object: %v", err)}
	}
	if o.Spec.Stack == "" {
		return o, errStatus{badRequest("spec.stack is required: the stack to install, NAME or NAME@VERSION in the catalog")}
	}
	return o, nil
}

// createPlan is POST plans: the plan, 200 whether or not it can run (the
// status says); an error resolving it is a Status (422 for bad input).
func (s *Server) createPlan(w http.ResponseWriter, r *http.Request) error {
	o, err := s.readPlanObject(w, r)
	if err != nil {
		return err
	}
	p, err := s.installs.Plan(r.Context(), o.Spec)
	if p == nil && err != nil {
		return hubInvalid(err)
	}
	o.APIVersion, o.Kind = HubGroup+"/"+HubVersion, "Plan"
	o.Status = planStatus(p, err)
	writeJSON(w, http.StatusOK, o)
	return nil
}

// createInstall is POST installs: JSON lines, flushed as they come.
func (s *Server) createInstall(w http.ResponseWriter, r *http.Request) error {
	o, err := s.readPlanObject(w, r)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	fl, _ := w.(http.Flusher)
	line := func(l InstallLine) {
		_ = enc.Encode(l)
		if fl != nil {
			fl.Flush()
		}
	}
	p, res, err := s.installs.Install(r.Context(), o.Spec, func(e deps.Event) { line(InstallLine{Event: &e}) })
	if p != nil {
		line(InstallLine{Plan: planStatus(p, p.Ready())})
	}
	if err != nil {
		st := statusOf(err, target{group: HubGroup})
		line(InstallLine{Error: err.Error(), Status: &st})
		return nil
	}
	line(InstallLine{Result: res})
	return nil
}
