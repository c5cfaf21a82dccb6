package postgres

import (
	"context"
	"strings"

	"github.com/cairn-dev/cairn/store"
)

// ListPlan returns the plan PostgreSQL chooses for ListInstances(f).
func ListPlan(ctx context.Context, s *Store, f store.InstanceFilter) (string, error) {
	q, a, err := listQuery(f)
	if err != nil {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN "+q, a...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// Exec runs statements on the store's pool (to seed a test's rows).
func Exec(ctx context.Context, s *Store, sql string) error {
	_, err := s.pool.Exec(ctx, sql)
	return err
}
