package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// Subresources of the hub's own objects, for what the hub does beyond
// reading and writing objects (the CLI's history, backend check and policy
// explain work through them in both of its modes):
//
//	GET typeinstances/{id}/resourceversions  every resource version, oldest first (ResourceVersionList)
//	GET backends/{id}/check                  connect to the backend and ask its health (BackendCheck)
//	GET policies/default/explain?path=P[&revision=R]  the rule and backend a create of Type P would get
//	POST backends/{id}/rotatekeys             re-encrypt a SOPS Git backend's files to new age recipients (KeyRotation)
func (s *Server) serveHubSubresource(w http.ResponseWriter, r *http.Request, req request) {
	want := http.MethodGet
	if req.res.hubKind+"/"+req.sub == "backends/rotatekeys" {
		want = http.MethodPost
	}
	if r.Method != want {
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	var err error
	switch req.res.hubKind + "/" + req.sub {
	case "backends/rotatekeys":
		err = s.rotateBackendKeys(w, r, req)
	case "typeinstances/resourceversions":
		err = s.resourceVersions(w, r, req)
	case "backends/check":
		err = s.checkBackend(w, r, req)
	case "policies/explain":
		err = s.explainPolicy(w, r, req)
	default:
		writeStatus(w, notFoundStatus("the server could not find the requested resource ("+req.res.plural+"/"+req.sub+")"))
		return
	}
	if err != nil {
		writeStatus(w, statusOf(err, req.res.target(req.name)))
	}
}

// ResourceVersionList is the answer of typeinstances/{id}/resourceversions.
type ResourceVersionList struct {
	APIVersion string                  `json:"apiVersion"`
	Kind       string                  `json:"kind"`
	Items      []cairn.ResourceVersion `json:"items"`
}

func (s *Server) resourceVersions(w http.ResponseWriter, r *http.Request, req request) error {
	withValues := query(r).Get("values") != "false"
	rvs, err := s.hub.ResourceVersions(r.Context(), req.name, withValues)
	if err != nil {
		return err
	}
	if withValues && len(rvs) > 0 {
		inst, err := s.hub.GetInstance(r.Context(), req.name, false)
		if err != nil {
			return err
		}
		if err := s.hub.HideSecretVersions(r.Context(), inst, rvs, req.res.objectAttrs(req.namespace, req.name)); err != nil {
			return err
		}
	}
	if rvs == nil {
		rvs = []cairn.ResourceVersion{}
	}
	writeJSON(w, http.StatusOK, ResourceVersionList{APIVersion: HubGroup + "/" + HubVersion, Kind: "ResourceVersionList", Items: rvs})
	return nil
}

// BackendCheck is the answer of backends/{id}/check: the backend as the
// hub resolved it and what its health service said.
type BackendCheck struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Backend    BackendSpec         `json:"backend"`
	ID         string              `json:"id"`
	Health     cairn.BackendHealth `json:"health"`
}

func (s *Server) checkBackend(w http.ResponseWriter, r *http.Request, req request) error {
	sb, health, err := s.hub.CheckBackend(r.Context(), req.name)
	if err != nil {
		return err
	}
	obj := toBackend(sb, cairn.Instance{})
	writeJSON(w, http.StatusOK, BackendCheck{APIVersion: HubGroup + "/" + HubVersion, Kind: "BackendCheck", ID: sb.ID, Backend: obj.Spec, Health: health})
	return nil
}

func (s *Server) explainPolicy(w http.ResponseWriter, r *http.Request, req request) error {
	if req.name != PolicyName {
		return errStatus{notFoundStatus(`policies.hub.cairn.dev "` + req.name + `" not found: the hub's one policy is named "` + PolicyName + `"`)}
	}
	q := query(r)
	path, rev := q.Get("path"), q.Get("revision")
	if path == "" {
		return errStatus{badRequest("explain needs the query parameter path (a Type path), and optionally revision")}
	}
	ex, err := s.hub.ExplainPolicy(r.Context(), path, rev)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ex)
	return nil
}

// hubListFilter reads the filters of a typeinstances list beyond the
// Kubernetes ones (labelSelector, fieldSelector): typePath (a path, or a
// prefix ending in ".*"), typeRevision, createdBy, backend, and attribute /
// excludeAttribute (PATH or PATH:REVISION, repeatable), as cairn list takes
// them.
func hubListFilter(r *http.Request, f *store.InstanceFilter) error {
	q := query(r)
	if p := q.Get("typePath"); p != "" {
		f.TypePath = p
	}
	f.TypeRevision = q.Get("typeRevision")
	f.CreatedBy = q.Get("createdBy")
	f.BackendID = q.Get("backend")
	for _, k := range []string{"attribute", "excludeAttribute"} {
		for _, a := range q[k] {
			p, rev, _ := strings.Cut(a, ":")
			if p == "" {
				return errStatus{badRequest("%s %q: want PATH or PATH:REVISION", k, a)}
			}
			f.Attributes = append(f.Attributes, store.AttributeFilter{Path: p, Revision: rev, Exclude: k == "excludeAttribute"})
		}
	}
	return nil
}

// KeyRotation is the body of POST backends/{id}/rotatekeys and, with its
// status filled in, the answer.
type KeyRotation struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Spec       hub.KeyRotation        `json:"spec"`
	Status     *hub.KeyRotationResult `json:"status,omitempty"`
}

func (s *Server) rotateBackendKeys(w http.ResponseWriter, r *http.Request, req request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var in KeyRotation
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return errStatus{badRequest("the body is not a KeyRotation ({spec: {addAge: [...], removeAge: [...]}}): %v", err)}
	}
	if in.Kind != "" && in.Kind != "KeyRotation" {
		return errStatus{badRequest("the body's kind is %q, want KeyRotation", in.Kind)}
	}
	res, err := s.hub.RotateBackendKeys(r.Context(), req.name, in.Spec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, KeyRotation{APIVersion: HubGroup + "/" + HubVersion, Kind: "KeyRotation", Spec: in.Spec, Status: &res})
	return nil
}
