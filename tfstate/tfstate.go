// Package tfstate reads the documents OpenTofu and Terraform exchange with a
// state backend: the state file (format version 4) and the lock info sent
// with LOCK and UNLOCK. It parses and compares; it stores nothing.
package tfstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn"
)

// State is what cairn needs of a state file; the document itself is kept
// whole by the caller.
type State struct {
	Version          int               `json:"version"`
	TerraformVersion string            `json:"terraform_version"`
	Serial           uint64            `json:"serial"`
	Lineage          string            `json:"lineage"`
	Outputs          map[string]Output `json:"outputs"`
	Resources        []Resource        `json:"resources"`
}

// Output is one root-module output.
type Output struct {
	Value json.RawMessage `json:"value"`
	// Type is the output's type constraint in HCL's JSON form: "string",
	// ["list","string"], ["object",{"a":"number"}], ...
	Type      json.RawMessage `json:"type,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// Resource is one resource (all its instances) of a state.
type Resource struct {
	Module    string            `json:"module,omitempty"`
	Mode      string            `json:"mode"`
	Type      string            `json:"type"`
	Name      string            `json:"name"`
	Provider  string            `json:"provider"`
	Instances []json.RawMessage `json:"instances"`
}

// Address is the resource's address: [module.x.]type.name, data.type.name
// for data sources.
func (r Resource) Address() string {
	a := r.Type + "." + r.Name
	if r.Mode == "data" {
		a = "data." + a
	}
	if r.Module != "" {
		a = r.Module + "." + a
	}
	return a
}

// Parse reads a state document. It refuses what no version-4 state is: not
// JSON, another format version, no lineage.
func Parse(doc []byte) (State, error) {
	var s State
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return State{}, fmt.Errorf("the state is not a valid state document: %w", err)
	}
	if err := s.check(); err != nil {
		return State{}, err
	}
	return s, nil
}

func (s State) check() error {
	if s.Version != 4 {
		return fmt.Errorf("the state has format version %d; only version 4 (OpenTofu, Terraform 0.12 and later) is supported", s.Version)
	}
	if s.Lineage == "" {
		return fmt.Errorf("the state has no lineage")
	}
	for name, o := range s.Outputs {
		if o.Value == nil {
			return fmt.Errorf("the state's output %q has no value", name)
		}
	}
	return nil
}

// ParseSummary is Parse without the resources: what a write needs (format,
// lineage, serial, outputs), skipping the bulk of a large state.
func ParseSummary(doc []byte) (State, error) {
	var s struct {
		Version int               `json:"version"`
		Serial  uint64            `json:"serial"`
		Lineage string            `json:"lineage"`
		Outputs map[string]Output `json:"outputs"`
		TFV     string            `json:"terraform_version"`
	}
	if err := json.Unmarshal(doc, &s); err != nil {
		return State{}, fmt.Errorf("the state is not a valid state document: %w", err)
	}
	st := State{Version: s.Version, Serial: s.Serial, Lineage: s.Lineage, Outputs: s.Outputs, TerraformVersion: s.TFV}
	return st, st.check()
}

// OutputNames returns the outputs' names, sorted.
func (s State) OutputNames() []string {
	names := make([]string, 0, len(s.Outputs))
	for n := range s.Outputs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LockInfo is the lock information OpenTofu sends with LOCK and expects
// back, with 423 Locked, when another holds the lock. Field names are the
// wire format's.
type LockInfo struct {
	ID        string `json:"ID"`
	Operation string `json:"Operation"`
	Info      string `json:"Info"`
	Who       string `json:"Who"`
	Version   string `json:"Version"`
	// Created is a time (RFC 3339) in tofu's LockInfo, so an empty one is
	// left out: "" would make the lock info answered with 423 unreadable
	// to tofu, which then shows its own lock instead of the holder's.
	Created string `json:"Created,omitempty"`
	Path    string `json:"Path"`
}

// ParseLockInfo reads a LOCK or UNLOCK body; the lock ID is required.
func ParseLockInfo(doc []byte) (LockInfo, error) {
	var li LockInfo
	if err := json.Unmarshal(doc, &li); err != nil {
		return LockInfo{}, fmt.Errorf("the lock info is not valid JSON: %w", err)
	}
	if strings.TrimSpace(li.ID) == "" {
		return LockInfo{}, fmt.Errorf("the lock info has no ID")
	}
	if li.Created != "" {
		if _, err := time.Parse(time.RFC3339, li.Created); err != nil {
			return LockInfo{}, fmt.Errorf("the lock info's Created %q is not a time (RFC 3339, as tofu sends it)", li.Created)
		}
	}
	return li, nil
}

// ParseUnlockID reads an UNLOCK body for the lock ID it names, the one
// member an unlock uses; the rest is not kept, so it is not checked.
func ParseUnlockID(doc []byte) (string, error) {
	var li struct {
		ID string `json:"ID"`
	}
	if err := json.Unmarshal(doc, &li); err != nil {
		return "", fmt.Errorf("the lock info is not valid JSON: %w", err)
	}
	if strings.TrimSpace(li.ID) == "" {
		return "", fmt.Errorf("the lock info has no ID")
	}
	return li.ID, nil
}

// String says who holds the lock for what, as lockedBy shows it.
func (li LockInfo) String() string {
	var b strings.Builder
	b.WriteString(li.ID)
	if li.Who != "" || li.Operation != "" {
		b.WriteString(" (")
		b.WriteString(strings.TrimSpace(li.Who + " " + li.Operation))
		b.WriteString(")")
	}
	return b.String()
}

// Diff is what changed between two states.
type Diff struct {
	ResourcesAdded   []string `json:"resourcesAdded"`
	ResourcesRemoved []string `json:"resourcesRemoved"`
	ResourcesChanged []string `json:"resourcesChanged"`
	OutputsAdded     []string `json:"outputsAdded"`
	OutputsRemoved   []string `json:"outputsRemoved"`
	OutputsChanged   []string `json:"outputsChanged"`
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool {
	return len(d.ResourcesAdded)+len(d.ResourcesRemoved)+len(d.ResourcesChanged)+
		len(d.OutputsAdded)+len(d.OutputsRemoved)+len(d.OutputsChanged) == 0
}

// Compare lists the resources (by address) and outputs (by name) added,
// removed and changed from a to b, each list sorted. A resource changed
// when any of its instances did; an output when its value, type or
// sensitivity did.
func Compare(a, b State) Diff {
	var d Diff
	ra, rb := resourcesByAddress(a), resourcesByAddress(b)
	d.ResourcesAdded, d.ResourcesRemoved, d.ResourcesChanged = compareMaps(ra, rb, func(x, y Resource) bool {
		return slices.EqualFunc(x.Instances, y.Instances, cairn.JSONEqual) && x.Provider == y.Provider
	})
	d.OutputsAdded, d.OutputsRemoved, d.OutputsChanged = compareMaps(a.Outputs, b.Outputs, func(x, y Output) bool {
		return cairn.JSONEqual(x.Value, y.Value) && cairn.JSONEqual(x.Type, y.Type) && x.Sensitive == y.Sensitive
	})
	return d
}

func resourcesByAddress(s State) map[string]Resource {
	m := make(map[string]Resource, len(s.Resources))
	for _, r := range s.Resources {
		m[r.Address()] = r
	}
	return m
}

func compareMaps[V any](a, b map[string]V, equal func(x, y V) bool) (added, removed, changed []string) {
	added, removed, changed = []string{}, []string{}, []string{}
	for k, va := range a {
		vb, ok := b[k]
		switch {
		case !ok:
			removed = append(removed, k)
		case !equal(va, vb):
			changed = append(changed, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			added = append(added, k)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
