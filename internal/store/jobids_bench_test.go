package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cumulus-ml/cumulus/internal/secret"
)

// BenchmarkInsertJobsByID: the submits of a store that holds many jobs,
// eight to a commit as the writer groups them, with random ids against
// ids that start with their time. A random id's index entry (the job's,
// its runs') lands in a random page of every job stored, each a page the
// commit writes to the WAL; a time id's lands at the end.
//
//	go test ./internal/store/ -run '^$' -bench InsertJobsByID -benchtime 20000x
func BenchmarkInsertJobsByID(b *testing.B) {
	const stored, perCommit = 100_000, 8
	for _, kind := range []string{"random", "time"} {
		b.Run(kind, func(b *testing.B) {
			db := openTest(b)
			ctx := context.Background()
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			n := 0
			newID := func() string {
				n++
				if kind == "random" {
					return secret.NewID()
				}
				return secret.NewTimeID(at.Add(time.Duration(n) * time.Millisecond))
			}
			insert := func(count int) {
				err := db.Tx(ctx, func(q Querier) error {
					for range count {
						j := queuedJob(newID(), fmt.Sprintf("j%d", n), 1, 0, "", "")
						if err := InsertJob(ctx, q, j); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			for range stored / 1000 {
				insert(1000)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += perCommit {
				insert(min(perCommit, b.N-i))
			}
		})
	}
}
