package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cairn-dev/cairn"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/hub"
)

// gitTypeRef is the Type of the soak's instances kept in Git: the Git
// backend names files after REST names, so the Type is served over REST.
var gitTypeRef = cairn.TypeRef{Path: "cap.type.soak.gitcounter", Revision: "0.1.0"}

const gitBranch = "main"

// gitTarget is the bare repository the soak's Git backend writes to.
type gitTarget struct {
	bare      string // path of the bare repository
	backendID string
}

// setupGit creates a bare repository (real git) under dir, registers a
// Git backend instance pointing at it through the hub's API, as a client
// would, and the Type of the instances the Git writer sends there.
func (r *run) setupGit(ctx context.Context, dir string) (*gitTarget, error) {
	bare := filepath.Join(dir, "soak.git")
	if out, err := exec.CommandContext(ctx, "git", "init", "--quiet", "--bare", "--initial-branch="+gitBranch, bare).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("soak: git init %s: %w: %s", bare, err, strings.TrimSpace(string(out)))
	}
	if _, _, err := r.c.ApplyType(ctx, cairn.Type{Path: gitTypeRef.Path, Revision: gitTypeRef.Revision,
		JSONSchema: json.RawMessage(valueSchema), Group: "soak.cairn.dev", Version: "v1",
		Names: &cairn.Names{Kind: "GitCounter", Singular: "gitcounter", Plural: "gitcounters"}}); err != nil {
		return nil, fmt.Errorf("soak: register the Git Type: %w", err)
	}
	// The name is unique per run: a --database run may find the backends
	// of earlier runs (pointing at repositories since removed).
	cfg := mustJSON(map[string]any{"url": "file://" + bare, "acceptValue": true, "branch": gitBranch,
		"contextSchema": json.RawMessage(gitbackend.ContextSchema), "author": map[string]string{"name": "cairn soak", "email": "soak@cairn.invalid"}})
	c, err := r.c.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: "soak-git-" + strconv.FormatInt(time.Now().UnixNano(), 36), Namespace: "cairn-system",
		TypeRef:    cairn.TypeRef{Path: gitbackend.TypePath, Revision: cairn.CoreRevision},
		Attributes: []cairn.AttributeRef{{Path: cairn.StorageAttributePath, Revision: cairn.CoreRevision}},
		Value:      cfg}}})
	if err != nil {
		return nil, fmt.Errorf("soak: register the Git backend: %w", err)
	}
	g := &gitTarget{bare: bare, backendID: c[0].ID}
	// Open the backend (its clone) now, so that the goroutines it keeps
	// count in the baseline rather than as growth.
	if _, h, err := r.c.CheckBackend(ctx, g.backendID); err != nil {
		return nil, fmt.Errorf("soak: check the Git backend: %w", err)
	} else if h.Status != "SERVING" {
		return nil, fmt.Errorf("soak: the Git backend is %s", h.Status)
	}
	return g, nil
}

// gitWriter creates, updates and deletes instances in the Git backend, one
// write each GitInterval (at most), until until ends; now and then it
// checks that two refused writes (a create of a name taken, an update
// without the lock) are refused, which the final check then finds nowhere
// in the repository. It goes round its slots in turn, on a fixed cycle of
// operations, so that even a short run does each kind.
func (r *run) gitWriter(ctx, until context.Context) {
	type slot struct {
		id, name string
		n, rvs   int
	}
	slots := make([]slot, r.cfg.GitPool)
	tick := time.NewTicker(r.cfg.GitInterval)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-until.Done():
			return
		case <-tick.C:
		}
		i, round := k%len(slots), k/len(slots)
		s := &slots[i]
		began := time.Now()
		op := "update"
		switch {
		case s.id == "":
			op = "create"
		case round%10 == 1:
			op = "create-taken"
		case round%10 == 2:
			op = "lock"
		case round%10 == 3:
			op = "delete"
		}
		switch op {
		case "create":
			name := fmt.Sprintf("soak-git-%d-%s", i, strconv.FormatInt(began.UnixNano(), 36))
			c, err := r.c.CreateInstances(ctx, r.gitCreate(name, 0))
			if r.finish(ctx, "git-create", began, err) {
				return
			}
			if err == nil {
				*s = slot{id: c[0].ID, name: name, n: 0, rvs: 1}
				r.gitAcked(ack{id: s.id, seq: c[0].Instance.Seq}, expect{n: 0, rvs: 1}, name)
			}
		case "delete":
			err := r.c.DeleteInstance(ctx, s.id, "")
			if r.finish(ctx, "git-delete", began, err) {
				return
			}
			if err == nil {
				r.gitAcked(ack{id: s.id, deleted: true}, expect{deleted: true}, s.name)
				*s = slot{}
			}
		case "create-taken":
			// The name is taken: refused, and the file keeps its value.
			_, err := r.c.CreateInstances(ctx, r.gitCreate(s.name, s.n+1000))
			if err != nil && ctx.Err() != nil {
				return
			}
			r.done("git-create-taken", began, nil)
			if !cairn.HasCode(err, cairn.CodeAlreadyExists) {
				r.violation("git: a second create of %s got %v, want AlreadyExists", s.name, err)
			}
		case "lock":
			owner := "soak-git-writer"
			err := r.c.LockInstances(ctx, []string{s.id}, owner)
			if r.finish(ctx, "git-lock", began, err) || err != nil {
				continue
			}
			began = time.Now()
			_, err = r.c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: s.id, Value: mustJSON(value{Writer: -2, Slot: i, N: s.n + 1000})}})
			if err != nil && ctx.Err() != nil {
				return
			}
			r.done("git-update-locked", began, nil)
			if !cairn.HasCode(err, cairn.CodeLocked) {
				r.violation("git: instance %s: an update without its lock got %v, want Locked", s.id, err)
			}
			began = time.Now()
			up, err := r.c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: s.id, OwnerID: owner, Value: mustJSON(value{Writer: -2, Slot: i, N: s.n + 1})}})
			if r.finish(ctx, "git-update", began, err) {
				return
			}
			if err == nil {
				s.n, s.rvs = s.n+1, s.rvs+1
				r.gitAcked(ack{id: s.id, seq: up[0].Seq}, expect{n: s.n, rvs: s.rvs}, s.name)
			}
			began = time.Now()
			err = r.c.UnlockInstances(ctx, []string{s.id}, owner)
			r.finish(ctx, "git-unlock", began, err)
		default:
			up, err := r.c.UpdateInstances(ctx, []hub.UpdateInstance{{ID: s.id, Value: mustJSON(value{Writer: -2, Slot: i, N: s.n + 1})}})
			if r.finish(ctx, "git-update", began, err) {
				return
			}
			if err == nil {
				s.n, s.rvs = s.n+1, s.rvs+1
				r.gitAcked(ack{id: s.id, seq: up[0].Seq}, expect{n: s.n, rvs: s.rvs}, s.name)
			}
		}
	}
}

func (r *run) gitCreate(name string, n int) hub.CreateRequest {
	return hub.CreateRequest{Instances: []hub.NewInstance{{
		Name: name, Namespace: "default", TypeRef: gitTypeRef,
		Labels:  r.labels("git"),
		Value:   mustJSON(value{Writer: -2, Slot: 0, N: n}),
		Backend: &hub.BackendInput{ID: r.git.backendID}}}}
}

// gitAcked records an acknowledged Git write: as any write (the watch and
// final checks cover it) and by name, for the repository check.
func (r *run) gitAcked(a ack, x expect, name string) {
	r.acked(a, x)
	r.mu.Lock()
	r.gitNames[a.id] = name
	r.mu.Unlock()
}

// cleanupGit deletes the Git writer's instances and the backend, which
// the repository does not outlive: a later server on the same database
// would otherwise keep syncing a backend whose repository is gone.
func (r *run) cleanupGit(ctx context.Context) {
	for _, id := range slices.Sorted(maps.Keys(r.gitNames)) {
		if r.expects[id].deleted {
			continue
		}
		if err := r.c.DeleteInstance(ctx, id, ""); err != nil {
			r.violation("git: clean up: delete instance %s: %v", id, err)
			return
		}
	}
	if err := r.c.DeleteInstance(ctx, r.git.backendID, ""); err != nil {
		r.violation("git: clean up: delete the backend %s: %v", r.git.backendID, err)
	}
}

// gitFile is a resource file at the repository's HEAD.
type gitFile struct {
	path string
	n    int
}

// gitFiles reads every file at the tip of the bare repository's branch
// (go-git, straight from the object store) and returns them by the
// resource's metadata.name.
func gitFiles(bare string) (map[string]gitFile, error) {
	repo, err := git.PlainOpen(bare)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", bare, err)
	}
	files := map[string]gitFile{}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(gitBranch), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return files, nil // nothing was ever committed
	}
	if err != nil {
		return nil, fmt.Errorf("%s: branch %s: %w", bare, gitBranch, err)
	}
	commit, err := repo.CommitObject(ref.Hash())
	if err != nil {
		return nil, fmt.Errorf("%s: commit %s: %w", bare, ref.Hash(), err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("%s: tree of %s: %w", bare, ref.Hash(), err)
	}
	err = tree.Files().ForEach(func(f *object.File) error {
		rd, err := f.Reader()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		defer rd.Close()
		raw, err := io.ReadAll(rd)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		var res struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec *value `json:"spec"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || res.Metadata.Name == "" || res.Spec == nil {
			return fmt.Errorf("%s at %s is not a soak resource (%v): %.200s", f.Name, ref.Hash(), err, raw)
		}
		if prev, dup := files[res.Metadata.Name]; dup {
			return fmt.Errorf("%s and %s both hold %s", prev.path, f.Name, res.Metadata.Name)
		}
		files[res.Metadata.Name] = gitFile{path: f.Name, n: res.Spec.N}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("soak: read the Git repository: %w", err)
	}
	return files, nil
}

// checkGit compares the acknowledged Git writes (names: instance id to
// name; expects: what was acknowledged per id) with the files at the
// repository's tip and the hub's final state: every live instance has its
// file with its acknowledged value and is in the Git backend, every
// deleted one has none, and no other file exists (a refused write that was
// written anyway).
func checkGit(backendID string, names map[string]string, expects map[string]expect, finals map[string]final, files map[string]gitFile, limit int) []string {
	var out []string
	add := func(format string, a ...any) {
		if len(out) < limit {
			out = append(out, "git: "+fmt.Sprintf(format, a...))
		}
	}
	live := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(names)) {
		name, x := names[id], expects[id]
		f, ok := files[name]
		switch {
		case x.deleted && ok:
			add("instance %s (%s) was deleted (acknowledged) but %s is still at the tip", id, name, f.path)
		case x.deleted:
		case !ok:
			add("instance %s (%s): acknowledged with n=%d, no file at the tip", id, name, x.n)
		case f.n != x.n:
			add("instance %s (%s): acknowledged n=%d, %s holds n=%d", id, name, x.n, f.path, f.n)
		}
		if !x.deleted {
			live[name] = true
			if fin := finals[id]; !fin.gone && fin.backend != backendID {
				add("instance %s (%s) is in backend %q, not the Git backend %s", id, name, fin.backend, backendID)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !live[name] {
			add("%s (%s, n=%d) is at the tip, but no acknowledged write made it", files[name].path, name, files[name].n)
		}
	}
	return out
}

// gitDir is where the bare repository goes: cfg.GitDir, or a temporary
// directory the returned function removes.
func gitDir(cfg Config) (string, func(), error) {
	if cfg.GitDir != "" {
		return cfg.GitDir, func() {}, os.MkdirAll(cfg.GitDir, 0o755)
	}
	d, err := os.MkdirTemp("", "cairn-soak-git-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
