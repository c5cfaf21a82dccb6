package store_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/store"
)

// RevisionKey pads every numeric run to 20 digits and keeps the rest, so
// that the keys sort as the versions do.
func TestRevisionKey(t *testing.T) {
	z := func(n string) string { return strings.Repeat("0", 20-len(n)) + n }
	for _, tc := range []struct{ rev, want string }{
		{"", ""},
		{"1.0.0", z("1") + "." + z("0") + "." + z("0")},
		{"0.10.0", z("0") + "." + z("10") + "." + z("0")},
		{"1.2.3-rc.1", z("1") + "." + z("2") + "." + z("3") + "-rc." + z("1")},
		{"v007", "v" + z("7")},
		{"alpha", "alpha"},
		{"123456789012345678901234", "123456789012345678901234"}, // past 20 digits: as it is
		{"00000000000000000000000001", z("1")},
	} {
		if got := store.RevisionKey(tc.rev); got != tc.want {
			t.Errorf("RevisionKey(%q) = %q, want %q", tc.rev, got, tc.want)
		}
	}
	ordered := []string{"0.1.0", "0.9.0", "0.10.0", "1.0.0-alpha.1", "1.0.0-alpha.2", "1.0.0-alpha.10", "1.2.3", "10.0.0"}
	keys := make([]string, len(ordered))
	for i, r := range ordered {
		keys[i] = store.RevisionKey(r)
	}
	if !slices.IsSorted(keys) {
		t.Errorf("keys of %v are not in version order: %q", ordered, keys)
	}
}

// BenchmarkRevisionKey: a create computes the key of its Type's revision
// (the writer's insert and the read cache's index).
func BenchmarkRevisionKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		store.RevisionKey("1.0.0-alpha.1")
	}
}
