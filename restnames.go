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

// PluralForKind is the REST plural (lower case) cairn derives for a kind
// served without an explicit plural: the plural Kubernetes users know from
// CRDs that kubebuilder's controller-gen generates. As there, only the
// kind's last CamelCase word is inflected (PortalSettings -> portalsettings,
// NetworkPolicy -> networkpolicies, DNSProxy -> dnsproxies):
//
//   - a word in the irregular table: its plural (Index -> indices, Person ->
//     people); an uncountable or already plural one stays (Data, Metadata,
//     Series);
//   - -ss, -us, -sis, -ias: a plural of its own (Class -> classes, Status ->
//     statuses, Analysis -> analyses, Alias -> aliases); any other word in
//     -s is taken as plural already (Settings, Credentials, Endpoints);
//   - -x, -z, -ch, -sh: +es (Box -> boxes, Switch -> switches);
//   - -y after a consonant: -ies (Policy -> policies; Gateway -> gateways);
//   - -lf, -rf, -ife: -ves (Shelf -> shelves, Wife -> wives);
//   - -man: -men (Spokesman -> spokesmen; Human -> humans);
//   - an acronym: +s, +es after an S (IngressVIP -> ingressvips, DNS -> dnses);
//   - anything else: +s.
//
// Where controller-gen's word list gives what no Kubernetes user expects, the
// English plural stands: Repo -> repos, Video -> videos (not repoes,
// videoes), Regex -> regexes (not regices), Safe -> safes (not saves).
// An explicit plural (a Type's names.plural, a stack's kind.names.plural)
// always wins over this guess.
func PluralForKind(kind string) string {
	head, word := splitLastWord(kind)
	lower := strings.ToLower(head + word)
	if len(word) > 1 && strings.ToUpper(word) == word && strings.ToLower(word) != word {
		// An acronym (VIP, DNS) is not a word: +s, or +es after an S.
		if strings.HasSuffix(word, "S") {
			return lower + "es"
		}
		return lower + "s"
	}
	return strings.ToLower(head) + pluralWord(strings.ToLower(word))
}

// splitLastWord splits a CamelCase kind before its last word: a capital
// followed by lower case letters or digits (DNSProxy -> DNS, Proxy), or a
// trailing run of capitals (IngressVIP -> Ingress, VIP).
func splitLastWord(kind string) (head, word string) {
	i := len(kind)
	for i > 0 && !isUpper(kind[i-1]) {
		i--
	}
	if i == len(kind) || i == 0 {
		// All capitals at the end (an acronym), or no capital at all.
		for i > 0 && isUpper(kind[i-1]) {
			i--
		}
		if i == len(kind) {
			i = 0
		}
		return kind[:i], kind[i:]
	}
	return kind[:i-1], kind[i-1:]
}

func isUpper(b byte) bool { return b >= 'A' && b <= 'Z' }

// irregularPlurals maps a word to its plural where no suffix rule gives it;
// a word mapped to itself is uncountable or already plural.
var irregularPlurals = map[string]string{
	"person": "people", "child": "children", "human": "humans", "ox": "oxen",
	"mouse": "mice", "goose": "geese", "foot": "feet", "tooth": "teeth",
	"datum": "data", "medium": "media", "criterion": "criteria", "phenomenon": "phenomena",
	"index": "indices", "matrix": "matrices", "vertex": "vertices", "appendix": "appendices", "axis": "axes",
	"quiz": "quizzes", "fez": "fezzes",
	"hero": "heroes", "potato": "potatoes", "tomato": "tomatoes", "echo": "echoes", "veto": "vetoes",
	"data": "data", "metadata": "metadata", "media": "media", "criteria": "criteria",
	"information": "information", "equipment": "equipment", "feedback": "feedback",
	"sheep": "sheep", "fish": "fish", "deer": "deer", "moose": "moose", "aircraft": "aircraft",
	"series": "series", "species": "species", "news": "news", "people": "people", "children": "children",
}

// pluralWord is the plural of one lower-case word, by the rules
// PluralForKind lists.
func pluralWord(w string) string {
	if p, ok := irregularPlurals[w]; ok {
		return p
	}
	has := func(suffix string) bool { return strings.HasSuffix(w, suffix) }
	switch {
	case w == "":
		return ""
	case has("sis"):
		return w[:len(w)-2] + "es"
	case has("ss"), has("us"), has("ias"), has("x"), has("z"), has("ch"), has("sh"):
		return w + "es"
	case has("s"):
		return w
	case has("y") && len(w) > 1 && (!strings.ContainsRune("aeiou", rune(w[len(w)-2])) || has("quy")):
		return w[:len(w)-1] + "ies"
	case has("lf"), has("rf"):
		return w[:len(w)-1] + "ves"
	case has("ife"):
		return w[:len(w)-2] + "ves"
	case has("man"):
		return w[:len(w)-3] + "men"
	}
	return w + "s"
}
