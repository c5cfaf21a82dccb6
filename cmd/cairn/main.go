// Command cairn is the cairn command line. It only wires the process (its
// arguments, streams, environment and signals) into internal/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"os/user"
	"syscall"

	"github.com/cairn-dev/cairn/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
		Username: func() string {
			u, err := user.Current()
			if err != nil {
				return ""
			}
			return u.Username
		},
	})
	stop()
	os.Exit(code)
}
