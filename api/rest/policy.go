package rest

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
)

// PolicyName is the name of the one Policy object: the hub holds a single
// policy, so policies is a singleton collection (get and replace).
const PolicyName = "default"

// CreatedByAnnotation holds who applied the policy's current version.
const CreatedByAnnotation = "hub.cairn.dev/created-by"

// PolicyObject is the hub's policy served in hub.cairn.dev/v1.
// metadata.resourceVersion is the policy instance's last change, generation
// its resource version (0 before the first apply).
type PolicyObject struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   ObjectMeta    `json:"metadata"`
	Spec       policy.Policy `json:"spec"`
}

func toPolicyObject(doc hub.PolicyDocument) PolicyObject {
	m := ObjectMeta{Name: PolicyName, UID: hub.PolicyID, Generation: int64(doc.ResourceVersion)}
	if doc.Seq != 0 {
		m.ResourceVersion = strconv.FormatInt(doc.Seq, 10)
		m.CreationTimestamp = timestamp(doc.CreatedAt)
	}
	if doc.CreatedBy != "" {
		m.Annotations = map[string]string{CreatedByAnnotation: doc.CreatedBy}
	}
	return PolicyObject{APIVersion: HubGroup + "/" + HubVersion, Kind: "Policy", Metadata: m, Spec: doc.Policy}
}

// inPolicy is the body of a PUT of the policy; the spec is the policy's
// own to judge (policy.Parse).
type inPolicy struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   inMeta          `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

var inPolicyFields = fieldTreeOf(reflect.TypeOf(inPolicy{}), nil)

// listPolicies lists the hub's one policy, for kubectl get policies.
func (s *Server) listPolicies(w http.ResponseWriter, r *http.Request, req request) error {
	doc, err := s.hub.GetPolicy(r.Context())
	if err != nil {
		return err
	}
	s.writeRead(w, r, req.res, List{APIVersion: HubGroup + "/" + HubVersion, Kind: "PolicyList", Items: []any{toPolicyObject(doc)}})
	return nil
}

// servePolicy serves GET and PUT of policies/default.
func (s *Server) servePolicy(w http.ResponseWriter, r *http.Request, req request) error {
	if req.name != PolicyName {
		return errStatus{notFoundStatus(`policies.hub.cairn.dev "` + req.name + `" not found: the hub's one policy is named "` + PolicyName + `"`)}
	}
	if r.Method == http.MethodPut {
		body, err := s.readBody(w, r)
		if err != nil {
			return err
		}
		js, err := yaml.YAMLToJSON(body)
		if err != nil {
			return errStatus{badRequest("the request body is not YAML or JSON: %v", err)}
		}
		if err := checkFields(w, r, js, inPolicyFields); err != nil {
			return err
		}
		var obj inPolicy
		if err := json.Unmarshal(js, &obj); err != nil {
			return errStatus{badRequest("decode the Policy: %v", err)}
		}
		if obj.Metadata.ResourceVersion != "" {
			cur, err := s.hub.GetPolicy(r.Context())
			if err != nil {
				return err
			}
			if obj.Metadata.ResourceVersion != strconv.FormatInt(cur.Seq, 10) {
				return cairn.Errorf(cairn.CodeConflict, "the policy was changed since it was read (resourceVersion %s, now %d); read it again and retry", obj.Metadata.ResourceVersion, cur.Seq)
			}
		}
		spec := obj.Spec
		if len(spec) == 0 {
			spec = json.RawMessage(`{}`)
		}
		p, err := policy.Parse(spec)
		if err != nil {
			return err
		}
		doc, err := s.hub.ApplyPolicy(r.Context(), p)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toPolicyObject(doc))
		return nil
	}
	doc, err := s.hub.GetPolicy(r.Context())
	if err != nil {
		return err
	}
	s.writeRead(w, r, req.res, toPolicyObject(doc))
	return nil
}
