package access

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
)

// Paths of the access reviews, as the API server serves them.
const (
	SelfSubjectAccessReviewPath = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
	SubjectAccessReviewPath     = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
	// SelfSubjectRulesReviewPath lists the caller's rules in a namespace
	// (kubectl auth can-i --list).
	SelfSubjectRulesReviewPath = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
	// SelfSubjectReviewPath answers "who am I" (kubectl auth whoami; the
	// web console's sign-in).
	SelfSubjectReviewPath = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
)

// ReviewPaths are the paths Handle registers, for a router that sends
// other requests under /apis/ past the mux.
func ReviewPaths() []string {
	return []string{SelfSubjectAccessReviewPath, SubjectAccessReviewPath, SelfSubjectRulesReviewPath, SelfSubjectReviewPath}
}

// Handle registers the access reviews on mux; the guard has already
// authorized the create (system:basic-user grants it for the self review to
// everyone authenticated; the other needs a role that grants it).
func (g *Guard) Handle(mux *http.ServeMux) {
	mux.HandleFunc("POST "+SelfSubjectAccessReviewPath, g.selfReview)
	mux.HandleFunc("POST "+SubjectAccessReviewPath, g.subjectReview)
	mux.HandleFunc("POST "+SelfSubjectRulesReviewPath, g.rulesReview)
	mux.HandleFunc("POST "+SelfSubjectReviewPath, g.whoami)
}

// whoami answers a SelfSubjectReview with the user the request was
// authenticated (and possibly impersonated) as. The body is read only to
// check that it is one: the review has no spec.
func (g *Guard) whoami(w http.ResponseWriter, r *http.Request) {
	var rev authnv1.SelfSubjectReview
	if !g.decode(w, r, &rev) {
		return
	}
	u, _ := cairn.UserFrom(r.Context())
	rev.Status = authnv1.SelfSubjectReviewStatus{UserInfo: authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}}
	rev.APIVersion, rev.Kind = "authentication.k8s.io/v1", "SelfSubjectReview"
	writeJSON(w, http.StatusCreated, rev)
}

func (g *Guard) selfReview(w http.ResponseWriter, r *http.Request) {
	var rev authzv1.SelfSubjectAccessReview
	if !g.decode(w, r, &rev) {
		return
	}
	u, _ := cairn.UserFrom(r.Context())
	attrs, ok := reviewAttributes(w, rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes)
	if !ok {
		return
	}
	attrs.User = u
	d := g.cfg.Authz.AuthorizeUser(r.Context(), attrs)
	rev.Status = authzv1.SubjectAccessReviewStatus{Allowed: d.Allowed, Reason: d.Reason}
	rev.APIVersion, rev.Kind = "authorization.k8s.io/v1", "SelfSubjectAccessReview"
	writeJSON(w, http.StatusCreated, rev)
}

func (g *Guard) subjectReview(w http.ResponseWriter, r *http.Request) {
	var rev authzv1.SubjectAccessReview
	if !g.decode(w, r, &rev) {
		return
	}
	if rev.Spec.User == "" && len(rev.Spec.Groups) == 0 {
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "SubjectAccessReview: spec.user or spec.groups is required")
		return
	}
	attrs, ok := reviewAttributes(w, rev.Spec.ResourceAttributes, rev.Spec.NonResourceAttributes)
	if !ok {
		return
	}
	attrs.User = cairn.User{Name: rev.Spec.User, UID: rev.Spec.UID, Groups: rev.Spec.Groups}
	d := g.cfg.Authz.AuthorizeUser(r.Context(), attrs)
	rev.Status = authzv1.SubjectAccessReviewStatus{Allowed: d.Allowed, Reason: d.Reason}
	rev.APIVersion, rev.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	writeJSON(w, http.StatusCreated, rev)
}

// rulesReview answers a SelfSubjectRulesReview with the rules the caller
// holds in spec.namespace, split as the API server splits them: a rule
// naming resources is a resource rule, one naming paths a non-resource
// rule. cairn's RBAC is the only authorizer, so the answer is complete.
func (g *Guard) rulesReview(w http.ResponseWriter, r *http.Request) {
	var rev authzv1.SelfSubjectRulesReview
	if !g.decode(w, r, &rev) {
		return
	}
	if rev.Spec.Namespace == "" {
		// The API server's words for a review without a namespace.
		writeStatus(w, http.StatusBadRequest, "BadRequest", "no namespace on request")
		return
	}
	u, _ := cairn.UserFrom(r.Context())
	st := authzv1.SubjectRulesReviewStatus{ResourceRules: []authzv1.ResourceRule{}, NonResourceRules: []authzv1.NonResourceRule{}}
	for _, rule := range g.cfg.Authz.RulesFor(r.Context(), u, rev.Spec.Namespace) {
		if len(rule.Resources) > 0 {
			st.ResourceRules = append(st.ResourceRules, authzv1.ResourceRule{Verbs: rule.Verbs, APIGroups: rule.APIGroups,
				Resources: rule.Resources, ResourceNames: rule.ResourceNames})
		}
		if len(rule.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authzv1.NonResourceRule{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
		}
	}
	rev.Status = st
	rev.APIVersion, rev.Kind = "authorization.k8s.io/v1", "SelfSubjectRulesReview"
	writeJSON(w, http.StatusCreated, rev)
}

func reviewAttributes(w http.ResponseWriter, ra *authzv1.ResourceAttributes, na *authzv1.NonResourceAttributes) (rbac.Attributes, bool) {
	switch {
	case ra != nil && na != nil:
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "spec: give resourceAttributes or nonResourceAttributes, not both")
	case ra != nil:
		return rbac.Attributes{Verb: ra.Verb, ResourceRequest: true, APIGroup: ra.Group, Resource: ra.Resource,
			Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}, true
	case na != nil:
		return rbac.Attributes{Verb: na.Verb, Path: na.Path}, true
	default:
		writeStatus(w, http.StatusUnprocessableEntity, "Invalid", "spec: resourceAttributes or nonResourceAttributes is required")
	}
	return rbac.Attributes{}, false
}

// reviewCodecs decodes access reviews in JSON, YAML and the protobuf
// encoding client-go uses for built-in kinds (kubectl auth can-i).
func reviewCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := authzv1.AddToScheme(scheme); err != nil {
		panic(err) // static registration of generated types
	}
	if err := authnv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme)
}

func (g *Guard) decode(w http.ResponseWriter, r *http.Request, into runtime.Object) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		mt, _, perr := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if perr != nil {
			mt = "application/json"
		}
		info, ok := runtime.SerializerInfoForMediaType(g.codecs.SupportedMediaTypes(), mt)
		if !ok {
			writeStatus(w, http.StatusUnsupportedMediaType, "UnsupportedMediaType", fmt.Sprintf("Content-Type %q: send application/json, application/yaml or application/vnd.kubernetes.protobuf", mt))
			return false
		}
		_, _, err = info.Serializer.Decode(body, nil, into)
	}
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", "the body is not an access review: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
