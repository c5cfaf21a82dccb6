// Package doctest runs the shell commands of the documentation, so the
// examples cannot rot: every ```sh block of README.md and docs/*.md runs
// (see docs/development.md, "Documentation" for the convention).
package doctest_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testbin"
)

// block is one runnable code block of a page.
type block struct {
	line int // of the opening fence, 1-based
	text string
}

// runnable returns the ```sh blocks of a Markdown file; "```sh no-test"
// blocks are left out (the page says why in its prose).
func runnable(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []block
	var cur *block
	inFence := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			if inFence {
				if cur != nil {
					out = append(out, *cur)
					cur = nil
				}
				inFence = false
				continue
			}
			inFence = true
			if info := strings.Fields(strings.TrimPrefix(l, "```")); len(info) == 1 && info[0] == "sh" {
				cur = &block{line: n}
			}
			continue
		}
		if cur != nil {
			cur.text += l + "\n"
		}
	}
	return out, sc.Err()
}

var addrRE = regexp.MustCompile(`127\.0\.0\.1:(\d{4,5})`)

// benchRE and benchArgRE find a documented benchmark run (go test with
// -bench) and the flags that set how long it runs.
var (
	benchRE    = regexp.MustCompile(`^(\s*go test\b.*?)\s-bench\b`)
	benchArgRE = regexp.MustCompile(`\s-(benchtime|count)[ =]\S+`)
)

// briefly returns a documented benchmark command with one short run in
// place of the page's -benchtime and -count, put before -bench so that a
// comment or a continuation at the end of the line stays last. The test
// shows that the command works; the page's figures come from the full run
// on a quiet machine (security.md's 5 x 30,000 cost CI a minute of CPU).
// Other lines are returned as they are.
func briefly(l string) string {
	if !benchRE.MatchString(l) {
		return l
	}
	l = benchArgRE.ReplaceAllString(l, "")
	return benchRE.ReplaceAllString(l, "$1 -benchtime 100x -count 1 -bench")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

func TestDocs(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)

	// The pages' cairn, on their PATH: testbin's directory holds nothing
	// else, and shares the file with the other packages' tests.
	bin := filepath.Dir(testbin.Cairn(t))
	goVars := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOTOOLCHAIN"} {
		goVars[k] = goEnv(t, k)
	}

	for _, page := range pages {
		blocks, err := runnable(page)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			continue
		}
		rel, _ := filepath.Rel(root, page)
		t.Run(rel, func(t *testing.T) {
			t.Parallel()
			runPage(t, root, bin, goVars, rel, blocks)
		})
	}
}

// runPage runs a page's blocks in order in one bash, in a directory that
// looks like a checkout (the repository's top-level entries linked in), with
// its own store, configuration and home, and each 127.0.0.1:PORT of the page
// moved to a free port. What the page starts in the background is stopped
// at the end.
func runPage(t *testing.T, root, bin string, goVars map[string]string, rel string, blocks []block) {
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	ports := map[string]string{}
	var script strings.Builder
	var lines []string // the page position of each script line
	add := func(l, where string) {
		script.WriteString(l + "\n")
		lines = append(lines, where)
	}
	add("set -euo pipefail", "")
	add(`trap 'echo "doctest: failed at script line $LINENO" >&2' ERR`, "")
	for _, b := range blocks {
		text := addrRE.ReplaceAllStringFunc(b.text, func(m string) string {
			p := addrRE.FindStringSubmatch(m)[1]
			if ports[p] == "" {
				// A port just closed may be handed out again: each
				// of the page's addresses gets a port of its own.
				port := freePort(t)
				for slices.Contains(slices.Collect(maps.Values(ports)), port) {
					port = freePort(t)
				}
				ports[p] = port
			}
			return "127.0.0.1:" + ports[p]
		})
		for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			where := fmt.Sprintf("%s:%d", rel, b.line+1+i)
			// bash's errexit ignores a pipeline negated with !, so a
			// page's "! cmd" (cmd must fail) would check nothing: its
			// success fails the page. (A trailing comment stays one.)
			if cmd, ok := strings.CutPrefix(l, "! "); ok && !strings.HasSuffix(l, "\\") {
				add("if "+briefly(cmd), where)
				add(`then echo "doctest: this command should have failed and did not" >&2; false; fi`, where)
				continue
			}
			add(briefly(l), where)
		}
	}
	scriptPath := filepath.Join(t.TempDir(), "page.sh")
	if err := os.WriteFile(scriptPath, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = dir
	home := filepath.Join(dir, ".home")
	cmd.Env = []string{
		"PATH=" + bin + string(os.PathListSeparator) + filepath.Join(dir, ".gobin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home, "USER=doc", "GOBIN=" + filepath.Join(dir, ".gobin"),
		"CAIRN_DATA_DIR=" + filepath.Join(dir, ".data"), "CAIRN_CONFIG=" + filepath.Join(dir, ".cairn-config.yaml"),
		"TMPDIR=" + os.TempDir(),
	}
	for k, v := range goVars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if v := os.Getenv("CAIRN_TEST_POSTGRES"); v != "" {
		cmd.Env = append(cmd.Env, "CAIRN_TEST_POSTGRES="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Output goes to a file, not a pipe: what the page leaves running in the
	// background would hold a pipe open and keep Wait waiting.
	logPath := filepath.Join(t.TempDir(), "page.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	err = cmd.Start()
	if err == nil {
		// Stop what the page left running in the background (servers,
		// backends), whatever happens to the test.
		pgid := cmd.Process.Pid
		t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		err = cmd.Wait()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
	}
	logFile.Close()
	out, _ := os.ReadFile(logPath)
	if err == nil {
		return
	}
	where := rel
	if m := regexp.MustCompile(`doctest: failed at script line (\d+)`).FindSubmatch(out); m != nil {
		if n, _ := strconv.Atoi(string(m[1])); n >= 1 && n <= len(lines) && lines[n-1] != "" {
			where = lines[n-1]
		}
	}
	t.Fatalf("%s: a documented command failed (%v):\n%s", where, err, tail(string(out), 60))
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func TestBriefly(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{
			"go test ./api/access -run '^$' -bench 'BenchmarkGET|BenchmarkGuardAlone' -benchtime 30000x -count 5",
			"go test ./api/access -run '^$' -benchtime 100x -count 1 -bench 'BenchmarkGET|BenchmarkGuardAlone'",
		},
		{
			"go test -bench . -count=3 ./store/sqlite   # a comment",
			"go test -benchtime 100x -count 1 -bench . ./store/sqlite   # a comment",
		},
		{
			"go test -run '^$' -bench=Get -benchtime=2s ./backend/wasm \\",
			"go test -run '^$' -benchtime 100x -count 1 -bench=Get ./backend/wasm \\",
		},
		{"go test ./...", "go test ./..."},
		{"cairn get flags -o yaml   # go test -bench is not on this line's command", "cairn get flags -o yaml   # go test -bench is not on this line's command"},
		{"go test -count 2 ./hub", "go test -count 2 ./hub"},
	} {
		if got := briefly(tc.in); got != tc.want {
			t.Errorf("briefly(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
