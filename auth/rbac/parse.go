package rbac

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// Parse reads one RBAC object (JSON or YAML) of kind Role, ClusterRole,
// RoleBinding or ClusterRoleBinding, validates it and adds it to p. An error
// names the object and the field that is wrong; p is unchanged then.
func (p *Policy) Parse(data []byte) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("rbac: not JSON or YAML: %w", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return fmt.Errorf("rbac: not an object: %w", err)
	}
	if head.APIVersion != rbacv1.SchemeGroupVersion.String() {
		return fmt.Errorf("rbac: apiVersion %q: want %s", head.APIVersion, rbacv1.SchemeGroupVersion)
	}
	strict := func(v any) error {
		d := json.NewDecoder(strings.NewReader(string(js)))
		d.DisallowUnknownFields()
		if err := d.Decode(v); err != nil {
			return fmt.Errorf("rbac: %s: %w", head.Kind, err)
		}
		return nil
	}
	switch head.Kind {
	case "ClusterRole":
		var o rbacv1.ClusterRole
		if err := strict(&o); err != nil {
			return err
		}
		if err := ValidateClusterRole(&o); err != nil {
			return err
		}
		p.ClusterRoles = append(p.ClusterRoles, o)
	case "Role":
		var o rbacv1.Role
		if err := strict(&o); err != nil {
			return err
		}
		if err := ValidateRole(&o); err != nil {
			return err
		}
		p.Roles = append(p.Roles, o)
	case "ClusterRoleBinding":
		var o rbacv1.ClusterRoleBinding
		if err := strict(&o); err != nil {
			return err
		}
		if err := ValidateClusterRoleBinding(&o); err != nil {
			return err
		}
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, o)
	case "RoleBinding":
		var o rbacv1.RoleBinding
		if err := strict(&o); err != nil {
			return err
		}
		if err := ValidateRoleBinding(&o); err != nil {
			return err
		}
		p.RoleBindings = append(p.RoleBindings, o)
	default:
		return fmt.Errorf("rbac: kind %q: want Role, ClusterRole, RoleBinding or ClusterRoleBinding", head.Kind)
	}
	return nil
}

// ValidateRole checks a Role: a name, a namespace and valid rules without
// nonResourceURLs (they are cluster-wide).
func ValidateRole(r *rbacv1.Role) error {
	where := fmt.Sprintf("Role %q", r.Name)
	if r.Name == "" {
		return errors.New("rbac: Role: metadata.name is required")
	}
	if r.Namespace == "" {
		return fmt.Errorf("rbac: %s: metadata.namespace is required", where)
	}
	return validateRules(where, r.Rules, false)
}

// ValidateClusterRole checks a ClusterRole.
func ValidateClusterRole(r *rbacv1.ClusterRole) error {
	where := fmt.Sprintf("ClusterRole %q", r.Name)
	if r.Name == "" {
		return errors.New("rbac: ClusterRole: metadata.name is required")
	}
	if r.Namespace != "" {
		return fmt.Errorf("rbac: %s: a ClusterRole has no namespace (got %q)", where, r.Namespace)
	}
	return validateRules(where, r.Rules, true)
}

func validateRules(where string, rules []rbacv1.PolicyRule, cluster bool) error {
	for i, r := range rules {
		at := fmt.Sprintf("rbac: %s: rules[%d]", where, i)
		if len(r.Verbs) == 0 {
			return fmt.Errorf("%s.verbs: at least one verb is required", at)
		}
		for j, v := range r.Verbs {
			if v == "" || strings.ContainsAny(v, " /") {
				return fmt.Errorf("%s.verbs[%d]: %q is not a verb", at, j, v)
			}
		}
		if len(r.NonResourceURLs) > 0 {
			if !cluster {
				return fmt.Errorf("%s.nonResourceURLs: only a ClusterRole may grant paths", at)
			}
			if len(r.Resources) > 0 || len(r.APIGroups) > 0 || len(r.ResourceNames) > 0 {
				return fmt.Errorf("%s: a rule grants either resources or nonResourceURLs, not both", at)
			}
			for j, u := range r.NonResourceURLs {
				if u != "*" && (!strings.HasPrefix(u, "/") || strings.Contains(strings.TrimSuffix(u, "*"), "*")) {
					return fmt.Errorf("%s.nonResourceURLs[%d]: %q is not a path starting with / with at most a final *", at, j, u)
				}
			}
			continue
		}
		if len(r.Resources) == 0 {
			return fmt.Errorf("%s.resources: at least one resource (or nonResourceURLs) is required", at)
		}
		if len(r.APIGroups) == 0 {
			return fmt.Errorf(`%s.apiGroups: at least one API group is required ("" is the core group)`, at)
		}
		for j, res := range r.Resources {
			name, sub, hasSub := strings.Cut(res, "/")
			if res == "" || (name == "" || (hasSub && (sub == "" || strings.Contains(sub, "/")))) || (name != "*" && strings.Contains(name, "*")) {
				return fmt.Errorf("%s.resources[%d]: %q is not resource, resource/subresource, * or */subresource", at, j, res)
			}
		}
	}
	return nil
}

// ValidateRoleBinding checks a RoleBinding.
func ValidateRoleBinding(b *rbacv1.RoleBinding) error {
	where := fmt.Sprintf("RoleBinding %q", b.Name)
	if b.Name == "" {
		return errors.New("rbac: RoleBinding: metadata.name is required")
	}
	if b.Namespace == "" {
		return fmt.Errorf("rbac: %s: metadata.namespace is required", where)
	}
	if b.RoleRef.Kind != "Role" && b.RoleRef.Kind != "ClusterRole" {
		return fmt.Errorf("rbac: %s: roleRef.kind %q: want Role or ClusterRole", where, b.RoleRef.Kind)
	}
	return validateBinding(where, b.RoleRef, b.Subjects, false)
}

// ValidateClusterRoleBinding checks a ClusterRoleBinding.
func ValidateClusterRoleBinding(b *rbacv1.ClusterRoleBinding) error {
	where := fmt.Sprintf("ClusterRoleBinding %q", b.Name)
	if b.Name == "" {
		return errors.New("rbac: ClusterRoleBinding: metadata.name is required")
	}
	if b.RoleRef.Kind != "ClusterRole" {
		return fmt.Errorf("rbac: %s: roleRef.kind %q: a ClusterRoleBinding refers to a ClusterRole", where, b.RoleRef.Kind)
	}
	return validateBinding(where, b.RoleRef, b.Subjects, true)
}

func validateBinding(where string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, cluster bool) error {
	if ref.APIGroup != rbacv1.GroupName {
		return fmt.Errorf("rbac: %s: roleRef.apiGroup %q: want %s", where, ref.APIGroup, rbacv1.GroupName)
	}
	if ref.Name == "" {
		return fmt.Errorf("rbac: %s: roleRef.name is required", where)
	}
	for i, s := range subjects {
		at := fmt.Sprintf("rbac: %s: subjects[%d]", where, i)
		if s.Name == "" {
			return fmt.Errorf("%s.name is required", at)
		}
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != "" && s.APIGroup != rbacv1.GroupName {
				return fmt.Errorf("%s.apiGroup %q: want %s", at, s.APIGroup, rbacv1.GroupName)
			}
		case rbacv1.ServiceAccountKind:
			if cluster && s.Namespace == "" {
				return fmt.Errorf("%s.namespace is required for a ServiceAccount in a ClusterRoleBinding", at)
			}
		default:
			return fmt.Errorf("%s.kind %q: want User, Group or ServiceAccount", at, s.Kind)
		}
	}
	return nil
}
