package soak

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sample is the server's state at one moment.
type sample struct {
	At         time.Duration `json:"at"`
	RSS        float64       `json:"rssBytes"`
	Goroutines float64       `json:"goroutines"`
}

// sampler scrapes the server's Prometheus metrics: the Go and process
// collectors cairn serve registers give goroutines and resident memory
// without access to the process itself, so a soak can watch a server on
// another machine too.
type sampler struct {
	r       *run
	samples []sample
}

func newSampler(r *run) *sampler { return &sampler{r: r} }

func (s *sampler) loop(ctx context.Context) {
	t := time.NewTicker(s.r.cfg.Sample)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		x, err := s.scrape(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.r.violation("metrics: %v", err)
			}
			continue
		}
		x.At = time.Since(s.r.start)
		s.samples = append(s.samples, x)
		if s.r.cfg.Progress != nil {
			s.r.mu.Lock()
			ops := 0
			for _, n := range s.r.ops {
				ops += n
			}
			s.r.mu.Unlock()
			fmt.Fprintf(s.r.cfg.Progress, "%6.0fs  %7d ops  RSS %6.1f MiB  %4.0f goroutines\n", x.At.Seconds(), ops, x.RSS/(1<<20), x.Goroutines)
		}
	}
}

func (s *sampler) scrape(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.r.cfg.Server, "/")+"/metrics", nil)
	if err != nil {
		return sample{}, err
	}
	resp, err := s.r.hc.Do(req)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var x sample
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "go_goroutines":
			x.Goroutines, err = strconv.ParseFloat(val, 64)
		case "process_resident_memory_bytes":
			x.RSS, err = strconv.ParseFloat(val, 64)
		default:
			continue
		}
		if err != nil {
			return sample{}, fmt.Errorf("metric %s: %w", name, err)
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return sample{}, err
	}
	if found != 2 {
		return sample{}, fmt.Errorf("GET /metrics: go_goroutines or process_resident_memory_bytes missing")
	}
	return x, nil
}
