package stack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/schema"
)

// Limits on a package, so a hostile archive or repository cannot exhaust
// the hub's memory.
const (
	maxFiles     = 10000
	maxTotalSize = 64 << 20
)

// overlayDir is where the generated overlay lives in the in-memory
// filesystem, next to the package's files; a package may not use it.
const overlayDir = ".cairn-overlay"

// Stack is a loaded, validated stack package.
type Stack struct {
	Manifest Manifest
	// Files is the whole package, stack.yaml and resources/ included, by
	// slash-separated path relative to the package root. Treat as
	// read-only: rendering never changes it.
	Files map[string][]byte
	// Digest is "sha256:" and the hex SHA-256 of Archive(): two packages
	// with the same files have the same digest wherever they came from.
	Digest string
	// Source says where the package was loaded from (a directory, an
	// archive, URL@commit for Git); empty for FromArchive.
	Source string

	params *schema.Schema
	// base is resources/ built alone (vars unresolved, no prefix): what the
	// manifest's matches are checked against. With configuration sets it is
	// every set's build together, and setBases each one's by directory.
	base     []Resource
	setBases map[string][]Resource
	// nsSources is where resources/ sets namespaces, for checkNoNamespace.
	nsSources *namespaceSources
}

// Load loads the stack package at src: a directory, a .tar.gz/.tgz file, or
// a Git repository as URL@REF[//SUBDIR] (see Loader.Load).
func Load(ctx context.Context, src string) (*Stack, error) {
	return Loader{}.Load(ctx, src)
}

// Loader loads stack packages; its zero value loads public repositories.
type Loader struct {
	// Git configures access to Git repositories (credentials).
	Git GitOptions
}

// Load loads the stack package at src. src is a Git source when it is a URL
// (file://, http://, https://, ssh://) or scp-like (git@host:org/repo),
// written URL@REF[//SUBDIR]: REF is a branch, tag or commit (the default
// branch when absent), SUBDIR the package's directory in the repository.
// Otherwise src is a local directory or a gzipped tar archive.
func (l Loader) Load(ctx context.Context, src string) (*Stack, error) {
	if gs, ok := parseGitSource(src); ok {
		return l.loadGit(ctx, gs)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeNotFound, "stack package %s: %w", src, err)
	}
	if fi.IsDir() {
		files, err := readDir(src)
		if err != nil {
			return nil, err
		}
		return newStack(files, src, true)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("stack package %s: %w", src, err)
	}
	files, err := readArchive(b)
	if err != nil {
		return nil, fmt.Errorf("stack package %s: %w", src, err)
	}
	return newStack(files, src, true)
}

// FromArchive loads a package from a gzipped tar archive (Archive's output,
// or any .tar.gz whose root, or whose single top directory, holds
// stack.yaml).
func FromArchive(b []byte) (*Stack, error) {
	files, err := readArchive(b)
	if err != nil {
		return nil, err
	}
	return newStack(files, "", false)
}

// FromNewArchive is FromArchive for a package being added to a catalog: it
// also makes the checks Load makes that FromArchive does not (a default
// its own schema refuses, a replacement target selecting nothing), which
// came after packages already in catalogs, so those still load.
func FromNewArchive(b []byte) (*Stack, error) {
	files, err := readArchive(b)
	if err != nil {
		return nil, err
	}
	return newStack(files, "", true)
}

// readDir reads every regular file under dir, skipping .git.
func readDir(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return cairn.Errorf(cairn.CodeInvalid, "stack package %s: %s is not a regular file (symbolic links and devices are not allowed in a package)", dir, rel)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		total += len(b)
		if len(files) >= maxFiles || total > maxTotalSize {
			return cairn.Errorf(cairn.CodeInvalid, "stack package %s: larger than %d files or %d MiB", dir, maxFiles, maxTotalSize>>20)
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		if cairn.ErrorCode(err) == cairn.CodeInvalid {
			return nil, err
		}
		return nil, fmt.Errorf("stack package %s: %w", dir, err)
	}
	return files, nil
}

// cleanPath validates a path inside a package.
func cleanPath(name string) (string, error) {
	p := strings.TrimPrefix(name, "./")
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || path.Clean(p) != strings.TrimSuffix(p, "/") ||
		p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("entry %q: paths must be relative and stay inside the package", name)
	}
	return strings.TrimSuffix(p, "/"), nil
}

func readArchive(b []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "not a gzipped tar archive: %w", err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	total := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "not a gzipped tar archive: %w", err)
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		case tar.TypeReg:
		default:
			return nil, cairn.Errorf(cairn.CodeInvalid, "archive entry %q is not a regular file (links and devices are not allowed in a package)", h.Name)
		}
		p, err := cleanPath(h.Name)
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "archive %w", err)
		}
		if p == ".git" || strings.HasPrefix(p, ".git/") || strings.Contains(p, "/.git/") {
			continue
		}
		total += int(h.Size)
		if len(files) >= maxFiles || total > maxTotalSize || h.Size < 0 {
			return nil, cairn.Errorf(cairn.CodeInvalid, "archive larger than %d files or %d MiB", maxFiles, maxTotalSize>>20)
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "archive entry %q: %w", h.Name, err)
		}
		files[p] = data
	}
	return stripTopDir(files), nil
}

// stripTopDir re-roots files at their single top directory when stack.yaml
// is there rather than at the root (tar czf x.tgz minimal-gcp/).
func stripTopDir(files map[string][]byte) map[string][]byte {
	if _, ok := files[ManifestFile]; ok {
		return files
	}
	top := ""
	for p := range files {
		d, _, ok := strings.Cut(p, "/")
		if !ok || top != "" && d != top {
			return files
		}
		top = d
	}
	if _, ok := files[top+"/"+ManifestFile]; !ok {
		return files
	}
	out := make(map[string][]byte, len(files))
	for p, b := range files {
		out[strings.TrimPrefix(p, top+"/")] = b
	}
	return out
}

// Archive returns the package as a canonical gzipped tar: entries sorted by
// path, mode 0644, no owners, timestamps at the Unix epoch; the same files
// always give the same bytes.
func (s *Stack) Archive() ([]byte, error) { return archive(s.Files) }

func archive(files map[string][]byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     p,
			Mode:     0o644,
			Size:     int64(len(files[p])),
			ModTime:  time.Unix(0, 0).UTC(),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("archive %s: %w", p, err)
		}
		if _, err := tw.Write(files[p]); err != nil {
			return nil, fmt.Errorf("archive %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newStack validates files as a stack package.
// newStack loads a package's files. strict adds the checks a new package
// must pass but one already in a catalog need not (FromNewArchive).
func newStack(files map[string][]byte, source string, strict bool) (*Stack, error) {
	var p problems
	data, ok := files[ManifestFile]
	if !ok {
		var top []string
		for f := range files {
			d, _, _ := strings.Cut(f, "/")
			if !slices.Contains(top, d) {
				top = append(top, d)
			}
		}
		slices.Sort(top)
		where := "the package"
		if source != "" {
			where = source
		}
		return nil, cairn.Errorf(cairn.CodeInvalid, "invalid stack package: %s has no %s at its root (found: %s)", where, ManifestFile, strings.Join(top, ", "))
	}
	for f := range files {
		if f == overlayDir || strings.HasPrefix(f, overlayDir+"/") {
			p.add(f, 0, "", fmt.Sprintf("%s/ is reserved for the overlay cairn generates", overlayDir))
		}
	}
	doc, err := parseYAMLDoc(ManifestFile, data)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "invalid stack package: %w", err)
	}
	s := &Stack{Files: files, Source: source}
	doc.decodeInto(&p, &s.Manifest)
	if !p.empty() {
		return nil, p.err()
	}
	s.params = s.Manifest.validate(&p, doc)
	before := len(p.causes)
	dirs := s.checkConfigurationDirs(&p, doc)
	s.base, s.setBases, s.nsSources = checkResources(&p, files, dirs)
	if len(dirs) > 0 && len(p.causes) > before {
		// A set that is not there would make every match that only it
		// satisfies a second, misleading error.
		s.base = nil
	}
	if s.base != nil {
		s.checkMatches(&p, doc)
	}
	if strict {
		s.checkAuthoring(&p, doc)
		if s.base != nil && s.Manifest.Kind.Scope != Cluster {
			// A Cluster kind's installations have no namespace: the
			// package names where its namespaced children go.
			s.checkNoNamespace(&p)
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	b, err := s.Archive()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	s.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return s, nil
}

// checkMatches reports readiness checks, deletion priorities and output
// references that select nothing in resources/: a typo there would
// otherwise silently never apply.
func (s *Stack) checkMatches(p *problems, d *yamlDoc) {
	m := &s.Manifest
	hits := func(mt Match) bool {
		return slices.ContainsFunc(s.base, mt.matches)
	}
	for i, c := range m.Readiness {
		if !hits(c.Match) {
			p.add(d.file, d.line("readiness", i, "match"), fieldName("readiness", i, "match"),
				fmt.Sprintf("%s matches no resource in resources/ (%s)", c.Match, s.baseSummary()))
		}
	}
	for i, c := range m.DeletionPriorities {
		if !hits(c.Match) {
			p.add(d.file, d.line("deletionPriorities", i, "match"), fieldName("deletionPriorities", i, "match"),
				fmt.Sprintf("%s matches no resource in resources/ (%s)", c.Match, s.baseSummary()))
		}
	}
	for i, o := range m.Outputs {
		if o.tpl == nil {
			continue
		}
		for _, ref := range o.tpl.Refs() {
			parts := strings.SplitN(ref, ".", 4)
			if parts[0] != "resources" || len(parts) < 3 {
				continue
			}
			mt := Match{Kind: parts[1], Name: parts[2]}
			if !hits(mt) {
				p.add(d.file, d.line("outputs", i, "value"), fieldName("outputs", i, "value"),
					fmt.Sprintf("reference %q: no %s named %q in resources/ (%s)", ref, parts[1], parts[2], s.baseSummary()))
				continue
			}
			// Outputs are computed for every installation, so with
			// configuration sets each set must render what they read.
			for _, set := range s.setsWithout(mt) {
				p.add(d.file, d.line("outputs", i, "value"), fieldName("outputs", i, "value"),
					fmt.Sprintf("reference %q: configuration set %s renders no %s named %q (%s); an output reads a resource every set renders",
						ref, set.Name, parts[1], parts[2], summary(s.setBases[set.Path])))
			}
		}
	}
}

// checkAuthoring reports an author's mistakes that loading a package once
// let through, so a package already in a catalog is not judged by them
// (newStack's strict): a parameter default its own schema refuses, which
// every user would be told about as parameters they never gave, and a
// replacement target that selects nothing, which kustomize silently skips.
func (s *Stack) checkAuthoring(p *problems, d *yamlDoc) {
	at := func(msg string, path ...any) { p.add(d.file, d.line(path...), fieldName(path...), msg) }
	var doc map[string]any
	if s.params != nil && json.Unmarshal(s.Manifest.Kind.Parameters, &doc) == nil {
		checkDefaults(at, doc, []any{"kind", "parameters"})
	}
	if s.base == nil {
		return
	}
	for i, r := range s.Manifest.Replacements {
		for j, t := range r.Targets {
			if msg := s.selectsNothing(t); msg != "" {
				at(msg, "replacements", i, "targets", j, "select")
			}
		}
	}
}

// selectsNothing says why a replacement target of stack.yaml selects no
// resource of resources/ by its kind and name there (kustomize's own
// matching, regular expressions included), or "" when it selects one or
// cannot be judged before rendering (label, annotation or namespace
// selectors, which the overlay may satisfy).
func (s *Stack) selectsNothing(t *types.TargetSelector) string {
	if t == nil || t.Select == nil || t.Select.LabelSelector != "" || t.Select.AnnotationSelector != "" || t.Select.Namespace != "" {
		return ""
	}
	tsr, err := types.NewTargetSelectorRegex(t)
	if err != nil {
		return err.Error()
	}
	for _, r := range s.base {
		gvk := resid.Gvk{Version: r.APIVersion(), Kind: r.Kind()}
		if g, v, ok := strings.Cut(r.APIVersion(), "/"); ok {
			gvk.Group, gvk.Version = g, v
		}
		id := resid.NewResIdWithNamespace(gvk, r.OriginalName, r.Namespace())
		if tsr.Selects(id) && !tsr.RejectsAny([]resid.ResId{id}) {
			return ""
		}
	}
	m := Match{Kind: t.Select.Kind, Name: t.Select.Name}
	if t.Select.Group != "" || t.Select.Version != "" {
		m.APIVersion = strings.TrimPrefix(t.Select.Group+"/"+t.Select.Version, "/")
	}
	return fmt.Sprintf("%s matches no resource in resources/ (%s)", m, s.baseSummary())
}

// baseSummary lists the resources of resources/ as KIND/NAME, for messages.
func (s *Stack) baseSummary() string { return summary(s.base) }

func summary(rs []Resource) string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Kind()+"/"+r.OriginalName)
	}
	return "it has " + strings.Join(out, ", ")
}

// setsWithout returns the configuration sets whose build has no resource
// mt matches.
func (s *Stack) setsWithout(mt Match) []ConfigurationSet {
	c := s.Manifest.Configurations
	if c == nil {
		return nil
	}
	var out []ConfigurationSet
	for _, set := range c.Sets {
		if !slices.ContainsFunc(s.setBases[set.Path], mt.matches) {
			out = append(out, set)
		}
	}
	return out
}
