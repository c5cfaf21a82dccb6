package rest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/audit"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// request is one parsed resource request.
type request struct {
	res       *resource
	namespace string // "" for cluster-scoped resources and all-namespace lists
	name      string // "" for collections
	sub       string // the subresource ("status"), "" for the resource itself
}

// routeAPIs serves everything under /apis.
func (s *Server) routeAPIs(w http.ResponseWriter, r *http.Request, seg []string) string {
	switch len(seg) {
	case 0:
		s.onlyGET(w, r, func() { s.discoverGroups(w, r) })
		return "/apis"
	case 1:
		s.onlyGET(w, r, func() { s.discoverGroup(w, r, seg[0]) })
		return "/apis/{group}"
	case 2:
		s.onlyGET(w, r, func() { s.discoverResources(w, r, seg[0], seg[1]) })
		return "/apis/{group}/{version}"
	}
	group, version, rest := seg[0], seg[1], seg[2:]
	var req request
	var plural, route string
	switch {
	case rest[0] == "namespaces" && (len(rest) >= 3 && len(rest) <= 5):
		req.namespace, plural = rest[1], rest[2]
		route = "/apis/{group}/{version}/namespaces/{namespace}/{resource}"
		if len(rest) >= 4 {
			req.name = rest[3]
			route += "/{name}"
		}
		if len(rest) == 5 {
			req.sub = rest[4]
			route += "/{subresource}"
		}
	case len(rest) >= 1 && len(rest) <= 3:
		plural = rest[0]
		route = "/apis/{group}/{version}/{resource}"
		if len(rest) >= 2 {
			req.name = rest[1]
			route += "/{name}"
		}
		if len(rest) == 3 {
			req.sub = rest[2]
			route += "/{subresource}"
		}
	default:
		writeStatus(w, notFoundStatus("the server could not find the requested resource"))
		return "unknown"
	}
	res, err := s.findResource(r.Context(), group, version, plural)
	if err != nil {
		writeStatus(w, errorStatus(err, target{}))
		return route
	}
	if res == nil {
		writeStatus(w, notFoundStatus(fmt.Sprintf("the server could not find the requested resource (%s %s/%s)", plural, group, version)))
		return route
	}
	req.res = res
	if res.namespaced && req.name != "" && req.namespace == "" || !res.namespaced && req.namespace != "" {
		writeStatus(w, notFoundStatus("the server could not find the requested resource"))
		return route
	}
	if res.hubKind == "reviews" {
		writeStatus(w, methodNotAllowed(r.Method))
		return route
	}
	if r.Method == http.MethodGet && req.name == "" && isWatch(r) && !slices.Contains(res.verbs, "watch") {
		writeStatus(w, watchNotServed(res))
		return route
	}
	if res.hubKind == "rbac" {
		s.serveRBAC(w, r, req) // rbac.go
		return route
	}
	if res.hubKind != "" {
		if req.sub != "" {
			s.serveHubSubresource(w, r, req) // hubsubresources.go
			return route
		}
		s.serveHub(w, r, req)
		return route
	}
	if req.sub != "" && req.sub != "status" {
		writeStatus(w, notFoundStatus(fmt.Sprintf("the server could not find the requested resource: %s has no subresource %q", res.plural, req.sub)))
		return route
	}
	s.serveUser(w, r, req)
	return route
}

// serveUser serves the instances of a user Type.
func (s *Server) serveUser(w http.ResponseWriter, r *http.Request, req request) {
	var err error
	switch {
	case req.sub == "status" && r.Method == http.MethodGet:
		err = s.get(w, r, req)
	case req.sub == "status" && r.Method == http.MethodPut:
		err = s.replaceStatus(w, r, req)
	case req.sub == "status" && r.Method == http.MethodPatch:
		err = s.patch(w, r, req)
	case req.sub == "status":
		writeStatus(w, methodNotAllowed(r.Method))
		return
	case req.name == "" && r.Method == http.MethodGet && isWatch(r):
		err = s.watch(w, r, req)
	case req.name == "" && r.Method == http.MethodGet:
		err = s.list(w, r, req)
	case req.name == "" && r.Method == http.MethodPost && (req.namespace != "" || !req.res.namespaced):
		err = s.create(w, r, req)
	case req.name == "" && r.Method == http.MethodDelete && (req.namespace != "" || !req.res.namespaced):
		err = s.deleteCollection(w, r, req)
	case req.name != "" && r.Method == http.MethodGet:
		err = s.get(w, r, req)
	case req.name != "" && r.Method == http.MethodPut:
		err = s.replace(w, r, req)
	case req.name != "" && r.Method == http.MethodPatch:
		err = s.patch(w, r, req)
	case req.name != "" && r.Method == http.MethodDelete:
		err = s.delete(w, r, req)
	default:
		writeStatus(w, methodNotAllowed(r.Method))
		return
	}
	if err != nil {
		writeStatus(w, statusOf(err, req.res.target(req.name)))
	}
}

// watchNotServed is the API server's answer to ?watch=true on a kind that
// takes no watch. Without it the list would be served, and kubectl get -w
// would fail to read it as an event.
func watchNotServed(res *resource) Status {
	kind := res.plural
	if res.group != "" {
		kind += "." + res.group
	}
	return newStatus(http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("watch is not supported on resources of kind %q", kind))
}

func isWatch(r *http.Request) bool {
	v := query(r).Get("watch")
	return v == "true" || v == "1"
}

func (s *Server) instance(r *http.Request, req request) (cairn.Instance, error) {
	return s.instanceWith(r, req, true)
}

// instanceWith is instance, with its value when withValue. What does not
// need the value (a delete) reads without it, so that an external backend
// that is down does not stop it.
func (s *Server) instanceWith(r *http.Request, req request, withValue bool) (cairn.Instance, error) {
	inst, err := s.hub.GetInstanceByName(r.Context(), req.res.typ.Path, req.namespace, req.name, withValue)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		if withValue {
			// The object is there but its backend has no value for it
			// (a Git branch rewritten without it): say so, not that
			// the object does not exist.
			if _, gerr := s.hub.GetInstanceByName(r.Context(), req.res.typ.Path, req.namespace, req.name, false); gerr == nil {
				return inst, err
			}
		}
		return inst, errStatus{notFoundObject(req.res, req.name)}
	}
	return inst, err
}

func notFoundObject(res *resource, name string) Status {
	st := notFoundStatus(fmt.Sprintf("%s.%s %q not found", res.plural, res.group, name))
	st.Details = &StatusDetails{Name: name, Group: res.group, Kind: res.plural}
	return st
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, req request) error {
	plain := plainJSON(r)
	// The body of an object read at the store's current position, kept
	// as lists are: the position was read before the object, so a body is
	// served only while nothing has committed since it was read.
	var key listKey
	var pos int64
	if plain {
		key = listKey{res: req.res, path: r.URL.Path, query: r.URL.RawQuery}
		var err error
		if pos, err = s.hub.LastSeq(r.Context()); err != nil {
			return err
		}
		if b, ok := s.gets.get(key, pos); ok {
			writeBody(w, b)
			return nil
		}
	}
	inst, err := s.instance(r, req)
	if err != nil {
		return err
	}
	// Secret values show to callers granted reveal on the object; the
	// body of a Type that has them is not kept, whoever read it (a kept
	// body is served before anyone is asked).
	secret, err := s.hub.HideSecrets(r.Context(), &inst, req.res.objectAttrs(req.namespace, req.name))
	if err != nil {
		return err
	}
	if plain {
		if b, ok := s.encoded.cached(&inst, req.res.apiVersion(), req.res.kind); ok {
			if !secret {
				s.keepObject(key, pos, b)
			}
			writeObject(w, b)
			return nil
		}
	}
	objs, err := s.objects(r, req.res, []cairn.Instance{inst})
	if err != nil {
		return err
	}
	if !plain {
		s.writeRead(w, r, req.res, objs[0])
		return nil
	}
	b, err := s.encoded.encode(inst, objs[0])
	if err != nil {
		return err
	}
	if !secret && cacheable(&inst) && len(objs[0].Metadata.OwnerReferences) == 0 {
		s.keepObject(key, pos, b)
	}
	writeObject(w, b)
	return nil
}

// keepObject keeps the body of a GET (the object's JSON and a newline).
func (s *Server) keepObject(key listKey, pos int64, b []byte) {
	body := make([]byte, len(b)+1)
	copy(body, b)
	body[len(b)] = '\n'
	s.gets.put(key, pos, body)
}

// listOptions are the query parameters of a list or watch.
type listOptions struct {
	labels labels.Selector
	// The field selector's terms, every one of which must hold: the
	// instance's name, id and namespace equal to (the store filters on
	// these) or different from (any number of) values. A kind's
	// metadata.name is the instance's name; a TypeInstance's metadata.name
	// is its id, and spec.name its name. none: two equality terms of one
	// field that differ, which nothing matches.
	fieldName string
	fieldID   string
	fieldNS   string
	notNames  []string
	notIDs    []string
	notNS     []string
	none      bool
	limit     int
	after     *continueToken
	// values: ?values=true, secret values in the clear (the access guard
	// has also asked for the get verb).
	values bool
	// noValues: ?values=false, the objects without their values (spec of
	// a Type's kind, spec.value of a TypeInstance), none read from a
	// backend: what lists every instance while a backend is down.
	noValues bool
}

// The fields a field selector takes, by what they select: an instance's
// name, id or namespace.
var (
	kindFields = map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}
	// A TypeInstance serves its id as metadata.name (kubectl get ti ID -w,
	// wait and delete --wait select by it), its name and namespace in
	// spec; metadata.namespace stays, which clients used before spec.
	typeInstanceFields = map[string]string{"metadata.name": "id", "spec.name": "name", "spec.namespace": "namespace", "metadata.namespace": "namespace"}
)

const (
	kindFieldsHelp         = "metadata.name, metadata.namespace with =, == or !="
	typeInstanceFieldsHelp = "metadata.name (the id), spec.name, spec.namespace (or metadata.namespace) with =, == or !="
)

func parseListOptions(r *http.Request, res *resource) (listOptions, error) {
	q := query(r)
	var o listOptions
	sel, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return o, errStatus{badRequest("unable to parse requirement: %v", err)}
	}
	o.labels = sel
	if fs := q.Get("fieldSelector"); fs != "" {
		// The API server's own parser: terms split at unescaped commas,
		// values unescaped (\, \= \\).
		fsel, err := fields.ParseSelector(fs)
		if err != nil {
			return o, errStatus{badRequest("invalid field selector: %v", err)}
		}
		known, help := kindFields, kindFieldsHelp
		if res.hubKind == "typeinstances" {
			known, help = typeInstanceFields, typeInstanceFieldsHelp
		}
		for _, req := range fsel.Requirements() {
			var eq *string
			var not *[]string
			switch known[req.Field] {
			case "name":
				eq, not = &o.fieldName, &o.notNames
			case "id":
				eq, not = &o.fieldID, &o.notIDs
			case "namespace":
				eq, not = &o.fieldNS, &o.notNS
			default:
				return o, errStatus{badRequest("field label not supported: %s (supported: %s)", req.Field, help)}
			}
			if req.Operator == selection.NotEquals {
				*not = append(*not, req.Value)
				continue
			}
			o.none = o.none || *eq != "" && *eq != req.Value
			*eq = req.Value
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return o, errStatus{badRequest("limit %q must be a non-negative integer", l)}
		}
		o.limit = n
	}
	switch v := q.Get("values"); v {
	case "":
	case "false":
		o.noValues = true
	case "true":
		o.values = true
	default:
		return o, errStatus{badRequest("values %q must be true or false", v)}
	}
	if c := q.Get("continue"); c != "" {
		after, err := decodeContinue(c)
		if err != nil {
			return o, err
		}
		o.after = &after
	}
	return o, nil
}

// A list comes in the API server's key order: a kind's objects by
// namespace and name, typeinstances (whose metadata.name is the id) by
// id. The continue token holds the key of the last item of the page in
// that order (o: "name" or "id"), so the next page starts right after it
// whatever was created or deleted meanwhile.
type continueToken struct {
	Order     string `json:"o"`
	ID        string `json:"i,omitempty"`
	Path      string `json:"p,omitempty"`
	Namespace string `json:"n,omitempty"`
	Name      string `json:"m,omitempty"`
}

// listOrder is the order of a list of res.
func listOrder(res *resource) store.InstanceOrder {
	if res.hubKind == "typeinstances" {
		return store.ByID
	}
	return store.ByName
}

func encodeContinue(inst cairn.Instance, order store.InstanceOrder) string {
	t := continueToken{Order: "name", Path: inst.TypeRef.Path, Namespace: inst.Namespace, Name: inst.Name}
	if order == store.ByID {
		t = continueToken{Order: "id", ID: inst.ID}
	}
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil {
		return t, errStatus{badRequest("continue token is not valid: %v", err)}
	}
	if t.Order == "" {
		// A token of a cairn that paged in the store's order: its key
		// means nothing in this order. The API server's answer to a
		// token it cannot continue from, which clients know to start
		// over on.
		return t, errStatus{newStatus(http.StatusGone, "Expired",
			"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")}
	}
	return t, nil
}

// filter returns the store filter for a list of req with o.
func (o listOptions) filter(req request) store.InstanceFilter {
	f := store.InstanceFilter{Namespace: req.namespace, Labels: o.labels, Name: o.fieldName, ID: o.fieldID, Limit: o.limit, Order: listOrder(req.res)}
	if req.res.typ != nil {
		f.TypePath = req.res.typ.Path
	}
	if t := o.after; t != nil {
		f.After = &cairn.Instance{ID: t.ID, TypeRef: cairn.TypeRef{Path: t.Path}, Namespace: t.Namespace, Name: t.Name}
	}
	if o.none {
		f.Namespace = "\x00" // matches nothing
	} else if o.fieldNS != "" {
		if f.Namespace != "" && f.Namespace != o.fieldNS {
			f.Namespace = "\x00" // matches nothing
		} else {
			f.Namespace = o.fieldNS
		}
	}
	return f
}

// pageFilter is filter asking the store for one instance more than the
// page holds, so that the last page, as on the API server, carries no
// continue token (a client would ask for a page that is empty). A
// continue token of another resource's list is refused.
func (o listOptions) pageFilter(req request) (store.InstanceFilter, error) {
	f := o.filter(req)
	if o.limit > 0 {
		f.Limit = o.limit + 1
	}
	if t := o.after; t != nil && (t.Order == "id") != (f.Order == store.ByID) {
		return f, errStatus{badRequest("continue token is not valid: it continues a list of another resource")}
	}
	return f, nil
}

// page cuts what pageFilter read to the page, and says whether more follow.
func (o listOptions) page(insts []cairn.Instance) ([]cairn.Instance, bool) {
	if o.limit > 0 && len(insts) > o.limit {
		return insts[:o.limit], true
	}
	return insts, false
}

// hasFields says whether a field selector was given.
func (o listOptions) hasFields() bool {
	return o.fieldName != "" || o.fieldID != "" || o.fieldNS != "" || len(o.notNames) > 0 || len(o.notIDs) > 0 || len(o.notNS) > 0 || o.none
}

// matchesFields says whether the instance of that id, name and namespace
// passes every term of the field selector.
func (o listOptions) matchesFields(id, name, namespace string) bool {
	return !o.none && (o.fieldName == "" || name == o.fieldName) && (o.fieldID == "" || id == o.fieldID) &&
		(o.fieldNS == "" || namespace == o.fieldNS) &&
		!slices.Contains(o.notNames, name) && !slices.Contains(o.notIDs, id) && !slices.Contains(o.notNS, namespace)
}

// matches applies what the store filter cannot express (and, harmlessly,
// what it did).
func (o listOptions) matches(inst *cairn.Instance) bool {
	return o.matchesFields(inst.ID, inst.Name, inst.Namespace)
}

// List is a list of objects: {apiVersion, kind: <Kind>List, metadata, items}.
type List struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   ListMeta `json:"metadata"`
	Items      []any    `json:"items"`
}

// ListMeta carries the list's resourceVersion and continue token.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion"`
	Continue        string `json:"continue,omitempty"`
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := parseListOptions(r, req.res)
	if err != nil {
		return err
	}
	fresh, err := parseListFreshness(r)
	if err != nil {
		return err
	}
	tr, cols, values, err := s.listShape(r, req, o)
	if err != nil {
		return err
	}
	// Plain JSON with values: the kept encodings and bodies hold values.
	plain := tr.version == "" && values
	key := listKey{res: req.res, path: r.URL.Path, query: r.URL.RawQuery}
	if plain && fresh.consistent {
		pos, err := s.hub.LastSeq(r.Context())
		if err != nil {
			return err
		}
		if b, ok := s.lists.get(key, pos); ok {
			writeBody(w, b)
			return nil
		}
	}
	// The list's resourceVersion is a position the list is current with:
	// a watch started from it may repeat a change the list already shows,
	// but never misses one.
	var unread unreadable
	lo := hub.ListOptions{Values: values, Secrets: o.values, Unreadable: unread.collect(&tr)}
	if !fresh.consistent {
		lo.NotOlderThan = &fresh.notOlderThan
	}
	f, err := o.pageFilter(req)
	if err != nil {
		return err
	}
	insts, seq, err := s.hub.ListInstancesWith(r.Context(), f, lo)
	if err != nil {
		return listErr(err, req.res, tr)
	}
	if !values {
		withoutValues(insts)
	}
	insts, more := o.page(insts)
	if seq < fresh.notOlderThan {
		st := newStatus(http.StatusGatewayTimeout, "Timeout", fmt.Sprintf("Too large resource version: %d, current: %d", fresh.notOlderThan, seq))
		st.Details = &StatusDetails{Causes: []StatusCause{{Type: "ResourceVersionTooLarge", Message: "Too large resource version"}}, RetryAfterSeconds: 1}
		return errStatus{st}
	}
	out := List{APIVersion: req.res.apiVersion(), Kind: req.res.kind + "List", Items: []any{},
		Metadata: ListMeta{ResourceVersion: strconv.FormatInt(seq, 10)}}
	if more {
		out.Metadata.Continue = encodeContinue(insts[len(insts)-1], f.Order)
	}
	if !plain {
		kept := make([]cairn.Instance, 0, len(insts))
		for i := range insts {
			if o.matches(&insts[i]) {
				kept = append(kept, insts[i])
			}
		}
		if tr.version != "" {
			unread.warn(w)
			// rowKeepable refuses the instances objects adds owner
			// references to.
			return s.writeRows(w, tr, cols, req.res, out.Metadata, kept, values, func(insts []cairn.Instance) ([]any, error) {
				objs, err := s.objects(r, req.res, insts)
				if err != nil {
					return nil, err
				}
				items := make([]any, len(objs))
				for i := range objs {
					items[i] = objs[i]
				}
				return items, nil
			})
		}
		objs, err := s.objects(r, req.res, kept)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			out.Items = append(out.Items, obj)
		}
		unread.warn(w)
		writeReadAs(w, tr, cols, out)
		return nil
	}
	// Plain JSON: the encodings of unchanged objects are at hand; only
	// the others are built and encoded.
	items := make([][]byte, 0, len(insts))
	var missed []cairn.Instance
	var missedAt []int
	keep := fresh.consistent // and every object is one the encoded cache keeps
	for i := range insts {
		inst := &insts[i]
		if !o.matches(inst) {
			continue
		}
		keep = keep && cacheable(inst)
		if b, ok := s.encoded.cached(inst, out.APIVersion, req.res.kind); ok {
			items = append(items, b)
			continue
		}
		missed = append(missed, *inst)
		missedAt = append(missedAt, len(items))
		items = append(items, nil)
	}
	if len(missed) > 0 {
		objs, err := s.objects(r, req.res, missed)
		if err != nil {
			return err
		}
		for j, obj := range objs {
			if items[missedAt[j]], err = s.encoded.encode(missed[j], obj); err != nil {
				return err
			}
		}
	}
	if !keep {
		writeList(w, out.APIVersion, out.Kind, out.Metadata, items)
		return nil
	}
	var buf bytes.Buffer
	appendList(&buf, out.APIVersion, out.Kind, out.Metadata, items)
	s.lists.put(key, seq, buf.Bytes())
	writeBody(w, buf.Bytes())
	return nil
}

// listFreshness is how current a list must be, from its resourceVersion
// as Kubernetes reads it: unset, the most recent (a consistent read);
// "0", any (the read cache as it is, no question to the store); "N", not
// older than N. resourceVersionMatch=NotOlderThan is the default; Exact
// would need past states, which cairn does not keep.
type listFreshness struct {
	consistent   bool
	notOlderThan int64
}

func parseListFreshness(r *http.Request) (listFreshness, error) {
	q := query(r)
	rv, match := q.Get("resourceVersion"), q.Get("resourceVersionMatch")
	switch match {
	case "", "NotOlderThan":
	case "Exact":
		return listFreshness{}, errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid",
			`resourceVersionMatch: Unsupported value: "Exact": cairn keeps no past lists; supported values: "NotOlderThan"`)}
	default:
		return listFreshness{}, errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid",
			fmt.Sprintf(`resourceVersionMatch: Unsupported value: %q: supported values: "NotOlderThan"`, match))}
	}
	if rv == "" {
		if match != "" {
			return listFreshness{}, errStatus{newStatus(http.StatusUnprocessableEntity, "Invalid",
				"resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")}
		}
		return listFreshness{consistent: true}, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return listFreshness{}, errStatus{badRequest("invalid resource version %q: a non-negative integer is expected", rv)}
	}
	if q.Get("continue") != "" {
		// A continued list follows its token, as the API server's does.
		if n != 0 {
			return listFreshness{}, errStatus{badRequest("specifying resource version is not allowed when using continue")}
		}
		return listFreshness{consistent: true}, nil
	}
	return listFreshness{notOlderThan: n}, nil
}

// readBody reads a request body; a create, update or delete body must be
// JSON or YAML (PATCH bodies are checked by the patch handler).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Method != http.MethodPatch {
		if err := checkMediaType(r); err != nil {
			return nil, err
		}
	}
	return s.readAll(w, r)
}

// readAll reads a request body of at most s.maxBody bytes.
func (s *Server) readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		return nil, errStatus{newStatus(http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			fmt.Sprintf("the request body could not be read (limit %d bytes): %v", s.maxBody, err))}
	}
	return body, nil
}

// readObject reads the body of a create or replace: JSON or YAML, with its
// unknown fields refused or warned about (fieldValidation).
func (s *Server) readObject(w http.ResponseWriter, r *http.Request) (inObject, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return inObject{}, err
	}
	if body, err = bodyJSON(r, body); err != nil {
		return inObject{}, err
	}
	if _, err := fieldValidation(r); err != nil {
		return inObject{}, err
	}
	if o, ok := decodeObjectPlain(body); ok {
		// Every member of a plain object is a field of inObject under its
		// exact name, given once: checkFields would find none unknown.
		return o, nil
	}
	if err := checkFields(w, r, body, inObjectFields); err != nil {
		return inObject{}, err
	}
	return unmarshalObject(body)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	if err := checkObject(req.res, o); err != nil {
		return err
	}
	clearNamespace(req.res, &o)
	if o.Metadata.Namespace != "" && o.Metadata.Namespace != req.namespace {
		return errStatus{badRequest("the namespace of the object (%s) does not match the namespace on the request (%s)", o.Metadata.Namespace, req.namespace)}
	}
	name := o.Metadata.Name
	if name == "" && o.Metadata.GenerateName != "" {
		name = o.Metadata.GenerateName + randomSuffix()
	}
	if name == "" {
		st := newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("%s is invalid: metadata.name: Required value: name or generateName is required", req.res.kind))
		st.Details = &StatusDetails{Group: req.res.group, Kind: req.res.kind,
			Causes: []StatusCause{{Type: "FieldValueRequired", Message: "Required value: name or generateName is required", Field: "metadata.name"}}}
		return errStatus{st}
	}
	if err := refuseResourceVersion(r, o.Metadata.ResourceVersion); err != nil {
		return err
	}
	managed, err := s.trackCreate(r, req.res, name, req.namespace, o)
	if err != nil {
		return err
	}
	inst, err := s.createObject(r, req, o, name, managed)
	if err != nil {
		return err
	}
	// The answer names the object as toObject does; the audit event
	// takes the name from here instead of decoding the answer.
	audit.Created(r.Context(), inst.Namespace, inst.Name)
	writeWrite(w, http.StatusCreated, req.res, dryRunView(r, inst, nil), true)
	return nil
}

// clearNamespace drops the namespace of an object of a cluster-scoped kind,
// as the API server does: a manifest written with one (or a kubectl
// context's default) still creates and updates the one object there is.
func clearNamespace(res *resource, o *inObject) {
	if !res.namespaced {
		o.Metadata.Namespace = ""
	}
}

// refuseResourceVersion refuses a create whose object carries a
// resourceVersion (most likely an object read back and sent again) as the
// API server does: 500 without a reason, its storage's text. As there, a
// value that is not a positive integer passes, and so does a dry run, which
// the API server answers before its storage would look.
func refuseResourceVersion(r *http.Request, rv string) error {
	if n, err := strconv.ParseUint(rv, 10, 64); err != nil || n == 0 || cairn.IsDryRun(r.Context()) {
		return nil
	}
	// The API server's message; its 500 (an internal error of its
	// storage layer) would tell clients, and cairn's log, that the server
	// failed, where the request was wrong: 400 BadRequest.
	return errStatus{newStatus(http.StatusBadRequest, "BadRequest", "resourceVersion should not be set on objects to be created")}
}

// createObject creates the instance of a request object, with the managed
// fields given, and returns it with its value.
func (s *Server) createObject(r *http.Request, req request, o inObject, name string, managedFields json.RawMessage) (cairn.Instance, error) {
	in := hub.NewInstance{
		ManagedFields: managedFields,
		Alias:         name,
		Namespace:     req.namespace,
		Name:          name,
		TypeRef:       req.res.typ.Ref(),
		Labels:        o.Metadata.Labels,
		Annotations:   storedAnnotations(o.Metadata.Annotations),
		Value:         o.Spec,
	}
	if in.Value == nil {
		in.Value = json.RawMessage(`{}`)
	}
	if b, c := o.Metadata.Annotations[AnnotationBackend], o.Metadata.Annotations[AnnotationBackendContext]; b != "" || c != "" {
		if b != "" {
			id, err := s.hub.ResolveBackend(r.Context(), b)
			if err != nil && (cairn.HasCode(err, cairn.CodeNotFound) || cairn.HasCode(err, cairn.CodeInvalid)) {
				return cairn.Instance{}, backendAnnotationInvalid(req.res, name, b, err)
			}
			if err != nil {
				return cairn.Instance{}, err
			}
			b = id
		}
		in.Backend = &hub.BackendInput{ID: b}
		if c != "" {
			in.Backend.Context = json.RawMessage(c)
		}
	}
	created, err := s.hub.CreateInstances(r.Context(), hub.CreateRequest{Instances: []hub.NewInstance{in}})
	if err != nil {
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			st := newStatus(http.StatusConflict, "AlreadyExists", fmt.Sprintf("%s.%s %q already exists", req.res.plural, req.res.group, name))
			st.Details = &StatusDetails{Name: name, Group: req.res.group, Kind: req.res.plural}
			return cairn.Instance{}, alreadyExists{errStatus{st}}
		}
		return cairn.Instance{}, errStatus{errorStatus(err, req.res.target(name))}
	}
	return s.withValue(r, created[0].Instance)
}

// backendAnnotationInvalid is the 422 of a backend annotation that names
// no storage backend, or several.
func backendAnnotationInvalid(res *resource, name, ref string, err error) error {
	field := "metadata.annotations[" + AnnotationBackend + "]"
	msg := fmt.Sprintf("Invalid value: %q: %v", ref, err)
	st := newStatus(http.StatusUnprocessableEntity, "Invalid", fmt.Sprintf("%s %q is invalid: %s: %s", res.kind, name, field, msg))
	st.Details = &StatusDetails{Name: name, Group: res.group, Kind: res.kind,
		Causes: []StatusCause{{Type: "FieldValueInvalid", Field: field, Message: msg}}}
	return errStatus{st}
}

// alreadyExists is the Status of a create that found the name taken, told
// apart for server-side apply, which then applies to what is there.
type alreadyExists struct{ errStatus }

func (a alreadyExists) Unwrap() error { return a.errStatus }

// withValue fills in the value of a created instance's latest resource
// version when the hub did not (a context-only backend, which derives the
// value from the context the write stored), from the backend; the version
// is immutable, so this reads what the write that made it stored,
// whatever happened since. The create has committed: a read that fails
// (the backend went down just after) leaves the value out of the answer
// with a warning, it does not turn the committed create into an error
// the client would retry.
func (s *Server) withValue(r *http.Request, inst cairn.Instance) (cairn.Instance, error) {
	if inst.Latest.Value != nil || cairn.IsDryRun(r.Context()) {
		// A dry run stored nothing a backend could be asked for.
		return inst, nil
	}
	vs, err := s.hub.Values(r.Context(), []hub.ValueRef{{Instance: inst, Version: inst.Latest}})
	switch {
	case cairn.HasCode(err, cairn.CodeNotFound):
		// Deleted since by another writer: the metadata as created.
	case err != nil:
		s.committedUnread(r, inst, err)
	default:
		inst.Latest.Value = vs[0]
	}
	return inst, nil
}

// committedUnread warns that the answer to a committed write of inst
// lacks its value, which its context-only backend could not give.
func (s *Server) committedUnread(r *http.Request, inst cairn.Instance, err error) {
	s.log.WarnContext(r.Context(), "a committed write is answered without its value: its storage backend could not be read",
		"instance", inst.ID, "resourceVersion", inst.Latest.ResourceVersion, "backend", inst.Backend.ID, "err", err)
	warnAnswer(r, fmt.Sprintf("the write committed (resource version %d of TypeInstance %s), but its value could not be read from its storage backend for this answer, which leaves it out: %s; GET the object once the backend answers",
		inst.Latest.ResourceVersion, inst.ID, cairn.BoundText(err.Error(), 512)))
}

// replace is PUT: the body is the desired object; metadata.resourceVersion,
// when given, must be the current one.
func (s *Server) replace(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	cur, err := s.instance(r, req)
	if err != nil {
		return err
	}
	inst, err := s.write(r, req, cur, o, nil)
	if err != nil {
		return err
	}
	writeWrite(w, http.StatusOK, req.res, dryRunView(r, inst, &cur), inst.Latest.ResourceVersion != cur.Latest.ResourceVersion)
	return nil
}

// write applies a desired object to the current instance. managedFields
// are those a server-side apply computed; nil has them computed for an
// update by the request's field manager.
func (s *Server) write(r *http.Request, req request, cur cairn.Instance, o inObject, managedFields json.RawMessage) (cairn.Instance, error) {
	if err := checkObject(req.res, o); err != nil {
		return cairn.Instance{}, err
	}
	if o.Metadata.Name != "" && o.Metadata.Name != req.name {
		return cairn.Instance{}, errStatus{badRequest("the name of the object (%s) does not match the name on the URL (%s)", o.Metadata.Name, req.name)}
	}
	clearNamespace(req.res, &o)
	if o.Metadata.Namespace != "" && o.Metadata.Namespace != req.namespace {
		return cairn.Instance{}, errStatus{badRequest("the namespace of the object (%s) does not match the namespace on the request (%s)", o.Metadata.Namespace, req.namespace)}
	}
	if o.Metadata.UID != "" && o.Metadata.UID != cur.ID {
		st := newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", o.Metadata.UID, cur.ID))
		return cairn.Instance{}, errStatus{st}
	}
	ifSeq, err := parseSeq(o.Metadata.ResourceVersion)
	if err != nil {
		return cairn.Instance{}, err
	}
	value := o.Spec
	if value == nil {
		value = json.RawMessage(`{}`)
	}
	// As the hub will store them (kubectl's last-applied object without
	// secrets), so that applying the same object again changes nothing.
	annotations, err := s.hub.StoredAnnotations(r.Context(), cur.TypeRef, nonNilMap(storedAnnotations(o.Metadata.Annotations)))
	if err != nil {
		return cairn.Instance{}, err
	}
	up := hub.UpdateInstance{
		ID:          cur.ID,
		OwnerID:     query(r).Get("lockOwner"),
		IfSeq:       ifSeq,
		Labels:      nonNilMap(o.Metadata.Labels),
		Annotations: annotations,
	}
	changed := !sameMap(up.Labels, cur.Labels) || !sameMap(up.Annotations, cur.Annotations)
	if !cairn.JSONEqual(value, cur.Latest.Value) {
		up.Value, changed = value, true
	}
	if c, ok := o.Metadata.Annotations[AnnotationBackendContext]; ok && !cairn.JSONEqual(json.RawMessage(c), cur.Latest.Context) {
		up.Context, changed = json.RawMessage(c), true
	}
	if !changed && (managedFields == nil || cairn.JSONEqual(managedFields, cur.ManagedFields)) {
		// Nothing to do; Kubernetes keeps the resourceVersion on a no-op.
		if ifSeq != 0 && ifSeq != cur.Seq {
			return cairn.Instance{}, objectConflict(req)
		}
		return cur, nil
	}
	if !changed {
		// Only who owns which field changed (a server-side apply of
		// values already there): no new resource version.
		inst, err := s.hub.UpdateManagedFields(r.Context(), cur.ID, up.OwnerID, managedFields, ifSeq)
		if err != nil {
			return cairn.Instance{}, s.conflictStatus(req, err)
		}
		inst.Latest.Value = cur.Latest.Value
		inst.Uses, inst.UsedBy = cur.Uses, cur.UsedBy
		return inst, nil
	}
	if managedFields == nil {
		// Managed fields sent as they are live (a patch leaves them), or
		// not sent (the field manager then takes live's), are taken from
		// the live object, not decoded twice.
		sent := o.Metadata.ManagedFields
		liveFields := len(cur.ManagedFields) > 0 && (bytes.Equal(sent, cur.ManagedFields) || len(sent) == 0 || string(sent) == "null")
		if liveFields {
			o.Metadata.ManagedFields = nil
		}
		desired, err := desiredObject(req.res, req.name, req.namespace, o)
		if err != nil {
			return cairn.Instance{}, err
		}
		managedFields = s.trackLiveUpdate(r, req.res, &cur, desired, liveFields)
	}
	up.ManagedFields = managedFields
	up.Current = &cur // read at this request: the hub need not read it again
	out, err := s.hub.UpdateInstances(r.Context(), []hub.UpdateInstance{up})
	if err != nil {
		return cairn.Instance{}, s.conflictStatus(req, err)
	}
	return s.written(r, cur, out[0], up.Value)
}

// conflictStatus words a hub conflict as the API server does.
func (s *Server) conflictStatus(req request, err error) error {
	if !cairn.HasCode(err, cairn.CodeConflict) {
		return err
	}
	return objectConflict(req)
}

// objectConflict is the answer to a write whose resourceVersion is not
// the object's, in the API server's words.
func objectConflict(req request) error {
	st := newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on %s.%s %q: the object has been modified; please apply your changes to the latest version and try again", req.res.plural, req.res.group, req.name))
	st.Details = &StatusDetails{Name: req.name, Group: req.res.group, Kind: req.res.plural}
	return errStatus{st}
}

// written is the answer to an update: the instance as the update's own
// transaction left it, with the value of the resource version it wrote and
// the relations read before it. Reading the instance again instead could
// show another writer's later change (another replica's, or a concurrent
// request's), whose resourceVersion a client would then send with its next
// conditional update, overwriting that change unseen.
func (s *Server) written(r *http.Request, cur, inst cairn.Instance, value json.RawMessage) (cairn.Instance, error) {
	inst.Uses, inst.UsedBy = cur.Uses, cur.UsedBy
	if inst.Latest.Value != nil {
		// The hub answered with the value the write stored (built-in, or
		// sent to a backend that accepts values): nothing to read back, so
		// a backend gone since cannot make the committed write look failed.
		return inst, nil
	}
	// A context-only backend derives the value from the context the write
	// stored: read it back; when that fails, the update has committed all
	// the same, and is answered without its value (and a warning) rather
	// than with an error the client would retry.
	rv, err := s.hub.ResourceVersion(r.Context(), inst.ID, inst.Latest.ResourceVersion, true)
	switch {
	case err == nil:
		inst.Latest = rv
	case cairn.HasCode(err, cairn.CodeNotFound):
		// Deleted since: the value as written.
		if value == nil {
			value = cur.Latest.Value
		}
		inst.Latest.Value = value
	default:
		s.committedUnread(r, inst, err)
	}
	return inst, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// readPatch reads a PATCH request's body and media type, and the JSON
// merge or JSON patch it is (apply nil for any other type, which each
// resource answers in its own way).
func (s *Server) readPatch(w http.ResponseWriter, r *http.Request) (ct string, body []byte, apply func(doc []byte) ([]byte, error), err error) {
	ct, _, _ = mime.ParseMediaType(r.Header.Get("Content-Type"))
	if body, err = s.readBody(w, r); err != nil {
		return ct, nil, nil, err
	}
	apply, err = jsonPatcher(ct, body)
	return ct, body, apply, err
}

// jsonPatcher returns what applies a JSON merge patch (RFC 7386) or JSON
// patch (RFC 6902) body of media type ct to a document; nil for another
// media type, which the caller answers itself.
func jsonPatcher(ct string, body []byte) (func(doc []byte) ([]byte, error), error) {
	switch ct {
	case "application/merge-patch+json":
		return func(doc []byte) ([]byte, error) { return jsonpatch.MergePatch(doc, body) }, nil
	case "application/json-patch+json":
		p, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, errStatus{badRequest("the JSON patch is not valid: %v", err)}
		}
		return p.Apply, nil
	}
	return nil, nil
}

// unsupportedPatchMessage refuses a patch media type as the API server
// does for a custom resource (strategic merge patch needs Go struct tags).
const unsupportedPatchMessage = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"

// patch applies a JSON merge patch (RFC 7386) or JSON patch (RFC 6902) to
// the object as served and writes the result, retrying when another writer
// got in between, as the Kubernetes API server does.
func (s *Server) patch(w http.ResponseWriter, r *http.Request, req request) error {
	ct, body, apply, err := s.readPatch(w, r)
	if err != nil {
		return err
	}
	switch {
	case apply != nil:
	case ct == "application/apply-patch+yaml":
		return s.apply(w, r, req, body)
	case ct == "application/strategic-merge-patch+json":
		// The API server's answer for a custom resource, word for word:
		// kubectl prints it after "<type> is not supported by <kind>: ".
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType", unsupportedPatchMessage)}
	default:
		return errStatus{newStatus(http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			fmt.Sprintf("%s (got %q)", unsupportedPatchMessage, ct))}
	}
	specPatch, specOnly := specMergePatch(ct, body)
	specOnly = specOnly && req.sub == ""
	// The first attempt patches the object as the read cache holds it, with
	// no wait for the cache to catch up (hub.GuessInstanceByName); its write
	// is conditional on what it patched. Any other outcome of a guess than a
	// new resource version written (a conflict, a refusal, a patch found to
	// change nothing) is decided again on a consistent read.
	guess := req.sub == "" && !cairn.IsDryRun(r.Context())
	done, err := s.patching.wait(r.Context(), patchKey{req.res.typ.Path, req.namespace, req.name})
	if err != nil {
		return err
	}
	defer done()
	for attempt := 0; ; attempt++ {
		var cur cairn.Instance
		guessed := false
		if guess && attempt == 0 {
			cur, guessed = s.hub.GuessInstanceByName(req.res.typ.Path, req.namespace, req.name)
		}
		if !guessed {
			if cur, err = s.instance(r, req); err != nil {
				return err
			}
		}
		var o inObject
		patchedSpec := false
		if specOnly {
			if attempt == 0 {
				// Nothing to check for unknown fields, but the option
				// itself is checked.
				if _, err := fieldValidation(r); err != nil {
					return err
				}
			}
			if o, patchedSpec, err = patchSpec(req.res, cur, specPatch); err != nil {
				if guessed {
					continue
				}
				return err
			}
		}
		base := cur
		if req.sub == "status" {
			// A grant of status reads the object as get does: a patch
			// must not copy (or test) secret values it may not reveal.
			if _, err := s.hub.HideSecrets(r.Context(), &base, req.res.objectAttrs(req.namespace, req.name)); err != nil {
				return err
			}
		}
		if !patchedSpec {
			patched, err := patchWhole(req.res, base, apply)
			if err != nil {
				if guessed {
					continue // a JSON patch may not apply to an outdated object
				}
				return err
			}
			if attempt == 0 {
				// Unknown fields come from the patch alone: the object as
				// served holds none, so a guess judges them as well.
				if err := checkFields(w, r, patched, inObjectFields); err != nil {
					return err
				}
			}
			if o, err = decodeObject(patched); err != nil {
				if guessed {
					continue
				}
				return err
			}
		}
		if req.sub == "status" {
			inst, err := s.writeStatus(r, req, cur, o)
			if err != nil && !explicitRV(o, cur) && attempt < 5 && isConflictStatus(err) {
				continue
			}
			if err != nil {
				return err
			}
			if _, err := s.hub.HideSecrets(r.Context(), &inst, req.res.objectAttrs(req.namespace, req.name)); err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, toObject(req.res, inst))
			return nil
		}
		// A patch that does not set resourceVersion applies to whatever is
		// current; it then carries the version read above.
		explicit := o.Metadata.ResourceVersion != strconv.FormatInt(cur.Seq, 10)
		if guessed && explicit {
			// A precondition is judged on the object as it is, not on a
			// guess: one older than the precondition would pass it with a
			// patch of an outdated object.
			continue
		}
		inst, err := s.write(r, req, cur, o, nil)
		if guessed && (err != nil || inst.Latest.ResourceVersion == cur.Latest.ResourceVersion) {
			continue
		}
		if err != nil && !explicit && attempt < maxWriteAttempts && isConflictStatus(err) {
			continue
		}
		if err != nil {
			return err
		}
		done() // the next patch of the object need not wait for this answer
		writeWrite(w, http.StatusOK, req.res, dryRunView(r, inst, &cur), inst.Latest.ResourceVersion != cur.Latest.ResourceVersion)
		return nil
	}
}

func isConflictStatus(err error) bool {
	var es errStatus
	return (errorsAs(err, &es) && es.st.Code == http.StatusConflict && es.st.Reason == "Conflict") || cairn.HasCode(err, cairn.CodeConflict)
}

// deleteOptions is the body kubectl sends with DELETE.
type deleteOptions struct {
	Preconditions *struct {
		UID             *string `json:"uid"`
		ResourceVersion *string `json:"resourceVersion"`
	} `json:"preconditions"`
	// DryRun is where kubectl delete --dry-run=server puts "All", rather
	// than in the query.
	DryRun []string `json:"dryRun"`
	// PropagationPolicy is where kubectl delete --cascade puts
	// Background (its default), Foreground or Orphan; OrphanDependents is
	// its deprecated form. Both may also come in the query.
	PropagationPolicy *string `json:"propagationPolicy"`
	OrphanDependents  *bool   `json:"orphanDependents"`
}

// checkPropagation refuses what the API server refuses (an unknown
// policy, both fields set) and, since cairn always deletes an
// installation's children before it (the API server's Foreground; its
// Background deletes them afterwards, to the same end), an Orphan delete
// of an instance that owns children: obeying the rest of the request
// would delete exactly what the caller asked to keep.
func (o deleteOptions) checkPropagation() error {
	if o.OrphanDependents != nil && o.PropagationPolicy != nil {
		return invalidOption("DeleteOptions", "propagationPolicy",
			fmt.Sprintf("Invalid value: %q: orphanDependents and deletionPropagation cannot be both set", *o.PropagationPolicy))
	}
	if p := o.PropagationPolicy; p != nil && *p != "Foreground" && *p != "Background" && *p != "Orphan" {
		return invalidOption("DeleteOptions", "propagationPolicy",
			fmt.Sprintf(`Unsupported value: %q: supported values: "Foreground", "Background", "Orphan"`, *p))
	}
	return nil
}

func (o deleteOptions) orphan() bool {
	return (o.PropagationPolicy != nil && *o.PropagationPolicy == "Orphan") || (o.OrphanDependents != nil && *o.OrphanDependents)
}

// refuseOrphan refuses an Orphan delete of inst when it owns children
// (see checkPropagation); kind names it in the message.
func (s *Server) refuseOrphan(ctx context.Context, o deleteOptions, kind, name string, inst cairn.Instance) error {
	if !o.orphan() {
		return nil
	}
	kids, err := s.hub.Children(ctx, inst)
	if err != nil {
		return err
	}
	if len(kids) == 0 {
		return nil
	}
	field, value := "propagationPolicy", `"Orphan"`
	if o.PropagationPolicy == nil {
		field, value = "orphanDependents", "true"
	}
	noun := "children"
	if len(kids) == 1 {
		noun = "child"
	}
	return invalidOption("DeleteOptions", field, fmt.Sprintf(
		"Unsupported value: %s: %s %q owns %d %s, which cairn deletes before it; supported values: \"Foreground\", \"Background\"",
		value, kind, name, len(kids), noun))
}

// deletePreconditions checks a DELETE's preconditions against the
// instance with id and returns the resourceVersion (change sequence) the
// delete is conditional on, 0 for none: DeleteOptions.preconditions, or
// ?resourceVersion= as kubectl delete sends it.
func deletePreconditions(r *http.Request, opts deleteOptions, id string) (int64, error) {
	var ifSeq int64
	if p := opts.Preconditions; p != nil {
		if p.UID != nil && *p.UID != id {
			return 0, errStatus{newStatus(http.StatusConflict, "Conflict", fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, id))}
		}
		if p.ResourceVersion != nil {
			var err error
			if ifSeq, err = parseSeq(*p.ResourceVersion); err != nil {
				return 0, err
			}
		}
	}
	if rv := query(r).Get("resourceVersion"); rv != "" && ifSeq == 0 {
		var err error
		if ifSeq, err = parseSeq(rv); err != nil {
			return 0, err
		}
	}
	return ifSeq, nil
}

// readDeleteOptions reads a DELETE's body and returns r carrying a dry run
// when the body asks for one.
func (s *Server) readDeleteOptions(w http.ResponseWriter, r *http.Request) (deleteOptions, *http.Request, error) {
	var opts deleteOptions
	body, err := s.readBody(w, r)
	if err != nil {
		return opts, r, err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if body, err = bodyJSON(r, body); err != nil {
			return opts, r, err
		}
		if err := json.Unmarshal(body, &opts); err != nil {
			return opts, r, errStatus{badRequest("the DeleteOptions body is not valid: %v", err)}
		}
	}
	q := query(r)
	if v := q.Get("propagationPolicy"); v != "" && opts.PropagationPolicy == nil {
		opts.PropagationPolicy = &v
	}
	if v := q.Get("orphanDependents"); v != "" && opts.OrphanDependents == nil {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return opts, r, errStatus{badRequest("orphanDependents: %q is not a boolean", v)}
		}
		opts.OrphanDependents = &b
	}
	if err := opts.checkPropagation(); err != nil {
		return opts, r, err
	}
	if len(opts.DryRun) > 0 {
		q := r.URL.Query()
		q["dryRun"] = append(q["dryRun"], opts.DryRun...)
		r2 := r.Clone(r.Context())
		r2.URL.RawQuery = q.Encode()
		dry, st := dryRun(r2)
		if st != nil {
			return opts, r, *st
		}
		if dry {
			r = r.WithContext(cairn.WithDryRun(r.Context()))
		}
	}
	return opts, r, nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, req request) error {
	opts, r, err := s.readDeleteOptions(w, r)
	if err != nil {
		return err
	}
	// The answer is a Status: no value is read, so a delete goes through
	// with the value's backend down (the journal finishes it there).
	cur, err := s.instanceWith(r, req, false)
	if err != nil {
		return err
	}
	ifSeq, err := deletePreconditions(r, opts, cur.ID)
	if err != nil {
		return err
	}
	if err := s.refuseOrphan(r.Context(), opts, req.res.kind, req.name, cur); err != nil {
		return err
	}
	if err := s.hub.DeleteInstanceIf(r.Context(), cur.ID, query(r).Get("lockOwner"), ifSeq); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, Status{Kind: "Status", APIVersion: "v1", Metadata: map[string]any{}, Status: "Success", Code: http.StatusOK,
		Details: &StatusDetails{Name: req.name, Group: req.res.group, Kind: req.res.plural, UID: cur.ID}})
	return nil
}
