package stack

import (
	"os"
	"testing"
)

// FuzzPackage feeds arbitrary stack packages: the archive (a .tar.gz from
// anyone who publishes a stack) and, inside a valid archive, an arbitrary
// stack.yaml. Loading refuses with an error or yields a package whose
// archive loads again.
func FuzzPackage(f *testing.F) {
	f.Add([]byte("not gzip"), []byte("apiVersion: cairn.dev/v1alpha1\nkind: Stack\n"))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, []byte("name: [\n"))
	f.Add([]byte{}, []byte("a: &a [1]\nb: [*a,*a]\n"))
	// A real package, and its stack.yaml on its own.
	if s, err := Load(f.Context(), "../examples/stacks/flags-env"); err == nil {
		b, err := s.Archive()
		if err != nil {
			f.Fatal(err)
		}
		m, _ := os.ReadFile("../examples/stacks/flags-env/stack.yaml")
		f.Add(b, m)
	} else {
		f.Fatalf("load the seed package: %v", err)
	}
	f.Fuzz(func(t *testing.T, pkg, manifest []byte) {
		if s, err := FromArchive(pkg); err == nil {
			b, err := s.Archive()
			if err != nil {
				t.Fatalf("Archive of a loaded package: %v", err)
			}
			if _, err := FromArchive(b); err != nil {
				t.Fatalf("a loaded package's archive does not load again: %v", err)
			}
		} else if err.Error() == "" {
			t.Fatal("empty error")
		}
		b, err := archive(map[string][]byte{"stack.yaml": manifest})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := FromArchive(b); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
