package soak

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is what a soak run found.
type Report struct {
	Duration time.Duration  `json:"duration"`
	Ops      map[string]int `json:"ops"`
	// Errors counts errors by operation and kind, and the watch
	// reconnections and relists (which are not failures).
	Errors map[string]int `json:"errors"`
	// ErrorExamples holds the first message of each kind of error.
	ErrorExamples map[string]string `json:"errorExamples,omitempty"`
	// Latency is per operation: p50 and p99 over the run.
	Latency map[string]Percentiles `json:"latency"`
	// Samples are the server's RSS and goroutines over time.
	Samples []sample `json:"samples"`
	// Buckets are the latency percentiles of writes and reads per sample
	// interval.
	Buckets []Bucket `json:"buckets"`
	// Baseline and End are the server before the load and idle after it.
	Baseline sample `json:"baseline"`
	End      sample `json:"end"`
	// Git is what the final check of the Git backend's repository read;
	// nil without Git writes.
	Git *GitCheck `json:"git,omitempty"`
	// Violations are the broken invariants; a run passes without any.
	Violations []string `json:"violations"`
}

// GitCheck is what the final check of the Git writer's repository found.
type GitCheck struct {
	Repository string `json:"repository"` // the bare repository's path
	Backend    string `json:"backend"`    // the backend instance's id
	Instances  int    `json:"instances"`  // the Git writer's instances, deleted ones included
	Live       int    `json:"live"`       // of those, the ones not deleted at the check
	Files      int    `json:"files"`      // resource files at the branch's tip
}

// Percentiles of a latency distribution.
type Percentiles struct {
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
	N   int           `json:"n"`
}

// Bucket is one sample interval's latencies: writes to the SQL store,
// reads, and writes to the Git backend (the git-* operations).
type Bucket struct {
	At     time.Duration `json:"at"`
	Writes Percentiles   `json:"writes"`
	Reads  Percentiles   `json:"reads"`
	Git    Percentiles   `json:"git"`
}

// Unexpected counts the errors that are failures: everything except
// watch reconnections and the expected outcome of a list racing a delete.
func (rep *Report) Unexpected() int {
	n := 0
	for k, v := range rep.Errors {
		if k != "watch: stream ended, resumed" && k != "watch: relist after 410 Gone" && !strings.HasSuffix(k, expectedKind) {
			n += v
		}
	}
	return n
}

var writeOps = map[string]bool{"create": true, "update": true, "delete": true, "lock": true, "unlock": true, "update-locked": true}

func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return Percentiles{P50: at(0.50), P99: at(0.99), N: len(ds)}
}

// Growth limits: after warm-up the resident memory of a bounded workload
// levels off. The run fails when the median RSS of its last quarter
// exceeds that of its second quarter by half and by more than rssSlack,
// or when the goroutines, idle after the load, exceed those before it by
// more than goroutineSlack.
const (
	rssSlack       = 64 << 20
	goroutineSlack = 10
)

func (r *run) report(baseline, end sample, samples []sample) *Report {
	rep := &Report{Duration: r.cfg.Duration, Ops: r.ops, Errors: r.errs, ErrorExamples: r.examples, Latency: map[string]Percentiles{},
		Samples: samples, Baseline: baseline, End: end}
	byOp := map[string][]time.Duration{}
	type wr struct{ w, r, g []time.Duration }
	buckets := map[int]*wr{}
	for _, l := range r.lat {
		byOp[l.op] = append(byOp[l.op], l.took)
		i := int(l.at / r.cfg.Sample)
		if buckets[i] == nil {
			buckets[i] = &wr{}
		}
		switch {
		case strings.HasPrefix(l.op, "git-"):
			buckets[i].g = append(buckets[i].g, l.took)
		case writeOps[l.op]:
			buckets[i].w = append(buckets[i].w, l.took)
		default:
			buckets[i].r = append(buckets[i].r, l.took)
		}
	}
	for op, ds := range byOp {
		rep.Latency[op] = percentiles(ds)
	}
	for _, i := range slices.Sorted(maps.Keys(buckets)) {
		rep.Buckets = append(rep.Buckets, Bucket{At: time.Duration(i+1) * r.cfg.Sample,
			Writes: percentiles(buckets[i].w), Reads: percentiles(buckets[i].r), Git: percentiles(buckets[i].g)})
	}
	rep.Violations = append(rep.Violations, r.viol...)
	if end.Goroutines > baseline.Goroutines+goroutineSlack {
		rep.Violations = append(rep.Violations, fmt.Sprintf("goroutines grew from %.0f before the load to %.0f idle after it", baseline.Goroutines, end.Goroutines))
	}
	if n := len(samples); n >= 8 {
		q2, q4 := medianRSS(samples[n/4:n/2]), medianRSS(samples[3*n/4:])
		if q4 > 1.5*q2 && q4 > q2+rssSlack {
			rep.Violations = append(rep.Violations, fmt.Sprintf("RSS keeps growing: median %.0f MiB in the second quarter, %.0f MiB in the last", q2/(1<<20), q4/(1<<20)))
		}
	}
	if n := rep.Unexpected(); n > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d operations failed (see errors)", n))
	}
	return rep
}

func medianRSS(s []sample) float64 {
	v := make([]float64, len(s))
	for i, x := range s {
		v[i] = x.RSS
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// Print writes the report for people.
func (rep *Report) Print(w io.Writer) {
	total := 0
	for _, n := range rep.Ops {
		total += n
	}
	fmt.Fprintf(w, "soak: %s, %d operations (%.0f/s)\n", rep.Duration, total, float64(total)/rep.Duration.Seconds())
	fmt.Fprintf(w, "\n%-18s %8s %10s %10s\n", "operation", "count", "p50", "p99")
	for _, op := range slices.Sorted(maps.Keys(rep.Ops)) {
		p := rep.Latency[op]
		fmt.Fprintf(w, "%-18s %8d %10s %10s\n", op, rep.Ops[op], p.P50.Round(10*time.Microsecond), p.P99.Round(10*time.Microsecond))
	}
	fmt.Fprintf(w, "\nerrors by kind:")
	if len(rep.Errors) == 0 {
		fmt.Fprintf(w, " none")
	}
	fmt.Fprintln(w)
	for _, k := range slices.Sorted(maps.Keys(rep.Errors)) {
		fmt.Fprintf(w, "  %-40s %d\n", k, rep.Errors[k])
		if ex := rep.ErrorExamples[k]; ex != "" {
			fmt.Fprintf(w, "      first: %.200s\n", ex)
		}
	}
	fmt.Fprintf(w, "\n%8s %10s %11s %12s %12s %12s\n", "time", "RSS MiB", "goroutines", "write p99", "read p99", "git p99")
	step := max(1, len(rep.Samples)/12)
	for i := 0; i < len(rep.Samples); i += step {
		s := rep.Samples[i]
		var b Bucket
		for _, x := range rep.Buckets {
			if x.At <= s.At+time.Millisecond {
				b = x
			}
		}
		fmt.Fprintf(w, "%7.0fs %10.1f %11.0f %12s %12s %12s\n", s.At.Seconds(), s.RSS/(1<<20), s.Goroutines,
			b.Writes.P99.Round(10*time.Microsecond), b.Reads.P99.Round(10*time.Microsecond), b.Git.P99.Round(10*time.Microsecond))
	}
	if g := rep.Git; g != nil {
		fmt.Fprintf(w, "\ngit: %d instances written to backend %s (%d live) checked against the %d files at the tip of %s\n", g.Instances, g.Backend, g.Live, g.Files, g.Repository)
	}
	fmt.Fprintf(w, "\nbefore the load: RSS %.1f MiB, %.0f goroutines; idle after it: RSS %.1f MiB, %.0f goroutines\n",
		rep.Baseline.RSS/(1<<20), rep.Baseline.Goroutines, rep.End.RSS/(1<<20), rep.End.Goroutines)
	if len(rep.Violations) == 0 {
		fmt.Fprintln(w, "\ninvariants held: no lost or refused-but-written write (in the hub and in Git), gapless growing versions, every watch saw every change, bounded RSS and goroutines")
		return
	}
	fmt.Fprintf(w, "\n%d VIOLATIONS:\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  - %s\n", v)
	}
}
