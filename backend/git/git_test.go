package git_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/git/gittest"
)

// flagMeta is what the hub passes for an instance of a cup Flag.
func flagMeta(name string, labels map[string]string) cairn.ResourceMeta {
	return cairn.ResourceMeta{TypeRef: cairn.TypeRef{Path: "io.flipt.flag", Revision: "1.0.0"},
		Group: "flipt.io", Version: "v1", Kind: "Flag", Namespace: "production", Name: name, Labels: labels}
}

func flagPath(name string) string { return "production/flipt.io-v1-Flag-" + name + ".json" }

func create(t testing.TB, ctx context.Context, b *git.Backend, id, name string, value string) json.RawMessage {
	t.Helper()
	out, err := b.OnCreate(cairn.WithResourceMeta(ctx, flagMeta(name, nil)), cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(value)})
	if err != nil {
		t.Fatalf("OnCreate %s: %v", name, err)
	}
	return out
}

func TestResourceFileAndCommit(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.Serve(t))
	ctx := cairn.WithActor(t.Context(), "jane")
	id := uuid.NewString()
	meta := flagMeta("new-project-cup", map[string]string{"project-type": "moonshots"})
	out, err := b.OnCreate(cairn.WithResourceMeta(ctx, meta), cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"enabled":true}`)})
	if err != nil {
		t.Fatalf("OnCreate: %v", err)
	}
	// cup's resource payload, in cup's default place.
	var file map[string]any
	if err := json.Unmarshal([]byte(r.Show(t, "", flagPath("new-project-cup"))), &file); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"apiVersion": "flipt.io/v1", "kind": "Flag",
		"metadata": map[string]any{"namespace": "production", "name": "new-project-cup", "labels": map[string]any{"project-type": "moonshots"}},
		"spec":     map[string]any{"enabled": true}}
	if fmt.Sprint(file) != fmt.Sprint(want) {
		t.Errorf("file = %v, want %v", file, want)
	}
	msg := gittest.Git(t, r.Path, "log", "-1", "--format=%an <%ae>%n%B", "main")
	for _, s := range []string{"cairn test <test@cairn.dev>", "cairn: create Flag production/new-project-cup (resource version 1) by jane",
		"Cairn-Instance: " + id, "Cairn-Resource-Version: 1", "Cairn-Operation: create", "Cairn-Resource: flipt.io/v1 Flag production/new-project-cup"} {
		if !strings.Contains(msg, s) {
			t.Errorf("commit message lacks %q:\n%s", s, msg)
		}
	}
	// The returned context names the file and the commit, as describe shows.
	var c map[string]any
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatal(err)
	}
	if c["commit"] != gittest.Git(t, r.Path, "rev-parse", "main") || c["path"] != flagPath("new-project-cup") || c["resourceVersion"] != 1.0 {
		t.Errorf("context = %s, want the commit on main, the path and resource version 1", out)
	}
}

func TestOldVersionReadsTheFileAtItsCommit(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := t.Context()
	id := uuid.NewString()
	c1 := create(t, ctx, b, id, "f", `{"enabled":false}`)
	c2, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled":true}`), Context: c1})
	if err != nil {
		t.Fatalf("OnUpdate: %v", err)
	}
	// A fresh process (another cache) reads both versions from history.
	other := gittest.NewBackend(t, r.FileURL())
	for rv, want := range map[int]string{1: `{"enabled":false}`, 2: `{"enabled":true}`} {
		c := map[int]json.RawMessage{1: c1, 2: c2}[rv]
		for name, bk := range map[string]*git.Backend{"writer": b, "other cache": other} {
			got, err := bk.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: rv, Context: c})
			if err != nil || string(got) != want {
				t.Errorf("%s: GetValue(rv %d) = %s, %v; want %s", name, rv, got, err, want)
			}
		}
	}
	if got := gittest.SpecOf(t, r.Show(t, "", flagPath("f"))); string(got) != "{\n    \"enabled\": true\n  }" && !strings.Contains(string(got), "true") {
		t.Errorf("file on main has spec %s, want enabled true", got)
	}
}

func TestUnchangedWriteMakesNoCommit(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := t.Context()
	id := uuid.NewString()
	c1 := create(t, ctx, b, id, "same", `{"enabled":true}`)
	before := r.Commits(t)
	c2, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2, NewValue: json.RawMessage(`{"enabled": true}`), Context: c1})
	if err != nil {
		t.Fatalf("OnUpdate: %v", err)
	}
	if after := r.Commits(t); after != before {
		t.Errorf("an unchanged write made %d commit(s)", after-before)
	}
	got, err := b.GetValue(ctx, cairn.GetValueRequest{InstanceID: id, ResourceVersion: 2, Context: c2})
	if err != nil || string(got) != `{"enabled":true}` {
		t.Errorf("GetValue(rv 2) = %s, %v", got, err)
	}
	// A changed value commits.
	if _, err := b.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 3, NewValue: json.RawMessage(`{"enabled":false}`), Context: c2}); err != nil {
		t.Fatal(err)
	}
	if after := r.Commits(t); after != before+1 {
		t.Errorf("a changed write made %d commits, want 1", after-before)
	}
}

// TestConcurrentWritersLoseNothing: goroutines on one backend and on two
// backends with caches of their own (as two cairn processes) write to one
// remote at once; every change is on main afterwards, one commit each.
func TestConcurrentWritersLoseNothing(t *testing.T) {
	r := gittest.NewRemote(t)
	url := r.Serve(t)
	backends := []*git.Backend{gittest.NewBackend(t, url), gittest.NewBackend(t, url)}
	ctx := t.Context()
	const perBackend, writers = 6, 3
	var wg sync.WaitGroup
	errs := make(chan error, len(backends)*writers*perBackend)
	for bi, b := range backends {
		for w := range writers {
			wg.Go(func() {
				for i := range perBackend / writers * 2 {
					name := fmt.Sprintf("b%d-w%d-%d", bi, w, i)
					mctx := cairn.WithResourceMeta(ctx, flagMeta(name, nil))
					if _, err := b.OnCreate(mctx, cairn.OnCreateRequest{InstanceID: name, Value: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
						errs <- fmt.Errorf("%s: %w", name, err)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := len(backends) * writers * (perBackend / writers * 2)
	if got := r.Commits(t); got != total {
		t.Errorf("%d commits on main, want %d", got, total)
	}
	files := strings.Fields(gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"))
	if len(files) != total {
		t.Errorf("%d files on main, want %d: %v", len(files), total, files)
	}
	for bi := range backends {
		for w := range writers {
			for i := range perBackend / writers * 2 {
				name := fmt.Sprintf("b%d-w%d-%d", bi, w, i)
				if got := gittest.SpecOf(t, r.Show(t, "", flagPath(name))); !strings.Contains(string(got), fmt.Sprintf(`"n": %d`, i)) {
					t.Errorf("%s: spec %s", name, got)
				}
			}
		}
	}
}

// TestSameVersionFromTwoProcesses: two caches write resource version 2 of
// one instance; the remote orders them and exactly one wins, the other
// gets AlreadyExists after fetching, as the hub needs to retry.
func TestSameVersionFromTwoProcesses(t *testing.T) {
	r := gittest.NewRemote(t)
	a, b := gittest.NewBackend(t, r.FileURL()), gittest.NewBackend(t, r.FileURL())
	ctx := t.Context()
	id := uuid.NewString()
	c1 := create(t, ctx, a, id, "contended", `{"v":1}`)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, bk := range []*git.Backend{a, b} {
		wg.Go(func() {
			_, errs[i] = bk.OnUpdate(ctx, cairn.OnUpdateRequest{InstanceID: id, NewResourceVersion: 2,
				NewValue: json.RawMessage(fmt.Sprintf(`{"v":2,"by":%d}`, i)), Context: c1})
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !cairn.HasCode(err, cairn.CodeAlreadyExists):
			t.Errorf("writer %d: %v, want AlreadyExists or success", i, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d writers stored resource version 2, want exactly 1: %v", ok, errs)
	}
	if n := r.Commits(t); n != 2 {
		t.Errorf("%d commits, want 2 (create, one update)", n)
	}
}

func TestDeleteRemovesTheFile(t *testing.T) {
	r := gittest.NewRemote(t)
	b := gittest.NewBackend(t, r.FileURL())
	ctx := cairn.WithActor(t.Context(), "bob")
	id := uuid.NewString()
	c1 := create(t, ctx, b, id, "gone", `{}`)
	create(t, ctx, b, uuid.NewString(), "stays", `{}`)
	if err := b.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: id, Context: c1}); err != nil {
		t.Fatalf("OnDelete: %v", err)
	}
	files := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main")
	if files != flagPath("stays") {
		t.Errorf("files on main = %q, want only %s", files, flagPath("stays"))
	}
	if msg := gittest.Git(t, r.Path, "log", "-1", "--format=%s", "main"); msg != "cairn: delete Flag production/gone by bob" {
		t.Errorf("last commit = %q", msg)
	}
}

func TestYAMLByExtension(t *testing.T) {
	r := gittest.NewRemote(t)
	cfg, err := git.ParseConfig(json.RawMessage(`{"url":` + quote(r.FileURL()) + `,"paths":{"resource":"{{ .Kind }}s/{{ .Namespace }}/{{ .Name }}.yaml"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := git.New(git.Options{Config: cfg, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	c := create(t, t.Context(), b, id, "y", `{"enabled":true,"description":"in YAML"}`)
	if got := r.Show(t, "", "Flags/production/y.yaml"); !strings.Contains(got, "description: in YAML") || !strings.Contains(got, "kind: Flag") {
		t.Errorf("YAML file:\n%s", got)
	}
	v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1, Context: c})
	if err != nil || string(v) != `{"description":"in YAML","enabled":true}` {
		t.Errorf("GetValue = %s, %v", v, err)
	}
}

// A path template using a label: the version is read back from the file
// its context names, in this process and in a fresh one (whose index,
// built from the commits' trailers, knows no labels).
func TestLabelPathReadsBack(t *testing.T) {
	r := gittest.NewRemote(t)
	cfg, err := git.ParseConfig(json.RawMessage(`{"url":` + quote(r.FileURL()) + `,"paths":{"resource":"{{ .Namespace }}/{{ .Labels.env }}/{{ .Name }}.json"}}`))
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	var c json.RawMessage
	for i, cache := range []string{t.TempDir(), t.TempDir()} {
		b, err := git.New(git.Options{Config: cfg, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ctx := cairn.WithResourceMeta(t.Context(), flagMeta("l", map[string]string{"env": "prod"}))
			if c, err = b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"enabled":true}`)}); err != nil {
				t.Fatal(err)
			}
			if got := r.Show(t, "", "production/prod/l.json"); !strings.Contains(got, `"env": "prod"`) {
				t.Fatalf("file:\n%s", got)
			}
		}
		v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1, Context: c})
		if err != nil || string(v) != `{"enabled":true}` {
			t.Errorf("process %d: GetValue = %s, %v", i, v, err)
		}
	}
}

func TestTypeWithoutRESTNamesIsRefused(t *testing.T) {
	b := gittest.NewBackend(t, gittest.NewRemote(t).FileURL())
	ctx := cairn.WithResourceMeta(t.Context(), cairn.ResourceMeta{TypeRef: cairn.TypeRef{Path: "cap.type.x", Revision: "0.1.0"}, Namespace: "default", Name: "x"})
	_, err := b.OnCreate(ctx, cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`{}`)})
	if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "declares no REST names") {
		t.Errorf("OnCreate = %v, want Invalid naming the missing REST names", err)
	}
}

func TestConfig(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{`{"url":"ftp://x"}`, "want file://, http(s):// or ssh://"},
		{`{"url":"file:///r","mode":"propose"}`, "needs scm"},
		{`{"url":"file:///r","mode":"push"}`, `mode "push"`},
		{`{"url":"file:///r","branch":"a..b"}`, "not a valid branch name"},
		// A token in the URL would be in the backend's value, which every
		// viewer reads, and in errors: it goes in credentials instead.
		{`{"url":"https://x:ghp_s3cr3t@github.com/o/r.git"}`, "the url holds a password: give it as credentials.tokenEnv or credentials.tokenFile"},
		{`{"url":"https://x:ghp_s3cr3t%zz@github.com/o/r.git"}`, "want file://, http(s):// or ssh://"},
		{`{"url":"ftp://x:ghp_s3cr3t@github.com/o/r.git"}`, "want file://, http(s):// or ssh://"},
		// What the template and WASM controllers need, checked before a
		// backend instance is stored rather than at its first write.
		{`{"url":"file:///r","paths":{"resource":"{{ .Name }.json"}}`, "git backend: paths.resource"},
		{`{"url":"file:///r","paths":{"list":"{{ lower .Namespace }}/*.json"}}`, `paths.list: template: list:1: function "lower" not defined`},
		{`{"url":"file:///r","controller":{}}`, "controller: give wasm"},
		{`{"url":"file:///r","controller":{"wasm":{"sha256":"00"}}}`, "controller.wasm.module"},
		{`{"url":"file:///r","controller":{"wasm":{"module":"c.wasm","sha256":"9f2c"}}}`, `controller.wasm.sha256 "9f2c"`},
	} {
		_, err := git.ParseConfig(json.RawMessage(tt.value))
		if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseConfig(%s) = %v, want Invalid with %q", tt.value, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("ParseConfig(%s): the error quotes the password: %v", tt.value, err)
		}
	}
	// A token referenced from the environment: a missing one is named,
	// never a value.
	cfg, _ := git.ParseConfig(json.RawMessage(`{"url":"https://example.com/r.git","credentials":{"tokenEnv":"CAIRN_TEST_TOKEN"}}`))
	_, err := git.New(git.Options{Config: cfg, CacheDir: t.TempDir(), Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "CAIRN_TEST_TOKEN is empty or unset") {
		t.Errorf("New without the token = %v", err)
	}
}

// TestRefusedPushSaysWhy: a push the remote's pre-receive hook refuses
// fails with what the hook said (a protected branch, a policy), as git
// prints it after "remote:", not only "pre-receive hook declined"; nothing
// is committed. Over file:// and smart HTTP.
func TestRefusedPushSaysWhy(t *testing.T) {
	r := gittest.NewRemote(t)
	for name, url := range map[string]string{"file": r.FileURL(), "http": r.Serve(t)} {
		t.Run(name, func(t *testing.T) {
			b := gittest.NewBackend(t, url)
			ctx := t.Context()
			create(t, ctx, b, uuid.NewString(), "before-"+name, `{"enabled":true}`)
			hook := filepath.Join(r.Path, "hooks", "pre-receive")
			if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'Counting objects: 100% (3/3)' >&2\necho 'GL-HOOK-ERR: branch main is protected' >&2\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(hook)
			before := r.Commits(t)
			_, err := b.OnCreate(cairn.WithResourceMeta(ctx, flagMeta("refused-"+name, nil)), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`{"enabled":true}`)})
			if err == nil {
				t.Fatal("OnCreate succeeded through a refusing hook")
			}
			for _, want := range []string{"pre-receive hook declined", "remote: GL-HOOK-ERR: branch main is protected"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "Counting objects") {
				t.Errorf("error %q carries the remote's progress", err)
			}
			if after := r.Commits(t); after != before {
				t.Errorf("a refused push left %d commit(s)", after-before)
			}
		})
	}
}

// TestWriteTouchesOnlyItsFile: a write's commit (built from the base's
// tree, not a scan of the work tree) changes only its file, also after
// another process moved the branch (this cache's work tree then follows
// the difference), and the remote holds every object of every commit
// (pushes send only what is new).
func TestWriteTouchesOnlyItsFile(t *testing.T) {
	r := gittest.NewRemote(t)
	a, b := gittest.NewBackend(t, r.FileURL()), gittest.NewBackend(t, r.FileURL())
	ctx := t.Context()
	ca := create(t, ctx, a, "a", "a", `{"v":1}`)
	cb := create(t, ctx, b, "b", "b", `{"v":1}`) // a's tip is stale now
	if _, err := a.OnUpdate(cairn.WithResourceMeta(ctx, flagMeta("a", nil)), cairn.OnUpdateRequest{InstanceID: "a", NewResourceVersion: 2, NewValue: json.RawMessage(`{"v":2}`), Context: ca}); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, r.Path, "diff-tree", "--no-commit-id", "--name-status", "-r", "main"); got != "M\t"+flagPath("a") {
		t.Errorf("the update's commit changed:\n%s", got)
	}
	if err := a.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: "b", Context: cb}); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, r.Path, "diff-tree", "--no-commit-id", "--name-status", "-r", "main"); got != "D\t"+flagPath("b") {
		t.Errorf("the delete's commit changed:\n%s", got)
	}
	if err := a.OnDelete(ctx, cairn.OnDeleteRequest{InstanceID: "a"}); err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, r.Path, "ls-tree", "-r", "main"); got != "" {
		t.Errorf("every file deleted, the tree still holds:\n%s", got)
	}
	// b's work tree holds b's own commit: it follows a's three.
	create(t, ctx, b, "c", "c", `{"v":1}`)
	if got := gittest.Git(t, r.Path, "ls-tree", "-r", "--name-only", "main"); got != flagPath("c") {
		t.Errorf("the tree holds:\n%s", got)
	}
	gittest.Git(t, r.Path, "fsck", "--strict", "--no-dangling")
	if got := r.Commits(t); got != 6 {
		t.Errorf("%d commits, want 6", got)
	}
}

// TestRemoteTextBounded: what a Git server says when it refuses a push is
// its own choice (megabytes, controls that rewrite a terminal or a log
// line): the error carries it bounded and printable. Over file:// and
// smart HTTP.
func TestRemoteTextBounded(t *testing.T) {
	r := gittest.NewRemote(t)
	for name, url := range map[string]string{"file": r.FileURL(), "http": r.Serve(t)} {
		t.Run(name, func(t *testing.T) {
			b := gittest.NewBackend(t, url)
			ctx := t.Context()
			create(t, ctx, b, uuid.NewString(), "before-"+name, `{"enabled":true}`)
			hook := filepath.Join(r.Path, "hooks", "pre-receive")
			script := "#!/bin/sh\nprintf 'GL-HOOK-ERR: tenant-b \\033[2J\\342\\200\\256 protected ' >&2\nhead -c 100000 /dev/zero | tr '\\0' x >&2\necho >&2\nexit 1\n"
			if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(hook)
			_, err := b.OnCreate(cairn.WithResourceMeta(ctx, flagMeta("refused-"+name, nil)), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`{"enabled":true}`)})
			if err == nil {
				t.Fatal("OnCreate succeeded through a refusing hook")
			}
			msg := err.Error()
			if len(msg) > 2048 || strings.ContainsAny(msg, "\x1b\r\u202e") || !strings.Contains(msg, "remote: GL-HOOK-ERR: tenant-b") || !strings.Contains(msg, "more bytes") {
				t.Errorf("the error is %d bytes, has control characters, lost the remote's words or does not say they were cut: %q", len(msg), msg[:min(len(msg), 400)])
			}
		})
	}
}
