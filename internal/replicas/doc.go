// Package replicas holds the end-to-end tests of several `cairn serve`
// replicas on one PostgreSQL database (DESIGN.md "Scale"): real processes of
// the real binary, real HTTP through the Go client of the REST API, and the
// database read back afterwards to check what the replicas acknowledged.
//
//   - TestReplicas: two replicas, concurrent clients doing a bounded mix of
//     creates, updates (PUT with resourceVersion, PATCH), locks, unlocks and
//     deletes, then invariant checks straight in the database; also REST
//     optimistic concurrency and watches across the two replicas.
//   - TestReplicaCrash: the same workload with one replica killed (SIGKILL)
//     while its writes are in flight; the other keeps serving and the
//     database passes the same checks.
//   - BenchmarkReplicaThroughput: operations per second with one and with two
//     replicas under the same clients.
//
// They need PostgreSQL ($CAIRN_TEST_POSTGRES, see store/postgres/pgtest):
// without it they are skipped loudly, under CI=true they fail.
package replicas
