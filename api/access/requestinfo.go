package access

import (
	"net/http"
	"strings"

	"github.com/cairn-dev/cairn/auth/rbac"
)

// requestAttributes maps a request to what RBAC decides on, the way the
// Kubernetes API server's RequestInfoFactory does: resource requests under
// /api/v1 and /apis/<group>/<version>, everything else a path with the
// lower-cased HTTP method as its verb.
func requestAttributes(r *http.Request) rbac.Attributes {
	path := strings.Trim(apisPath(r.URL.Path), "/")
	var buf [12]string // on the stack: every request is mapped, most have fewer segments
	seg := splitPath(path, buf[:0])
	var group string
	var rest []string
	switch {
	case len(seg) >= 3 && seg[0] == "api":
		rest = seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		group, rest = seg[1], seg[3:]
	default:
		return nonResourceAttributes(r, path) // discovery and paths
	}
	a := rbac.Attributes{ResourceRequest: true, APIGroup: group}
	watchPrefix := false
	if len(rest) > 0 && rest[0] == "watch" {
		watchPrefix, rest = true, rest[1:]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		if len(rest) == 2 {
			a.Resource, a.Name = "namespaces", rest[1]
		} else {
			a.Namespace, rest = rest[1], rest[2:]
		}
	}
	if a.Resource == "" {
		if len(rest) == 0 {
			return nonResourceAttributes(r, path)
		}
		a.Resource = rest[0]
		if len(rest) >= 2 {
			a.Name = rest[1]
		}
		if len(rest) >= 3 {
			a.Subresource = strings.Join(rest[2:], "/")
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		var w string
		if strings.Contains(r.URL.RawQuery, "watch") {
			w = r.URL.Query().Get("watch")
		}
		switch {
		case watchPrefix || w == "true" || w == "1":
			a.Verb = "watch"
		case a.Name == "":
			a.Verb = "list"
		default:
			a.Verb = "get"
		}
	case http.MethodPost:
		a.Verb = "create"
	case http.MethodPut:
		a.Verb = "update"
	case http.MethodPatch:
		a.Verb = "patch"
	case http.MethodDelete:
		a.Verb = "delete"
		if a.Name == "" {
			a.Verb = "deletecollection"
		}
	default:
		a.Verb = strings.ToLower(r.Method)
	}
	return a
}

// cupPrefix is where cairn serves flipt cup's API (rest.CupPrefix): the
// same objects as under /apis in cup's wire format.
const cupPrefix = "/cup"

// apisPath is the path a request under cupPrefix/apis makes under /apis,
// which is what it reads or writes and so what it is authorized as; any
// other path as it is.
func apisPath(p string) string {
	if rest, ok := strings.CutPrefix(p, cupPrefix+"/apis"); ok && (rest == "" || rest[0] == '/') {
		return p[len(cupPrefix):]
	}
	return p
}

// isCupPut reports whether r is a cup PUT of an object, which creates it
// when the name is free: it needs create as well as update.
func isCupPut(r *http.Request, a rbac.Attributes) bool {
	return r.Method == http.MethodPut && a.ResourceRequest && a.Name != "" && a.Subresource == "" &&
		strings.HasPrefix(r.URL.Path, cupPrefix+"/apis/")
}

// splitPath is strings.Split(p, "/") appending to dst.
func splitPath(p string, dst []string) []string {
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(dst, p)
		}
		dst = append(dst, p[:i])
		p = p[i+1:]
	}
}

// nonResourceAttributes are those of a path: its HTTP method, lower case,
// as the verb (HEAD is get).
func nonResourceAttributes(r *http.Request, path string) rbac.Attributes {
	a := rbac.Attributes{Path: "/" + path}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		a.Verb = "get"
	case http.MethodPost:
		a.Verb = "post"
	default:
		a.Verb = strings.ToLower(r.Method)
	}
	return a
}

// forbiddenMessage is the API server's text for a denial, which kubectl
// users know.
func forbiddenMessage(user string, a rbac.Attributes) string {
	if !a.ResourceRequest {
		return "forbidden: User \"" + user + "\" cannot " + a.Verb + " path \"" + a.Path + "\""
	}
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	qual := a.Resource
	if a.APIGroup != "" {
		qual += "." + a.APIGroup
	}
	if a.Name != "" {
		qual += " \"" + a.Name + "\""
	}
	scope := "at the cluster scope"
	if a.Namespace != "" {
		scope = "in the namespace \"" + a.Namespace + "\""
	}
	return qual + " is forbidden: User \"" + user + "\" cannot " + a.Verb + " resource \"" + res + "\" in API group \"" + a.APIGroup + "\" " + scope
}
