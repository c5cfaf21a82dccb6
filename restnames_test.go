package cairn_test

import (
	"testing"

	"github.com/cairn-dev/cairn"
)

func TestRevisionVersionMapping(t *testing.T) {
	tests := []struct {
		version, revision string
	}{
		{"v1", "1.0.0"},
		{"v2", "2.0.0"},
		{"v1alpha1", "1.0.0-alpha.1"},
		{"v2beta3", "2.0.0-beta.3"},
		{"v10beta12", "10.0.0-beta.12"},
	}
	for _, tt := range tests {
		rev, err := cairn.RevisionForVersion(tt.version)
		if err != nil || rev != tt.revision {
			t.Errorf("RevisionForVersion(%q) = %q, %v; want %q", tt.version, rev, err, tt.revision)
		}
		v, ok := cairn.VersionForRevision(tt.revision)
		if !ok || v != tt.version {
			t.Errorf("VersionForRevision(%q) = %q, %t; want %q", tt.revision, v, ok, tt.version)
		}
	}
	for _, bad := range []string{"", "1", "v0", "v1gamma1", "v01", "V1", "v1alpha0"} {
		if _, err := cairn.RevisionForVersion(bad); err == nil {
			t.Errorf("RevisionForVersion(%q) succeeded, want an error", bad)
		}
	}
	for _, rev := range []string{"0.1.0", "1.2.0", "1.0.1", "1.0.0-rc.1", "01.0.0", "1.0.0-alpha.0"} {
		if v, ok := cairn.VersionForRevision(rev); ok {
			t.Errorf("VersionForRevision(%q) = %q, want no version", rev, v)
		}
	}
}

func TestPathForGroupKind(t *testing.T) {
	tests := []struct{ group, kind, want string }{
		{"flipt.io", "Flag", "io.flipt.flag"},
		{"stable.example.com", "CronTab", "com.example.stable.crontab"},
	}
	for _, tt := range tests {
		if got := cairn.PathForGroupKind(tt.group, tt.kind); got != tt.want {
			t.Errorf("PathForGroupKind(%q, %q) = %q, want %q", tt.group, tt.kind, got, tt.want)
		}
	}
}

func TestPluralForKind(t *testing.T) {
	tests := []struct{ kind, want string }{
		// Regular words, and the suffix rules.
		{"Flag", "flags"},
		{"MinimalGCP", "minimalgcps"},
		{"PortalSettings", "portalsettings"}, // already plural
		{"Credentials", "credentials"},
		{"Endpoints", "endpoints"},
		{"Status", "statuses"},
		{"Bus", "buses"},
		{"IngressClass", "ingressclasses"},
		{"Address", "addresses"},
		{"Alias", "aliases"},
		{"Analysis", "analyses"},
		{"Box", "boxes"},
		{"Regex", "regexes"},
		{"Blitz", "blitzes"},
		{"Search", "searches"},
		{"ServiceMesh", "servicemeshes"},
		{"NetworkPolicy", "networkpolicies"},
		{"Gateway", "gateways"},
		{"DNSProxy", "dnsproxies"},
		{"Soliloquy", "soliloquies"},
		{"Shelf", "shelves"},
		{"Wife", "wives"},
		{"Safe", "safes"},
		{"Belief", "beliefs"},
		{"Spokesman", "spokesmen"},
		{"Repo", "repos"},
		{"Video", "videos"},
		{"Y", "ys"},
		// Irregular, uncountable and already-plural last words.
		{"Person", "people"},
		{"Human", "humans"},
		{"NodeChild", "nodechildren"},
		{"ConfigData", "configdata"},
		{"Metadata", "metadata"},
		{"Datum", "data"},
		{"Criterion", "criteria"},
		{"SearchIndex", "searchindices"},
		{"Matrix", "matrices"},
		{"Quiz", "quizzes"},
		{"Hero", "heroes"},
		{"Series", "series"},
		{"Equipment", "equipment"},
		{"Sheep", "sheep"},
		// Acronyms as the last word.
		{"IngressVIP", "ingressvips"},
		{"DNS", "dnses"},
		{"ACL", "acls"},
		// Only the last word is inflected.
		{"PersonRecord", "personrecords"},
		{"DataSource", "datasources"},
		{"lowercase", "lowercases"},
	}
	for _, tt := range tests {
		if got := cairn.PluralForKind(tt.kind); got != tt.want {
			t.Errorf("PluralForKind(%q) = %q, want %q", tt.kind, got, tt.want)
		}
	}
}
