package git

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
