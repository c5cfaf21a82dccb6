package rest

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// StackObject is a stack package version of the catalog, served in
// hub.cairn.dev/v1 as stacks/<name>-<version>.
type StackObject struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       StackSpec  `json:"spec"`
}

// StackSpec is what the catalog holds of a stack. Archive is only read on
// create (base64 of a gzipped tar) and never served.
type StackSpec struct {
	Name             string          `json:"name,omitempty"`
	Version          string          `json:"version,omitempty"`
	Description      string          `json:"description,omitempty"`
	Digest           string          `json:"digest,omitempty"`
	InstallationType *cairn.TypeRef  `json:"installationType,omitempty"`
	Manifest         json.RawMessage `json:"manifest,omitempty"`
	Archive          []byte          `json:"archive,omitempty"`
}

func toStackObject(e hub.StackEntry) StackObject {
	m, _ := json.Marshal(e.Manifest)
	ref := e.InstallationType
	return StackObject{
		APIVersion: HubGroup + "/" + HubVersion, Kind: "Stack",
		Metadata: ObjectMeta{Name: e.Name + "@" + e.Version, UID: e.ID, CreationTimestamp: timestamp(e.Added)},
		Spec: StackSpec{Name: e.Name, Version: e.Version, Description: e.Description, Digest: e.Digest,
			InstallationType: &ref, Manifest: m},
	}
}

func (s *Server) listStacks(w http.ResponseWriter, r *http.Request, req request) error {
	all, err := s.hub.ListStacks(r.Context())
	if err != nil {
		return err
	}
	out := List{APIVersion: HubGroup + "/" + HubVersion, Kind: "StackList", Items: []any{}}
	for _, e := range all {
		out.Items = append(out.Items, toStackObject(e))
	}
	s.writeRead(w, r, req.res, out)
	return nil
}

// getStack is GET stacks/<name> (the highest version) or
// stacks/<name>@<version>.
func (s *Server) getStack(w http.ResponseWriter, r *http.Request, req request) error {
	name, version, _ := strings.Cut(req.name, "@")
	e, err := s.hub.GetStack(r.Context(), name, version)
	if err != nil {
		return err
	}
	s.writeRead(w, r, req.res, toStackObject(e))
	return nil
}

// createStack is POST stacks with a Stack object whose spec.archive is the
// package (base64 of a gzipped tar, what `cairn stack add` sends). 201 when
// it was added, 200 when the same package was already in the catalog.
func (s *Server) createStack(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var o StackObject
	if err := json.Unmarshal(body, &o); err != nil {
		return errStatus{badRequest("the request body is not a Stack object: %v", err)}
	}
	if len(o.Spec.Archive) == 0 {
		return errStatus{badRequest("spec.archive is required: the stack package as base64 of a gzipped tar archive")}
	}
	e, added, err := s.hub.AddStack(r.Context(), o.Spec.Archive)
	if err != nil {
		return hubInvalid(err)
	}
	code := http.StatusOK
	if added {
		code = http.StatusCreated
	}
	writeJSON(w, code, toStackObject(e))
	return nil
}
