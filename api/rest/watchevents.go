package rest

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/cairn-dev/cairn"
)

// watchEvents keeps the encoded lines of recent watch events, so that the
// watches of one collection encode an object's event once, not once per
// watcher: with 100 watches, encoding was a quarter of a fan-out's CPU.
// A line is reused only for the same resource, event type, secrets shown
// or redacted, instance change number and users; the value then is the
// same too, since only objects the encoded cache would keep (the built-in
// backend's values, no owner reference) are kept here.
type watchEvents struct {
	mu    sync.Mutex
	lines map[watchEventKey]watchEventLine
	bytes int // the lines' total length
}

type watchEventKey struct {
	res     *resource
	id      string
	typ     string
	secrets bool
}

type watchEventLine struct {
	seq    int64
	usedBy []string
	line   []byte
}

// maxWatchEvents and maxWatchEventBytes bound the lines kept; past either
// the cache starts over. Watchers of one change ask within milliseconds of
// each other, so only the latest changes matter.
const (
	maxWatchEvents     = 4096
	maxWatchEventBytes = 16 << 20
)

// line returns the event's line, as json.Encoder writes
// WatchEvent{typ, render(inst)}, newline included. render is called only
// when the line is not kept. The bytes are shared: callers must not
// modify them.
func (c *watchEvents) line(res *resource, typ string, secrets bool, inst cairn.Instance, render func() (any, error)) ([]byte, error) {
	keep := cacheable(&inst)
	key := watchEventKey{res: res, id: inst.ID, typ: typ, secrets: secrets}
	if keep {
		c.mu.Lock()
		e, ok := c.lines[key]
		c.mu.Unlock()
		if ok && e.seq == inst.Seq && slices.Equal(e.usedBy, inst.UsedBy) {
			return e.line, nil
		}
	}
	obj, err := render()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(WatchEvent{Type: typ, Object: obj})
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if keep {
		c.mu.Lock()
		if c.lines == nil || len(c.lines) >= maxWatchEvents || c.bytes+len(b) > maxWatchEventBytes {
			c.lines, c.bytes = map[watchEventKey]watchEventLine{}, 0
		}
		if old, ok := c.lines[key]; ok {
			c.bytes -= len(old.line)
		}
		c.lines[key] = watchEventLine{seq: inst.Seq, usedBy: slices.Clone(inst.UsedBy), line: b}
		c.bytes += len(b)
		c.mu.Unlock()
	}
	return b, nil
}
