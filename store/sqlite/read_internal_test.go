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

// BenchmarkReadOneInstance reads one instance with its labels and
// relations (GetInstances of one id) in a read transaction with a
// statement each for the instance, its labels, uses and usedBy ("several",
// the path for several ids, and for one before) and with the one statement
// GetInstances now uses ("one"), alternated in one loop; ns/op is the
// pair, several-ns and one-ns each part.
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
			if err := tx.AddUses(ctx, ids[i], ids[max(i-1, 0)]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	read := func(one bool, id string) {
		var got []cairn.Instance
		var err error
		if one {
			got, err = s.GetInstances(ctx, []string{id})
		} else {
			err = s.view(ctx, func(r reader) error {
				got, err = r.queryInstances(ctx, true, qInstancesByID, idList([]string{id}))
				return err
			})
		}
		if err != nil || len(got) != 1 || len(got[0].Labels) != 2 || len(got[0].Uses) != 1 {
			b.Fatalf("read %+v, %v", got, err)
		}
	}
	var several, one time.Duration
	i := 0
	for b.Loop() {
		i++
		id := ids[i%n]
		t0 := time.Now()
		read(false, id)
		t1 := time.Now()
		read(true, id)
		several, one = several+t1.Sub(t0), one+time.Since(t1)
	}
	b.ReportMetric(float64(several.Nanoseconds())/float64(i), "several-ns")
	b.ReportMetric(float64(one.Nanoseconds())/float64(i), "one-ns")
}
