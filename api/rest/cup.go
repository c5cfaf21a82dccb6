package rest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"mime"
	"net/http"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// CupPrefix is where cairn serves flipt cup's own API (seed 003), for
// cup's CLI and other clients written against cupd: point cup's context
// at <server>/cup (cup config ctx set address=http://127.0.0.1:8080/cup).
//
// cup's wire format differs from Kubernetes' on the same paths: its /apis
// is a map of ResourceDefinitions where Kubernetes has an APIGroupList, a
// list is a stream of objects where Kubernetes has a List object, a PUT
// creates and answers a Result, and nothing in cup's requests (no Accept
// header, Go's User-Agent) tells them from a plain Go client of the
// Kubernetes API. So cup's API has a prefix of its own, and /apis stays
// Kubernetes' for kubectl, client-go and curl.
const CupPrefix = "/cup"

// cupDefinition is a cup ResourceDefinition as cupd serves it: the schema
// of each version is the JSON Schema of spec.
type cupDefinition struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   cupDefinitionMeta `json:"metadata"`
	Names      cupNames          `json:"names"`
	Spec       cupDefinitionSpec `json:"spec"`
}

type cupDefinitionMeta struct {
	Name string `json:"name"`
}

type cupNames struct {
	Kind       string   `json:"kind"`
	Singular   string   `json:"singular"`
	Plural     string   `json:"plural"`
	ShortNames []string `json:"shortNames,omitempty"`
	Categories []string `json:"categories,omitempty"`
}

type cupDefinitionSpec struct {
	Group    string                     `json:"group"`
	Versions map[string]json.RawMessage `json:"versions"`
}

// cupResource is a resource as cup reads and writes it. labels and
// annotations are always objects: cup's files and clients have them so.
type cupResource struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   cupMeta         `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

type cupMeta struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// cupResult is cupd's answer to a PUT or DELETE: the proposal the change
// became, or a zero ID and no proposal when it took effect at once.
type cupResult struct {
	ID       string       `json:"ID"`
	Proposal *cupProposal `json:"Proposal"`
}

type cupProposal struct {
	Source string `json:"Source"`
	URL    string `json:"URL"`
}

// routeCup serves cup's API under CupPrefix; seg follows "cup".
func (s *Server) routeCup(w http.ResponseWriter, r *http.Request, seg []string) string {
	if len(seg) == 0 || seg[0] != "apis" {
		writeStatus(w, notFoundStatus("the server could not find the requested resource: cup's API is under "+CupPrefix+"/apis"))
		return "unknown"
	}
	seg = seg[1:]
	if len(seg) == 0 {
		s.onlyGET(w, r, func() { s.cupDefinitions(w, r) })
		return CupPrefix + "/apis"
	}
	route := CupPrefix + "/apis/{group}/{version}/namespaces/{namespace}/{resource}"
	if len(seg) < 5 || len(seg) > 6 || seg[2] != "namespaces" || seg[3] == "" {
		writeStatus(w, notFoundStatus("the server could not find the requested resource: cup's paths are "+CupPrefix+"/apis/GROUP/VERSION/namespaces/NAMESPACE/PLURAL[/NAME]"))
		return "unknown"
	}
	res, err := s.findResource(r.Context(), seg[0], seg[1], seg[4])
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return route
	}
	if res == nil || res.typ == nil {
		writeStatus(w, notFoundStatus("the server could not find the requested resource ("+seg[4]+" "+seg[0]+"/"+seg[1]+")"))
		return route
	}
	req := request{res: res, namespace: seg[3]}
	if len(seg) == 6 {
		req.name = seg[5]
		route += "/{name}"
	}
	switch {
	case req.name == "" && r.Method == http.MethodGet:
		err = s.cupList(w, r, req)
	case req.name != "" && r.Method == http.MethodGet:
		err = s.cupGet(w, r, req)
	case req.name != "" && r.Method == http.MethodPut:
		err = s.cupPut(w, r, req)
	case req.name != "" && r.Method == http.MethodDelete:
		err = s.cupDelete(w, r, req)
	default:
		writeStatus(w, methodNotAllowed(r.Method))
		return route
	}
	if err != nil {
		writeStatus(w, statusOf(err, res.target(req.name)))
	}
	return route
}

// cupDefinitions answers cup's GET /apis: every served kind as a
// ResourceDefinition, keyed <group>/<version>/<plural> once per version,
// each with all the kind's versions.
func (s *Server) cupDefinitions(w http.ResponseWriter, r *http.Request) {
	all, err := s.resources(r.Context())
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return
	}
	defs := map[string]*cupDefinition{} // by plural.group
	out := map[string]*cupDefinition{}
	for _, res := range all {
		if res.typ == nil {
			continue
		}
		name := res.plural + "." + res.group
		d := defs[name]
		if d == nil {
			d = &cupDefinition{APIVersion: "cup.flipt.io/v1alpha1", Kind: "ResourceDefinition",
				Metadata: cupDefinitionMeta{Name: name},
				Names: cupNames{Kind: res.kind, Singular: res.singular, Plural: res.plural,
					ShortNames: res.shortNames, Categories: res.typ.Names.Categories},
				Spec: cupDefinitionSpec{Group: res.group, Versions: map[string]json.RawMessage{}}}
			defs[name] = d
		}
		schema := res.typ.JSONSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{}`)
		}
		d.Spec.Versions[res.version] = schema
		out[res.group+"/"+res.version+"/"+res.plural] = d
	}
	writeJSON(w, http.StatusOK, out)
}

// cupList answers cup's list: the objects of the namespace one after the
// other, each a JSON document of its own (cup decodes a stream), in the
// order of their names. labelSelector filters as on /apis.
func (s *Server) cupList(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := parseListOptions(r, req.res)
	if err != nil {
		return err
	}
	insts, _, err := s.hub.ListInstancesWith(r.Context(), o.filter(req), hub.ListOptions{Values: true})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range insts {
		if !o.matches(&insts[i]) {
			continue
		}
		if err := enc.Encode(toCupResource(req.res, &insts[i])); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// cupGet answers cup's get of one object.
func (s *Server) cupGet(w http.ResponseWriter, r *http.Request, req request) error {
	inst, err := s.instance(r, req)
	if err != nil {
		return err
	}
	if _, err := s.hub.HideSecrets(r.Context(), &inst, req.res.objectAttrs(req.namespace, req.name)); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toCupResource(req.res, &inst))
	return nil
}

// cupPut is cup's create-or-replace: the object is created when the name
// is free, else replaced whatever its resourceVersion (cup has none).
// The answer is cupd's: 202 Accepted with a Result, or 204 when nothing
// changed.
func (s *Server) cupPut(w http.ResponseWriter, r *http.Request, req request) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "" && mt != "application/json" && mt != "application/yaml" {
		// cupd reads every body as JSON, whatever it is labelled (curl -d
		// says application/x-www-form-urlencoded).
		rr := *r
		rr.Header = r.Header.Clone()
		rr.Header.Del("Content-Type")
		r = &rr
	}
	o, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	if err := checkObject(req.res, o); err != nil {
		return err
	}
	if o.Metadata.Name != "" && o.Metadata.Name != req.name {
		return errStatus{badRequest("the name of the object (%s) does not match the name on the URL (%s)", o.Metadata.Name, req.name)}
	}
	if o.Metadata.Namespace != "" && o.Metadata.Namespace != req.namespace {
		return errStatus{badRequest("the namespace of the object (%s) does not match the namespace on the request (%s)", o.Metadata.Namespace, req.namespace)}
	}
	// cup sends no resourceVersion; one given is the object's last known
	// state and is checked, as on a Kubernetes PUT.
	var inst cairn.Instance
	for attempt := 1; ; attempt++ {
		wrote := true
		cur, err := s.instance(r, req)
		switch {
		case err == nil:
			if inst, err = s.write(r, req, cur, o, nil); err == nil {
				wrote = inst.Latest.ResourceVersion != cur.Latest.ResourceVersion
			}
		case isNotFoundStatus(err) && o.Metadata.ResourceVersion == "":
			var managed json.RawMessage
			if managed, err = s.trackCreate(r, req.res, req.name, req.namespace, o); err == nil {
				inst, err = s.createObject(r, req, o, req.name, managed)
			}
			if err != nil && attempt < maxWriteAttempts && errors.As(err, new(alreadyExists)) {
				continue // created meanwhile by another writer: replace it
			}
		}
		if err != nil {
			return err
		}
		if !wrote {
			// Nothing changed: cupd answers 204, which cup's CLI reports
			// as no change.
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		writeJSON(w, http.StatusAccepted, cupResultOf(inst))
		return nil
	}
}

// cupDelete is cup's delete: 202 Accepted with a Result.
func (s *Server) cupDelete(w http.ResponseWriter, r *http.Request, req request) error {
	cur, err := s.instanceWith(r, req, false)
	if err != nil {
		return err
	}
	if err := s.hub.DeleteInstanceIf(r.Context(), cur.ID, query(r).Get("lockOwner"), 0); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, cupResult{ID: cupZeroID})
	return nil
}

func toCupResource(res *resource, inst *cairn.Instance) cupResource {
	spec := inst.Latest.Value
	if len(spec) == 0 {
		spec = json.RawMessage(`{}`)
	}
	return cupResource{APIVersion: res.apiVersion(), Kind: res.kind, Spec: spec,
		Metadata: cupMeta{Namespace: inst.Namespace, Name: inst.Name,
			Labels: nonNilMap(inst.Labels), Annotations: nonNilMap(inst.Annotations)}}
}

// cupZeroID is the zero ULID, cupd's Result.ID of a change made at once.
const cupZeroID = "00000000000000000000000000"

// cupResultOf is the Result of a write: the proposal a backend made of it
// (a Git backend in propose mode), identified by a ULID made of the
// proposal's id, else the zero ID.
func cupResultOf(inst cairn.Instance) cupResult {
	p := ProposalOf(inst.Latest.Context)
	if p == nil {
		return cupResult{ID: cupZeroID}
	}
	return cupResult{ID: ulidOf(p.ID), Proposal: &cupProposal{Source: p.Provider, URL: p.URL}}
}

// ulidOf encodes the bytes of a hex id (a Git backend's proposal id, six
// bytes), right-aligned in 16, as a ULID's 26 Crockford base32 digits, the
// form cup's Result.ID decodes. An id that is not hex takes its bytes as
// they are.
func ulidOf(id string) string {
	b, err := hex.DecodeString(id)
	if err != nil {
		b = []byte(id)
	}
	var v [16]byte
	if len(b) > len(v) {
		b = b[len(b)-len(v):]
	}
	copy(v[len(v)-len(b):], b)
	const digits = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	// 128 bits as 26 digits of 5 bits: the first digit holds the top 3.
	var out [26]byte
	for i := range out {
		bit := 130 - 5*(i+1) // lowest bit of digit i, counting from the 130-bit number's bottom
		var d byte
		for k := 4; k >= 0; k-- {
			d <<= 1
			if p := bit + k; p < 128 && v[15-p/8]>>(p%8)&1 == 1 {
				d |= 1
			}
		}
		out[i] = digits[d]
	}
	return string(out[:])
}
