package postgres

import (
	"context"
	"fmt"
)

// changesChannel is the channel every transaction that logged a change
// notifies on commit, with the schema as payload (replicas of other
// schemas on the same database ignore it). PostgreSQL delivers a
// notification at commit and drops it on rollback, so a listener hears of
// exactly the committed changes, from every replica.
const changesChannel = "cairn_changes"

// notifyChanges queues the notification in the transaction; PostgreSQL
// folds repeated identical notifications of one transaction into one.
func (t *tx) notifyChanges(ctx context.Context, schema string) error {
	if _, err := t.q.Exec(ctx, `SELECT pg_notify($1, $2)`, changesChannel, schema); err != nil {
		return fmt.Errorf("postgres: notify the change: %w", classify(err))
	}
	return nil
}

// ListenChanges tells of commits that logged changes, through any replica,
// as PostgreSQL's LISTEN/NOTIFY delivers them: it calls ready once it is
// listening, then changed for every such commit, until ctx ends (it then
// returns nil) or the connection fails. It holds a connection of its own
// for as long as it runs.
func (s *Store) ListenChanges(ctx context.Context, ready, changed func()) error {
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
		if n.Payload == s.schema {
			changed()
		}
	}
}
