package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
	"github.com/cairn-dev/cairn/store"
)

// expandFiles turns the -f arguments into the files to read: a directory
// means its *.yaml, *.yml and *.json files in name order, "-" standard
// input (once).
func expandFiles(args []string) ([]string, error) {
	var paths []string
	stdin := false
	for _, arg := range args {
		if arg == "-" {
			if stdin {
				return nil, usageErrorf("-f - (standard input) can be given once")
			}
			stdin = true
			paths = append(paths, arg)
			continue
		}
		fi, err := os.Stat(arg)
		if err != nil {
			return nil, fileError(arg, err)
		}
		if !fi.IsDir() {
			paths = append(paths, arg)
			continue
		}
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, fileError(arg, err)
		}
		n := len(paths)
		for _, e := range entries { // ReadDir sorts by name
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					paths = append(paths, filepath.Join(arg, e.Name()))
				}
			}
		}
		if len(paths) == n {
			return nil, cairn.Errorf(cairn.CodeInvalid, "directory %s holds no *.yaml, *.yml or *.json file", arg)
		}
	}
	return paths, nil
}

// fileError reports an unreadable input file as invalid input.
func fileError(path string, err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err
	}
	return cairn.Errorf(cairn.CodeInvalid, "read %s: %w", path, err)
}

// Kinds in results.
const (
	kindType     = string(manifest.KindType)
	kindInstance = string(manifest.KindTypeInstance)
)

// applyResult is what a command did with one Type or TypeInstance.
type applyResult struct {
	Kind string `json:"kind"`
	// Ref is path:revision for a Type, namespace/name for a TypeInstance.
	Ref    string `json:"ref"`
	ID     string `json:"id,omitempty"`
	Action string `json:"action"` // created, configured or unchanged
	// Proposal: the write became a pull request (a Git backend in propose mode).
	Proposal string `json:"proposal,omitempty"`
}

func (r applyResult) String() string {
	if r.Kind == kindType {
		return fmt.Sprintf("type/%s %s", r.Ref, r.Action)
	}
	if r.Proposal != "" {
		return fmt.Sprintf("typeinstance/%s (id %s) %s; %s", r.Ref, r.ID, r.Action, r.Proposal)
	}
	return fmt.Sprintf("typeinstance/%s (id %s) %s", r.Ref, r.ID, r.Action)
}

// plan is what apply will do with one TypeInstance document.
type plan struct {
	doc      manifest.Document
	in       *manifest.Instance
	alias    string          // alias within the apply, "" when none
	existing *cairn.Instance // nil: create
	update   *hub.UpdateInstance
}

func (p *plan) errorf(code cairn.Code, format string, args ...any) error {
	return &cairn.Error{Code: code, Subject: p.doc.Pos.String(), Msg: fmt.Sprintf(format, args...)}
}

func refOf(namespace, name, id string) string {
	if namespace == "" {
		namespace = cairn.DefaultNamespace
	}
	if name == "" {
		name = id
	}
	return namespace + "/" + name
}

// checkDuplicates refuses two documents that describe the same instance:
// the same metadata.id, or the same Type path, namespace and name.
func checkDuplicates(plans []*plan) error {
	seen := map[string]*plan{}
	var errs []error
	for _, p := range plans {
		var key string
		switch {
		case p.in.ID != "":
			key = "id " + p.in.ID
		case p.in.Name != "":
			key = fmt.Sprintf("%s %s/%s", p.in.TypeRef.Path, cmp.Or(p.in.Namespace, cairn.DefaultNamespace), p.in.Name)
		default:
			continue
		}
		if q, dup := seen[key]; dup {
			errs = append(errs, p.errorf(cairn.CodeInvalid, "describes the same TypeInstance (%s) as %s", key, q.doc.Pos))
			continue
		}
		seen[key] = p
	}
	return errors.Join(errs...)
}

// assignAliases gives each document its alias within the apply: the
// explicit metadata.alias, else a metadata.name no other document shares.
func assignAliases(plans []*plan) (map[string]*plan, error) {
	byAlias := map[string]*plan{}
	var errs []error
	for _, p := range plans {
		if p.in.Alias == "" {
			continue
		}
		if q, dup := byAlias[p.in.Alias]; dup {
			errs = append(errs, p.errorf(cairn.CodeInvalid, "metadata.alias %q is also the alias of %s; aliases must be unique within an apply", p.in.Alias, q.doc.Pos))
			continue
		}
		p.alias = p.in.Alias
		byAlias[p.alias] = p
	}
	names := map[string]int{}
	for _, p := range plans {
		if p.in.Alias == "" && p.in.Name != "" {
			names[p.in.Name]++
		}
	}
	for _, p := range plans {
		if p.in.Alias != "" || p.in.Name == "" || names[p.in.Name] > 1 {
			continue
		}
		if _, taken := byAlias[p.in.Name]; taken {
			continue
		}
		p.alias = p.in.Name
		byAlias[p.alias] = p
	}
	return byAlias, errors.Join(errs...)
}

// storageBackendsByAlias maps each alias of a storage backend instance (one
// with the storage attribute) to the ids that carry it.
func storageBackendsByAlias(ctx context.Context, h cairnclient.Interface) (map[string][]string, error) {
	list, err := h.ListInstances(ctx, store.InstanceFilter{
		Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
	}, false)
	if err != nil {
		return nil, fmt.Errorf("list storage backends: %w", err)
	}
	out := map[string][]string{}
	for _, inst := range list {
		if inst.Alias != "" {
			out[inst.Alias] = append(out[inst.Alias], inst.ID)
		}
	}
	return out, nil
}

// decide records inst as the instance the document refers to and whether
// it needs a new resource version; it refuses a document that would change
// what identifies the instance. Both modes decide alike: client mode reads
// inst from the server.
func (p *plan) decide(inst cairn.Instance, owner string) error {
	in := p.in
	p.existing = &inst

	// What identifies an instance cannot change; say so rather than ignore it.
	var causes []cairn.Cause
	if in.TypeRef.Path != "" && in.TypeRef != inst.TypeRef {
		causes = append(causes, cairn.Cause{Field: "spec/typeRef", Message: fmt.Sprintf("%s differs from the existing TypeInstance's %s; the Type of a TypeInstance cannot change", in.TypeRef, inst.TypeRef)})
	}
	if in.Name != "" && in.Name != inst.Name {
		causes = append(causes, cairn.Cause{Field: "metadata/name", Message: fmt.Sprintf("%q differs from the existing TypeInstance's %q; names cannot change", in.Name, inst.Name)})
	}
	if in.Namespace != "" && in.Namespace != inst.Namespace {
		causes = append(causes, cairn.Cause{Field: "metadata/namespace", Message: fmt.Sprintf("%q differs from the existing TypeInstance's %q; namespaces cannot change", in.Namespace, inst.Namespace)})
	}
	if in.Backend != nil && in.Backend.ID != "" && in.Backend.ID != inst.Backend.ID {
		causes = append(causes, cairn.Cause{Field: "spec/backend/id", Message: fmt.Sprintf("%q differs from the existing TypeInstance's backend %q; the backend cannot change", in.Backend.ID, inst.Backend.ID)})
	}
	if len(causes) > 0 {
		return &cairn.Error{Code: cairn.CodeConflict, Subject: p.doc.Pos.String(), Causes: causes,
			Msg: fmt.Sprintf("TypeInstance %q cannot be changed this way: %s", inst.ID, joinCauses(causes))}
	}

	if changed(in, inst) {
		u := in.UpdateInstance(inst.ID, owner)
		p.update = &u
	}
	return nil
}

// changed reports whether applying in to inst would change anything. A value
// or context the document leaves out is carried over, so it is not compared.
func changed(in *manifest.Instance, inst cairn.Instance) bool {
	if in.Value != nil && !cairn.JSONEqual(in.Value, inst.Latest.Value) {
		return true
	}
	if in.Backend != nil && in.Backend.Context != nil && !cairn.JSONEqual(in.Backend.Context, inst.Latest.Context) {
		return true
	}
	return !cairn.SameAttributes(in.Attributes, inst.Latest.Attributes) ||
		!maps.Equal(in.Labels, inst.Labels) ||
		!maps.Equal(in.Annotations, inst.Annotations)
}

// checkUses refuses spec.uses entries an existing instance does not have
// yet: the hub records relations only when instances are created.
func (p *plan) checkUses(byAlias map[string]*plan) error {
	var causes []cairn.Cause
	for i, u := range p.in.Uses {
		id := u
		if t, ok := byAlias[u]; ok {
			if t.existing == nil {
				causes = append(causes, cairn.Cause{Field: fmt.Sprintf("spec/uses/%d", i),
					Message: fmt.Sprintf("%q is created by this apply; an existing TypeInstance cannot start using it", u)})
				continue
			}
			id = t.existing.ID
		}
		if !slices.Contains(p.existing.Uses, id) {
			causes = append(causes, cairn.Cause{Field: fmt.Sprintf("spec/uses/%d", i),
				Message: fmt.Sprintf("%q is not used by the existing TypeInstance; uses relations are set when a TypeInstance is created", u)})
		}
	}
	if len(causes) == 0 {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeInvalid, Subject: p.doc.Pos.String(), Causes: causes,
		Msg: fmt.Sprintf("TypeInstance %q: cannot add uses relations: %s", p.existing.ID, joinCauses(causes))}
}

func joinCauses(causes []cairn.Cause) string {
	s := make([]string, len(causes))
	for i, c := range causes {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}

func (a *app) printResults(w io.Writer, results []applyResult) error {
	if printed, err := a.printData(w, results); printed {
		return err
	}
	for _, r := range results {
		if r.Ref == r.ID {
			if _, err := fmt.Fprintf(w, "typeinstance %s %s\n", r.ID, r.Action); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintln(w, r); err != nil {
			return err
		}
	}
	return nil
}
