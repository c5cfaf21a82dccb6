// Command probe is a test module for backend/wasm: a WASI command that
// misbehaves on request, chosen by its kind argument, to check the sandbox
// and the limits. It does not use sdk/controller on purpose, so that it
// can crash the way an arbitrary module would (a Go panic exits 2).
//
//	GOOS=wasip1 GOARCH=wasm go build -o probe.wasm ./backend/wasm/testdata/probe
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
	"unsafe"
)

func main() {
	if len(os.Args) < 3 {
		fail(1, "usage: probe <op> <behaviour> ...")
	}
	op, behaviour := os.Args[1], os.Args[2]
	switch behaviour {
	case "env":
		// What the host passed: arguments and the kind's group and version.
		env := map[string]any{"args": os.Args, "group": os.Getenv("CUP_GROUP"), "version": os.Getenv("CUP_VERSION"), "environ": os.Environ()}
		if op == "put" {
			// put's stdout is not read: the tree, writable, keeps it.
			out, _ := json.Marshal(env)
			if err := os.WriteFile("/env.json", out, 0o644); err != nil {
				fail(1, "write: "+err.Error())
			}
		}
		if op == "list" {
			answer([]any{env})
			return
		}
		answer(env)
	case "escape":
		// Everything a module might try to reach outside its mount.
		seen := map[string]string{}
		for _, p := range []string{"/inside.txt", "../secret.txt", "/../secret.txt", "/../outside/secret.txt", "/etc/passwd", "/etc/hostname", "/link", "/dirlink/secret.txt", "/proc/self/environ"} {
			seen[p] = read(p)
		}
		for _, d := range []string{"/", "/..", "../.."} {
			seen["ls "+d] = list(d)
		}
		answer(seen)
	case "write":
		// Whether the mount takes writes: a file, a directory, a removal.
		answer(map[string]string{
			"write":  result(os.WriteFile("/probe.txt", []byte(op), 0o644)),
			"mkdir":  result(os.Mkdir("/probe-dir", 0o755)),
			"remove": result(os.Remove("/inside.txt")),
			"link":   result(os.Symlink("../outside/secret.txt", "/made-link")),
		})
	case "net":
		// WASI preview 1 has no way to open a socket; Dial must fail.
		conn, err := net.Dial("tcp", os.Args[3])
		if err == nil {
			conn.Close()
		}
		answer(map[string]string{"dial": result(err)})
	case "loop":
		for {
		}
	case "sleep":
		time.Sleep(time.Hour)
		answer(map[string]string{})
	case "hog":
		// Hold on to ever more memory until the runtime gives up.
		var keep [][]byte
		for i := 0; ; i++ {
			b := make([]byte, 1<<20)
			b[len(b)-1] = byte(i)
			keep = append(keep, b)
		}
	case "flood":
		chunk := []byte(strings.Repeat("x", 1<<16))
		for {
			if _, err := os.Stdout.Write(chunk); err != nil {
				// The host refuses; a stubborn module keeps trying.
				continue
			}
		}
	case "panic":
		panic("probe panics on purpose")
	case "exit2-silent":
		os.Exit(2)
	case "exit7":
		fmt.Fprintln(os.Stderr, "probe exits 7")
		os.Exit(7)
	case "notfound":
		fail(2, "no such probe resource")
	case "notfound-stderr":
		// As cup's Go SDK reports not found: the message on stderr, no
		// JSON on stdout.
		fmt.Fprint(os.Stderr, "not found: probe resource")
		os.Exit(2)
	case "error-stderr":
		fmt.Fprint(os.Stderr, "probe failed, said on stderr")
		os.Exit(1)
	case "invalid":
		out, _ := json.Marshal(map[string]string{"message": "probe refuses", "code": "Invalid"})
		os.Stdout.Write(out)
		os.Exit(1)
	case "error":
		fail(1, "probe failed on purpose")
	case "garbage":
		fmt.Print("this is not JSON")
	case "remember":
		// delete remember <secret> _: keep the secret in memory and in a
		// file of the (writable) tree, and count the copies in memory, to
		// show that the count finds them.
		secret := []byte(os.Args[3])
		kept = strings.Repeat(string(secret), 1000)
		keptBuf = []byte(kept)
		if err := os.WriteFile("/remembered.txt", secret, 0o644); err != nil {
			fail(1, "write: "+err.Error())
		}
		fail(1, fmt.Sprintf("remembered: %d copies in memory", copies(secret)))
	case "recall":
		// get recall <reversed secret> _: what of an earlier call's secret
		// this call can see: the package variables, the tree, and copies
		// anywhere in memory. The secret arrives reversed, so that the one
		// plain copy is the one made here, which the count skips.
		arg := os.Args[3]
		secret := make([]byte, len(arg))
		for i := range arg {
			secret[i] = arg[len(arg)-1-i]
		}
		answer(map[string]any{"kept": len(kept) + len(keptBuf), "file": read("/remembered.txt"), "ls": list("/"), "copies": copies(secret)})
	case "stream":
		// list may answer a stream of objects instead of an array.
		fmt.Println(`{"metadata":{"name":"a"}}`)
		fmt.Println(`{"metadata":{"name":"b"}}`)
	default:
		fail(1, "unknown behaviour "+behaviour)
	}
}

// kept and keptBuf hold what "remember" was given.
var (
	kept    string
	keptBuf []byte
)

// copies counts the places in linear memory, other than secret itself,
// that hold secret's bytes. It scans from the first page up to the end of
// a fresh 8 MiB allocation, which the runtime places at the top of the
// heap, so everything below is memory the module has.
func copies(secret []byte) int {
	top := make([]byte, 8<<20)
	end := unsafe.Pointer(&top[len(top)-1])
	start := unsafe.Add(end, -int(uintptr(end))+4096)
	mem := unsafe.Slice((*byte)(start), uintptr(end)-4096)
	own := int(uintptr(unsafe.Pointer(&secret[0])) - 4096)
	n := 0
	for at := 0; ; at++ {
		i := bytes.Index(mem[at:], secret)
		if i < 0 {
			return n
		}
		if at += i; at != own {
			n++
		}
	}
}

func read(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "error: " + err.Error()
	}
	return "read: " + string(b)
}

func list(d string) string {
	entries, err := os.ReadDir(d)
	if err != nil {
		return "error: " + err.Error()
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return "entries: " + strings.Join(names, ",")
}

func result(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func answer(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		os.Exit(1)
	}
}

func fail(code int, msg string) {
	out, _ := json.Marshal(map[string]string{"message": msg})
	os.Stdout.Write(out)
	os.Exit(code)
}
