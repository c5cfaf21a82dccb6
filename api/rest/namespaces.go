package rest

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// The core group (/api/v1) serves one resource, namespaces, read-only:
// a namespace exists while instances live in it ("default" always), so
// kubectl get namespaces and kubectl get ns <name> work. Namespaces are
// not created or deleted by themselves; an instance's create makes its
// namespace.

var namespaceResource = &resource{version: "v1", kind: "Namespace", plural: "namespaces", singular: "namespace",
	shortNames: []string{"ns"}, verbs: []string{"get", "list"}, hubKind: "namespaces"}

// NamespaceObject is a core v1 Namespace.
type NamespaceObject struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ObjectMeta      `json:"metadata"`
	Status     NamespaceStatus `json:"status"`
}

// NamespaceStatus is always Active: cairn has no namespace lifecycle.
type NamespaceStatus struct {
	Phase string `json:"phase"`
}

func (s *Server) routeCore(w http.ResponseWriter, r *http.Request, seg []string) string {
	switch {
	case len(seg) == 0:
		s.onlyGET(w, r, func() {
			writeJSON(w, http.StatusOK, map[string]any{"kind": "APIVersions", "versions": []string{"v1"}, "serverAddressByClientCIDRs": []any{}})
		})
		return "/api"
	case len(seg) == 1 && seg[0] == "v1":
		s.onlyGET(w, r, func() {
			writeJSON(w, http.StatusOK, map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": []apiResource{{
				Name: "namespaces", SingularName: "namespace", Kind: "Namespace", Verbs: namespaceResource.verbs, ShortNames: namespaceResource.shortNames}}})
		})
		return "/api/v1"
	case len(seg) == 2 && seg[0] == "v1" && seg[1] == "namespaces":
		s.onlyGET(w, r, func() {
			if isWatch(r) {
				writeStatus(w, watchNotServed(namespaceResource))
				return
			}
			s.writeErr(w, s.listNamespaces(w, r))
		})
		return "/api/v1/namespaces"
	case len(seg) == 3 && seg[0] == "v1" && seg[1] == "namespaces":
		s.onlyGET(w, r, func() { s.writeErr(w, s.getNamespace(w, r, seg[2])) })
		return "/api/v1/namespaces/{name}"
	}
	writeStatus(w, notFoundStatus("the server could not find the requested resource"))
	return "unknown"
}

func (s *Server) writeErr(w http.ResponseWriter, err error) {
	if err != nil {
		writeStatus(w, statusOf(err, target{kind: "namespaces"}))
	}
}

// namespaces returns every namespace with the time of its oldest instance.
func (s *Server) namespaces(r *http.Request) (map[string]time.Time, error) {
	insts, err := s.hub.ListInstances(r.Context(), store.InstanceFilter{}, false)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{cairn.DefaultNamespace: {}}
	for _, in := range insts {
		if in.Namespace == "" {
			continue // an instance of a cluster-scoped kind
		}
		if t, ok := out[in.Namespace]; !ok || t.IsZero() || in.CreatedAt.Before(t) {
			out[in.Namespace] = in.CreatedAt
		}
	}
	return out, nil
}

func toNamespace(name string, created time.Time) NamespaceObject {
	return NamespaceObject{APIVersion: "v1", Kind: "Namespace",
		Metadata: ObjectMeta{Name: name, CreationTimestamp: timestamp(created)}, Status: NamespaceStatus{Phase: "Active"}}
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	seq, err := s.hub.LastSeq(r.Context())
	if err != nil {
		return err
	}
	nss, err := s.namespaces(r)
	if err != nil {
		return err
	}
	out := List{APIVersion: "v1", Kind: "NamespaceList", Items: []any{}, Metadata: ListMeta{ResourceVersion: strconv.FormatInt(seq, 10)}}
	names := make([]string, 0, len(nss))
	for n := range nss {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out.Items = append(out.Items, toNamespace(n, nss[n]))
	}
	s.writeRead(w, r, namespaceResource, out)
	return nil
}

func (s *Server) getNamespace(w http.ResponseWriter, r *http.Request, name string) error {
	nss, err := s.namespaces(r)
	if err != nil {
		return err
	}
	created, ok := nss[name]
	if !ok {
		st := notFoundStatus(fmt.Sprintf("namespaces %q not found", name))
		st.Details = &StatusDetails{Name: name, Kind: "namespaces"}
		return errStatus{st}
	}
	s.writeRead(w, r, namespaceResource, toNamespace(name, created))
	return nil
}

func namespaceColumns() []printColumn {
	return []printColumn{
		nameColumn("The namespace's name."),
		newColumn(cairn.PrinterColumn{Name: "Status", Type: "string", JSONPath: ".status.phase", Description: "Always Active."}),
		newColumn(ageColumn),
	}
}
