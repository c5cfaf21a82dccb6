package git

import "github.com/go-git/go-git/v5/plumbing"

// QueuedWrites is how many writers wait for a group commit (tests only).
func (b *Backend) QueuedWrites() int {
	b.group.mu.Lock()
	defer b.group.mu.Unlock()
	n := 0
	for _, q := range b.group.waiting {
		if !q.taken {
			n++
		}
	}
	return n
}

// LocalBranches lists the branches of the backend's local clone (tests
// only).
func (b *Backend) LocalBranches() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.repo == nil {
		return nil
	}
	var out []string
	refs, err := b.repo.Branches()
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	_ = refs.ForEach(func(r *plumbing.Reference) error {
		out = append(out, r.Name().Short())
		return nil
	})
	return out
}
