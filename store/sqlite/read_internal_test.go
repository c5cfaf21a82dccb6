package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/store"
)

// BenchmarkReadOneInstance reads one instance with its labels (what
// GetInstancesBrief does for one id) with the statements for a list of ids
// ("list", what it used before) and for one id ("one"), alternated in one
// loop; ns/op is the pair, list-ns and one-ns each part.
func BenchmarkReadOneInstance(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "read.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	ids := make([]string, n)
	err = s.Update(ctx, func(ctx context.Context, tx store.Tx) error {
		for i := range n {
			ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
			in := cairn.Instance{ID: ids[i], TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}, Namespace: "default",
				Name: fmt.Sprintf("a-%d", i), Labels: map[string]string{"team": "t", "env": "prod"},
				Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true}, CreatedAt: time.Now(),
				Latest: cairn.ResourceVersion{ResourceVersion: 1, CreatedBy: "bench", CreatedAt: time.Now()}}
			if err := tx.CreateInstance(ctx, in); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	read := func(one bool, id string) {
		qi, ql, arg := qInstancesByID, qLabelsOf, any(idList([]string{id}))
		if one {
			qi, ql, arg = qInstanceByID, qLabelsOfOne, id
		}
		err := s.view(ctx, func(r reader) error {
			rows, err := r.query(ctx, qi, arg)
			if err != nil {
				return err
			}
			defer rows.Close()
			found := 0
			for rows.Next() {
				if _, err := scanInstance(rows); err != nil {
					return err
				}
				found++
			}
			if err := rows.Err(); err != nil {
				return err
			}
			rows.Close()
			labels := 0
			if err := r.each(ctx, func(string, string, string) { labels++ }, ql, arg); err != nil {
				return err
			}
			if found != 1 || labels != 2 {
				return fmt.Errorf("read %d instances, %d labels", found, labels)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var list, one time.Duration
	i := 0
	for b.Loop() {
		i++
		id := ids[i%n]
		t0 := time.Now()
		read(false, id)
		t1 := time.Now()
		read(true, id)
		list, one = list+t1.Sub(t0), one+time.Since(t1)
	}
	b.ReportMetric(float64(list.Nanoseconds())/float64(i), "list-ns")
	b.ReportMetric(float64(one.Nanoseconds())/float64(i), "one-ns")
}
