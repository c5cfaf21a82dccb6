package schema

import (
	"cmp"
	"container/list"
	"encoding/json"
	"fmt"
	"sync"
)

// DefaultCacheSize is the capacity NewCache uses when given none.
const DefaultCacheSize = 1024

// Cache holds compiled schemas by key (e.g. "path:revision"), so a Type's
// schema is compiled once rather than on every write. It keeps at most its
// capacity, evicting the least recently used. It is safe for concurrent use.
//
// The zero Cache is ready to use, with DefaultCacheSize.
//
// Documents are assumed immutable per key, as Type revisions are; call Forget
// when the document behind a key goes away or changes.
type Cache struct {
	size int

	mu      sync.Mutex
	entries map[string]*list.Element // of *entry
	lru     list.List                // front: most recently used
}

// entry is one key's compilation. done is closed once s and err are set, so
// callers asking for a key being compiled wait for that compilation instead
// of repeating it.
type entry struct {
	key  string
	done chan struct{}
	s    *Schema
	err  error
}

// NewCache returns a cache holding at most size schemas; size <= 0 means
// DefaultCacheSize.
func NewCache(size int) *Cache {
	return &Cache{size: max(size, 0)}
}

// Get returns the schema cached for key, compiling doc and caching the result
// on first use. A compilation error is returned and not cached, so the next
// call tries again.
func (c *Cache) Get(key string, doc json.RawMessage) (*Schema, error) {
	return c.GetDraft(key, doc, Draft2020)
}

// GetDraft is Get compiling with CompileDraft(doc, def). The draft is part
// of the cached entry's identity, so the same key with another draft
// compiles afresh.
func (c *Cache) GetDraft(key string, doc json.RawMessage, def Draft) (*Schema, error) {
	key = fmt.Sprintf("%d\x00%s", def, key)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[string]*list.Element)
	}
	if el, ok := c.entries[key]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*entry)
		c.mu.Unlock()
		<-e.done
		return e.s, e.err
	}
	e := &entry{key: key, done: make(chan struct{})}
	c.entries[key] = c.lru.PushFront(e)
	for c.lru.Len() > cmp.Or(c.size, DefaultCacheSize) {
		c.removeLocked(c.lru.Back())
	}
	c.mu.Unlock()

	// Compile outside the lock: it is slow and other keys must not wait.
	e.s, e.err = CompileDraft(doc, def)
	close(e.done)
	if e.err != nil {
		c.mu.Lock()
		if el, ok := c.entries[key]; ok && el.Value.(*entry) == e {
			c.removeLocked(el)
		}
		c.mu.Unlock()
	}
	return e.s, e.err
}

// Forget drops the schema cached for key, if any.
func (c *Cache) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range []Draft{Draft2020, Draft07} {
		if el, ok := c.entries[fmt.Sprintf("%d\x00%s", d, key)]; ok {
			c.removeLocked(el)
		}
	}
}

// Len returns the number of cached schemas, including any being compiled.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func (c *Cache) removeLocked(el *list.Element) {
	c.lru.Remove(el)
	delete(c.entries, el.Value.(*entry).key)
}
