package deps

import (
	"context"
	"strings"
	"testing"
)

// TestResolveVersions: which catalog version a dependency gets, pre-releases
// included. A pre-release is chosen only by a range that admits it (seed
// 002: "Use vX.Y.Z-0 to allow prerelease versions"), or pinned; a
// dependency with no range and no pinned version gets the highest release,
// as Masterminds' "*" would.
func TestResolveVersions(t *testing.T) {
	catalogOf := func(versions ...string) []*Stack {
		var out []*Stack
		for _, v := range versions {
			out = append(out, stackYAML(t, `{name: cache, version: `+v+`, outputs: [{name: host}]}`))
		}
		return out
	}
	all := []string{"0.1.0", "0.2.0", "0.2.1-beta.1", "1.0.0", "1.1.0-beta.1", "2.0.0-rc.1"}
	tests := []struct {
		name, bundle string
		versions     []string
		want         string // the version installed, or the error's text
	}{
		{"no range, no version: the highest release", `{reference: cache}`, all, "1.0.0"},
		{"no range, only pre-releases: the highest of them", `{reference: cache}`, []string{"1.0.0-alpha.1", "1.0.0-beta.2"}, "1.0.0-beta.2"},
		{"pinned pre-release", `{reference: "cache@1.1.0-beta.1"}`, all, "1.1.0-beta.1"},
		{"^0.1.0 stays on 0.1", `{reference: cache, version: ^0.1.0}`, all, "0.1.0"},
		{"^0.x: below 1.0, no pre-release", `{reference: cache, version: ^0.x}`, all, "0.2.0"},
		{"*: releases only", `{reference: cache, version: "*"}`, all, "1.0.0"},
		{"a range with -0 admits pre-releases", `{reference: cache, version: ">=1.1.0-0"}`, all, "2.0.0-rc.1"},
		{"~1.1.0-0", `{reference: cache, version: ~1.1.0-0}`, all, "1.1.0-beta.1"},
		{"a hyphen range", `{reference: cache, version: 0.1.0 - 0.3.0}`, all, "0.2.0"},
		{"a range nothing meets", `{reference: cache, version: 3.x}`, all,
			"no version of stack cache in range 3.x (the catalog has 0.1.0, 0.2.0, 0.2.1-beta.1, 1.0.0, 1.1.0-beta.1, 2.0.0-rc.1)"},
		{"a range only a pre-release would meet", `{reference: cache, version: 2.x}`, all,
			"no version of stack cache in range 2.x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stacks := append(catalogOf(tc.versions...), stackYAML(t, `name: app
version: 1.0.0
dependencies:
  requires:
  - {name: cache, bundle: `+tc.bundle+`}
`))
			r := &Resolver{Catalog: catalog(t, stacks...), Installations: NewIndex()}
			p, err := r.Plan(context.Background(), Request{Namespace: "dev", Name: "a", RootID: "r", Stack: Reference{Name: "app"}})
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if got := nodeByPath(t, p, "cache").Stack.Version; got != tc.want {
				t.Fatalf("installs cache@%s, want %s", got, tc.want)
			}
		})
	}
}

// TestLatest: the default version of a stack named without one.
func TestLatest(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"1.0.0", "2.0.0-rc.1", "1.10.0"}, "1.10.0"},
		{[]string{"2.0.0-rc.1", "2.0.0-beta.3"}, "2.0.0-rc.1"},
		{[]string{"not-semver", "0.1.0"}, "0.1.0"},
	} {
		if got := Latest(tc.in); got != tc.want {
			t.Errorf("Latest(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
