package stack

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
)

// Status is what the controller writes in an installation's status.
//
// Conditions follow the Kubernetes API conventions: Synced (the last
// reconcile applied the render: ReconcileSuccess, or ReconcileError with
// the error), Ready (every child passes its readiness checks; the message
// names every child that does not and why) and, while a deletion is under
// way, Deleting. Events are the last MaxEvents things that happened (an
// apply that changed children, a failure, a deletion step), newest last:
// cairn keeps them in the status rather than as separate Event objects, so
// they travel with the installation through every store and façade.
type Status struct {
	ObservedGeneration int64          `json:"observedGeneration,omitempty"`
	Conditions         []Condition    `json:"conditions,omitempty"`
	Outputs            map[string]any `json:"outputs,omitempty"`
	Stack              *stackRef      `json:"stack,omitempty"`
	// Configuration is the configuration set whose children the last
	// successful reconcile applied, for a stack that has sets (seed 004);
	// a spec that does not name one gets the default, which this says.
	Configuration string `json:"configuration,omitempty"`
	// Sharing is status.sharing of seed 002's Installation Resource: the
	// installation interface's digest and the interface the stack
	// provides, cached from the stack definition for the dependency query.
	Sharing   *deps.SharingStatus `json:"sharing,omitempty"`
	Resources []ResourceStatus    `json:"resources,omitempty"`
	Events    []Event             `json:"events,omitempty"`
}

// Condition is one condition of the installation.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
}

type stackRef struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// ResourceStatus is one child as the last reconcile saw it; cairn trace
// prints them.
type ResourceStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	Backend    string `json:"backend,omitempty"`
	Synced     bool   `json:"synced"`
	Ready      bool   `json:"ready"`
	Reason     string `json:"reason,omitempty"`
}

// Event is one thing that happened to the installation.
type Event struct {
	Time    string `json:"time"`
	Type    string `json:"type"` // Normal or Warning
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// MaxEvents bounds the events kept in the status.
const MaxEvents = 10

func readStatus(inst cairn.Instance) Status {
	var st Status
	if len(inst.Status) > 0 {
		_ = json.Unmarshal(inst.Status, &st)
	}
	return st
}

func (s Status) clone() Status {
	b, _ := json.Marshal(s)
	var out Status
	_ = json.Unmarshal(b, &out)
	return out
}

func (s *Status) condition(t string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// setCondition sets a condition, keeping its lastTransitionTime unless its
// status changes.
func (s *Status) setCondition(c Condition, now time.Time) {
	c.ObservedGeneration = s.ObservedGeneration
	if old := s.condition(c.Type); old != nil {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status || c.LastTransitionTime == "" {
			c.LastTransitionTime = now.Format(time.RFC3339)
		}
		*old = c
		return
	}
	c.LastTransitionTime = now.Format(time.RFC3339)
	s.Conditions = append(s.Conditions, c)
	order := map[string]int{"Synced": 0, "Dependencies": 1, "Ready": 2, "Deleting": 3}
	slices.SortStableFunc(s.Conditions, func(a, b Condition) int { return order[a.Type] - order[b.Type] })
}

func (s *Status) removeCondition(t string) {
	s.Conditions = slices.DeleteFunc(s.Conditions, func(c Condition) bool { return c.Type == t })
}

// event records an event unless the last one says the same.
func (s *Status) event(now time.Time, typ, reason, msg string) {
	if n := len(s.Events); n > 0 && s.Events[n-1].Reason == reason && s.Events[n-1].Message == msg {
		return
	}
	s.Events = append(s.Events, Event{Time: now.Format(time.RFC3339), Type: typ, Reason: reason, Message: msg})
	if len(s.Events) > MaxEvents {
		s.Events = s.Events[len(s.Events)-MaxEvents:]
	}
}
