package cairn

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The one rule that maps a Kubernetes-style identity (group, version, kind)
// to a Type's path and revision, used when a Type is created from a cup
// ResourceDefinition (which has no path or revision of its own):
//
//	path     = the group's DNS labels reversed, then the kind in lower case
//	           flipt.io + Flag                  -> io.flipt.flag
//	revision = the API version as a semantic version
//	           v1 -> 1.0.0, v1alpha1 -> 1.0.0-alpha.1, v2beta3 -> 2.0.0-beta.3
//
// A Type may also declare group, version and names itself; then its own path
// and revision stand and only Type.Version must be a Kubernetes API version.

var apiVersionRE = regexp.MustCompile(`^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$`)

// RevisionForVersion maps a Kubernetes API version to a revision.
func RevisionForVersion(version string) (string, error) {
	m := apiVersionRE.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("API version %q is not of the form v1, v1alpha1 or v2beta3", version)
	}
	if m[2] == "" {
		return m[1] + ".0.0", nil
	}
	return m[1] + ".0.0-" + m[2] + "." + m[3], nil
}

// VersionForRevision is the inverse of RevisionForVersion; ok is false when
// the revision is not of the form it produces.
func VersionForRevision(rev string) (version string, ok bool) {
	major, rest, _ := strings.Cut(rev, ".")
	if rest != "0.0" && !strings.HasPrefix(rest, "0.0-") {
		return "", false
	}
	if _, err := strconv.Atoi(major); err != nil || strings.HasPrefix(major, "0") {
		return "", false
	}
	pre, hasPre := strings.CutPrefix(rest, "0.0-")
	if !hasPre {
		return "v" + major, true
	}
	stage, n, ok := strings.Cut(pre, ".")
	if !ok || (stage != "alpha" && stage != "beta") {
		return "", false
	}
	if _, err := strconv.Atoi(n); err != nil || strings.HasPrefix(n, "0") {
		return "", false
	}
	return "v" + major + stage + n, true
}

// PathForGroupKind maps a group and kind to a Type path.
func PathForGroupKind(group, kind string) string {
	labels := strings.Split(strings.ToLower(group), ".")
	slices.Reverse(labels)
	return strings.Join(labels, ".") + "." + strings.ToLower(kind)
}

// KubernetesGroup reports whether group is one of the Kubernetes API
// server's own groups without a dot (apps, batch, autoscaling, policy,
// extensions), or core, cairn's name for the core group (apiVersion v1).
// A Type may be served under these although a group of one's own needs a
// dot (as a CRD's does): a stack's Deployments, Jobs and ConfigMaps are
// stored and served where kubectl looks for them.
func KubernetesGroup(group string) bool {
	switch group {
	case "core", "apps", "batch", "autoscaling", "policy", "extensions":
		return true
	}
	return false
}
