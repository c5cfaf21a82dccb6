// Command soak runs the soak workload (package soak) against a cairn serve
// process it starts, prints the report, writes report.json and soak.png to
// --out, and exits 1 when an invariant broke. scripts/soak builds cairn and
// runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/internal/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx)
	stop()
	os.Exit(code)
}

func run(ctx context.Context) int {
	var (
		bin      = flag.String("cairn", "", "the cairn binary to serve (required)")
		out      = flag.String("out", "soak-out", "directory for report.json, soak.png and server.log")
		database = flag.String("database", "", "PostgreSQL URL for the server's store; empty: SQLite in a fresh data directory")
		cfg      soak.Config
	)
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Minute, "how long the workload runs")
	flag.IntVar(&cfg.Writers, "writers", 4, "writing goroutines")
	flag.IntVar(&cfg.Readers, "readers", 2, "reading goroutines")
	flag.IntVar(&cfg.Watchers, "watchers", 2, "watch streams")
	flag.IntVar(&cfg.Pool, "pool", 25, "instances per writer")
	flag.DurationVar(&cfg.Sample, "sample", time.Second, "sampling interval")
	flag.DurationVar(&cfg.GitInterval, "git-interval", 200*time.Millisecond, "pause between the Git writer's writes")
	flag.IntVar(&cfg.GitPool, "git-pool", 10, "instances of the Git writer")
	withGit := flag.Bool("git", true, "run the Git writer (a Git backend on a bare repository in the data directory)")
	flag.Parse()
	if !*withGit {
		cfg.GitInterval = -1
	}
	if *bin == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: soak --cairn BIN [--duration 2m] [--out DIR] [--database URL] [--git=false]")
		return 2
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	dataDir, err := os.MkdirTemp("", "cairn-soak-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	defer os.RemoveAll(dataDir)
	logf, err := os.Create(filepath.Join(*out, "server.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	defer logf.Close()

	srv, err := soak.StartServer(ctx, *bin, dataDir, *database, logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	fmt.Printf("soak: %s against %s (data in %s, server log %s)\n", cfg.Duration, srv.URL, dataDir, logf.Name())
	cfg.Server, cfg.Progress = srv.URL, os.Stdout
	cfg.GitDir = filepath.Join(dataDir, "git") // removed with the data, after the server stopped
	rep, err := soak.Run(ctx, cfg)
	stopErr := srv.Stop(15 * time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	if stopErr != nil {
		rep.Violations = append(rep.Violations, stopErr.Error())
	}
	fmt.Println()
	rep.Print(os.Stdout)
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "report.json"), b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
	}
	png := filepath.Join(*out, "soak.png")
	if err := rep.Plot(png); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	fmt.Printf("\nplot: %s\n", png)
	if len(rep.Violations) > 0 {
		return 1
	}
	return 0
}
