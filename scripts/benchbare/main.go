// Command benchbare is scripts/bench's baseline: a bare net/http server
// answering every GET with the same bytes, the ceiling of Go's HTTP stack
// on the machine. Usage: benchbare ADDR FILE.
package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: benchbare ADDR FILE")
		os.Exit(2)
	}
	body, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	if err := http.ListenAndServe(os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
