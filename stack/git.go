package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/cairn-dev/cairn"
)

// GitOptions configures how packages are fetched from Git.
type GitOptions struct {
	// Auth authenticates to the remote (HTTP basic auth with a token, SSH
	// keys); nil for public repositories and file:// URLs.
	Auth transport.AuthMethod
}

// gitSource is URL@REF//SUBDIR.
type gitSource struct {
	url, ref, subdir string
}

func (g gitSource) String() string {
	s := g.url
	if g.ref != "" {
		s += "@" + g.ref
	}
	if g.subdir != "" {
		s += "//" + g.subdir
	}
	return s
}

var scpLikeRE = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

// parseGitSource recognises URL@REF[//SUBDIR] where URL is file://,
// http(s)://, ssh:// or scp-like (git@host:org/repo).
func parseGitSource(src string) (gitSource, bool) {
	var pathStart int
	switch {
	case strings.HasPrefix(src, "file://"), strings.HasPrefix(src, "http://"), strings.HasPrefix(src, "https://"), strings.HasPrefix(src, "ssh://"):
		scheme := strings.Index(src, "://") + 3
		slash := strings.IndexByte(src[scheme:], '/')
		if slash < 0 {
			return gitSource{url: src}, true
		}
		pathStart = scheme + slash
	case scpLikeRE.MatchString(src):
		pathStart = len(scpLikeRE.FindString(src))
	default:
		return gitSource{}, false
	}
	g := gitSource{}
	rest := src
	// A file:// URL's path starts with '/', so look for "//" after it.
	if i := strings.Index(src[pathStart+1:], "//"); i >= 0 {
		cut := pathStart + 1 + i
		rest, g.subdir = src[:cut], strings.Trim(src[cut+2:], "/")
	}
	if i := strings.LastIndexByte(rest[pathStart:], '@'); i >= 0 {
		rest, g.ref = rest[:pathStart+i], rest[pathStart+i+1:]
	}
	g.url = rest
	return g, true
}

// loadGit clones the repository into memory, reads the tree of the ref at
// the subdirectory, and validates it as a package.
func (l Loader) loadGit(ctx context.Context, g gitSource) (*Stack, error) {
	if g.subdir != "" {
		if _, err := cleanPath(g.subdir); err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "stack package %s: subdirectory %w", g, err)
		}
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), nil, &git.CloneOptions{
		URL:    g.url,
		Auth:   l.Git.Auth,
		Mirror: true, // every branch and tag, as the remote names them
	})
	if err != nil {
		if errors.Is(err, transport.ErrRepositoryNotFound) {
			return nil, cairn.Errorf(cairn.CodeNotFound, "stack package %s: clone %s: %w", g, g.url, err)
		}
		return nil, cairn.Errorf(cairn.CodeUnavailable, "stack package %s: clone %s: %w", g, g.url, err)
	}
	rev := g.ref
	if rev == "" {
		rev = "HEAD"
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "stack package %s: ref %q is not a branch, tag or commit of %s: %w", g, rev, g.url, err)
	}
	commit, err := repo.CommitObject(*hash)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "stack package %s: ref %q: %w", g, rev, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("stack package %s: %w", g, err)
	}
	if g.subdir != "" {
		tree, err = tree.Tree(g.subdir)
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeNotFound, "stack package %s: no directory %s at %s: %w", g, g.subdir, hash, err)
		}
	}
	files := map[string][]byte{}
	total := 0
	walker := object.NewTreeWalker(tree, true, nil)
	defer walker.Close()
	for {
		name, entry, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("stack package %s: %w", g, err)
		}
		switch entry.Mode {
		case filemode.Dir:
			continue
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
		default:
			return nil, cairn.Errorf(cairn.CodeInvalid, "stack package %s: %s is not a regular file (links and submodules are not allowed in a package)", g, name)
		}
		f, err := tree.TreeEntryFile(&entry)
		if err != nil {
			return nil, fmt.Errorf("stack package %s: %s: %w", g, name, err)
		}
		total += int(f.Size)
		if len(files) >= maxFiles || total > maxTotalSize {
			return nil, cairn.Errorf(cairn.CodeInvalid, "stack package %s: larger than %d files or %d MiB", g, maxFiles, maxTotalSize>>20)
		}
		s, err := f.Contents()
		if err != nil {
			return nil, fmt.Errorf("stack package %s: %s: %w", g, name, err)
		}
		files[name] = []byte(s)
	}
	return newStack(files, gitSource{url: g.url, ref: hash.String(), subdir: g.subdir}.String(), true)
}
