package deps

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/Masterminds/semver/v3"
)

// ErrNotFound is wrapped by Catalog and Installations lookups of what does
// not exist.
var ErrNotFound = errors.New("not found")

// Catalog is where the resolver finds stacks: the hub's catalog, or
// MemCatalog.
type Catalog interface {
	// Versions lists the versions of the named stack (none if unknown).
	Versions(ctx context.Context, name string) ([]string, error)
	// Stack returns one version; an unknown one wraps ErrNotFound.
	Stack(ctx context.Context, ref Reference) (*Stack, error)
}

// MemCatalog is a Catalog in memory, safe for concurrent use.
type MemCatalog struct {
	mu       sync.RWMutex
	stacks   map[Reference]*Stack
	versions map[string][]string
}

// NewMemCatalog returns a catalog holding stacks.
func NewMemCatalog(stacks ...*Stack) (*MemCatalog, error) {
	c := &MemCatalog{stacks: map[Reference]*Stack{}, versions: map[string][]string{}}
	for _, s := range stacks {
		if err := c.Add(s); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Add puts one stack version in the catalog, after checking it.
func (c *MemCatalog) Add(s *Stack) error {
	v, err := semver.NewVersion(s.Version)
	if err != nil {
		return fmt.Errorf("stack %s: version %q is not semver", s.Name, s.Version)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("stack %s@%s: %w", s.Name, s.Version, err)
	}
	ref := Reference{Name: s.Name, Version: v.String()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.stacks[ref]; !dup {
		c.versions[s.Name] = append(c.versions[s.Name], ref.Version)
	}
	c.stacks[ref] = s
	return nil
}

// Versions implements Catalog.
func (c *MemCatalog) Versions(_ context.Context, name string) ([]string, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.versions[name]), nil
}

// Stack implements Catalog.
func (c *MemCatalog) Stack(_ context.Context, ref Reference) (*Stack, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.stacks[ref]
	if !ok {
		// Not in canonical form (v1.2, 1.2): normalize and look again.
		if v, err := semver.NewVersion(ref.Version); err == nil {
			ref.Version = v.String()
			s, ok = c.stacks[ref]
		}
	}
	if !ok {
		return nil, fmt.Errorf("stack %s: %w", ref, ErrNotFound)
	}
	return s, nil
}

// Latest is the version a stack named without a version or range
// resolves to: the highest release, or the highest pre-release when every
// version is one ("" when none is semver). A pre-release published to the
// catalog is not picked up by everything that names the stack alone; a
// range admits one only when it says so (seed 002: "vX.Y.Z-0").
func Latest(versions []string) string {
	var best, bestPre *semver.Version
	for _, s := range versions {
		v, err := semver.NewVersion(s)
		if err != nil {
			continue
		}
		top := &best
		if v.Prerelease() != "" {
			top = &bestPre
		}
		if *top == nil || v.GreaterThan(*top) {
			*top = v
		}
	}
	switch {
	case best != nil:
		return best.String()
	case bestPre != nil:
		return bestPre.String()
	}
	return ""
}

// highest returns the highest version of name within the range (Latest
// without one), "" if none, and the versions it looked at (for the plan's
// reasons).
func highest(ctx context.Context, cat Catalog, name string, rng *semver.Constraints) (string, []string, error) {
	vs, err := cat.Versions(ctx, name)
	if err != nil {
		return "", nil, fmt.Errorf("catalog: versions of %s: %w", name, err)
	}
	if rng == nil {
		if v := Latest(vs); v != "" {
			return v, vs, nil
		}
	}
	var best *semver.Version
	for _, s := range vs {
		v, err := semver.NewVersion(s)
		if err != nil {
			continue
		}
		if rng != nil && !rng.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	if best == nil || rng == nil {
		sorted := slices.Clone(vs)
		slices.SortFunc(sorted, compareVersions)
		return "", sorted, nil
	}
	return best.String(), vs, nil
}

func compareVersions(a, b string) int {
	va, ea := semver.NewVersion(a)
	vb, eb := semver.NewVersion(b)
	if ea != nil || eb != nil {
		return cmpString(a, b)
	}
	return va.Compare(vb)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
