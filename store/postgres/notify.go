package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// changesChannel is the channel every transaction that logged a change
// notifies on commit, with the schema and the transaction's newest change
// as payload ("<schema> <seq>"; replicas of other schemas on the same
// database ignore it). PostgreSQL delivers a notification at commit and
// drops it on rollback, so a listener hears of exactly the committed
// changes, from every replica, and knows how far the log reaches without
// asking.
const changesChannel = "cairn_changes"

// qNotifyChanges names the transaction's newest change: it holds the
// change-log lock, so no other transaction's change after it is committed
// or pending, and max(seq) is its own last one.
const qNotifyChanges = `SELECT pg_notify($1, $2 || ' ' || (SELECT COALESCE(max(seq), 0) FROM changes))`

// ListenChanges tells of commits that logged changes, through any replica,
// as PostgreSQL's LISTEN/NOTIFY delivers them: it calls ready once it is
// listening, then changed for every such commit with the position of its
// newest change (0 when the notification does not say: a replica of an
// earlier version sends the schema alone), until ctx ends (it then
// returns nil) or the connection fails. It holds a connection of its own
// for as long as it runs.
func (s *Store) ListenChanges(ctx context.Context, ready func(), changed func(seq int64)) error {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: listen: %w", classify(err))
	}
	conn := pc.Hijack() // a listening connection never goes back to the pool
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("postgres: listen: %w", classify(err))
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("postgres: wait for a notification: %w", classify(err))
		}
		if seq, ok := s.notified(n.Payload); ok {
			changed(seq)
		}
	}
}

// notified reads a notification's payload: whether it is of this store's
// schema, and the position it names (0 when none).
func (s *Store) notified(payload string) (seq int64, ours bool) {
	if payload == s.schema {
		return 0, true
	}
	i := strings.LastIndexByte(payload, ' ')
	if i < 0 || payload[:i] != s.schema {
		return 0, false
	}
	seq, err := strconv.ParseInt(payload[i+1:], 10, 64)
	if err != nil || seq < 0 {
		return 0, true
	}
	return seq, true
}
