package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
	"github.com/cairn-dev/cairn/store"
)

func (a *app) applyCommand() *cobra.Command {
	var files []string
	var owner string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|- [-f ...]",
		Short: "Create or update Types and TypeInstances from YAML or JSON files",
		Long: `Apply creates or updates what the documents describe.

Types are applied first: a new revision is created, an identical one is left
unchanged, and a different definition under an existing revision is refused
(Type revisions are immutable).

Then TypeInstances: a document matches an existing instance by metadata.id, or
by spec.typeRef.path + metadata.namespace + metadata.name. Those without a match
are created together in one atomic batch, with the relations in spec.uses
(aliases of documents of the same apply, or ids). Those with a match get a new
resource version when their value, backend context, attributes, labels or
annotations differ, and are reported unchanged otherwise.

A document's alias defaults to its metadata.name when no other document of the
apply has the same name. A directory means every *.yaml, *.yml and *.json file
in it, in name order; "-" reads standard input.`,
		Example: `  cairn apply -f examples/quickstart
  cairn apply -f types.yaml -f instances/
  cat db.json | cairn apply -f -`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return usageErrorf("apply needs at least one -f FILE|DIR|-")
			}
			docs, err := a.readDocuments(files)
			if err != nil {
				return err
			}
			if len(docs) == 0 {
				return cairn.Errorf(cairn.CodeInvalid, "no documents in %s", strings.Join(files, ", "))
			}
			return a.withHub(cmd.Context(), func(h *hub.Hub) error {
				results, err := apply(cmd.Context(), h, docs, owner)
				noteProposals(cmd.Context(), h, results)
				// Report what was done even when a later step failed.
				return errors.Join(a.printResults(cmd.OutOrStdout(), results), err)
			})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - (stdin) to apply; repeatable")
	cmd.Flags().StringVar(&owner, "owner", "", "lock owner, to update TypeInstances locked by it")
	return cmd
}

// readDocuments decodes every file named by the -f flags.
func (a *app) readDocuments(args []string) ([]manifest.Document, error) {
	paths, err := expandFiles(args)
	if err != nil {
		return nil, err
	}
	var docs []manifest.Document
	var errs []error
	for _, p := range paths {
		ds, err := a.decodeFile(p)
		docs = append(docs, ds...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return docs, errors.Join(errs...)
}

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

func (a *app) decodeFile(path string) ([]manifest.Document, error) {
	if path == "-" {
		return manifest.Decode(a.env.Stdin, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	defer f.Close()
	return manifest.Decode(f, path)
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

// apply applies Types, then TypeInstances. It returns the results of what
// was done, in document order, even when it fails part way.
func apply(ctx context.Context, h *hub.Hub, docs []manifest.Document, owner string) ([]applyResult, error) {
	var results []applyResult
	var errs []error
	for _, d := range docs {
		if d.Kind != manifest.KindType {
			continue
		}
		t, created, err := h.ApplyType(ctx, *d.Type)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Pos, err))
			continue
		}
		action := "unchanged"
		if created {
			action = "created"
		}
		results = append(results, applyResult{Kind: kindType, Ref: t.Ref().String(), Action: action})
	}
	if len(errs) > 0 {
		// Instances of a Type that failed would be checked against the wrong
		// schema, or none: apply nothing more.
		return results, errors.Join(errs...)
	}
	ir, err := applyInstances(ctx, h, docs, owner)
	return append(results, ir...), err
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

func applyInstances(ctx context.Context, h *hub.Hub, docs []manifest.Document, owner string) ([]applyResult, error) {
	var plans []*plan
	for _, d := range docs {
		if d.Kind == manifest.KindTypeInstance {
			plans = append(plans, &plan{doc: d, in: d.Instance})
		}
	}
	if len(plans) == 0 {
		return nil, nil
	}
	byAlias, err := assignAliases(plans)
	if err != nil {
		return nil, err
	}
	if err := checkDuplicates(plans); err != nil {
		return nil, err
	}
	var errs []error
	if err := resolveBackendAliases(ctx, h, plans); err != nil {
		errs = append(errs, err)
	}
	for _, p := range plans {
		if err := p.match(ctx, h, owner); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	// Relations: an alias of the apply resolves to the batch alias of a
	// document being created, or to the id of an existing one.
	var req hub.CreateRequest
	var created []*plan
	for _, p := range plans {
		if p.existing != nil {
			if err := p.checkUses(byAlias); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if len(p.in.Uses) > 0 && p.alias == "" {
			errs = append(errs, p.errorf(cairn.CodeInvalid,
				"spec.uses needs the document to have an alias within the apply: set metadata.alias (metadata.name is shared with another document)"))
			continue
		}
		n := p.in.NewInstance()
		n.Alias = p.alias
		req.Instances = append(req.Instances, n)
		for _, rel := range p.in.UsesRelations(p.alias) {
			if t, ok := byAlias[rel.To]; ok && t.existing != nil {
				rel.To = t.existing.ID
			}
			req.UsesRelations = append(req.UsesRelations, rel)
		}
		created = append(created, p)
	}
	var ups []hub.UpdateInstance
	for _, p := range plans {
		if p.update != nil {
			ups = append(ups, *p.update)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	ids := map[*plan]string{}
	if len(req.Instances) > 0 {
		out, err := h.CreateInstances(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("create TypeInstances: %w", err)
		}
		// The hub answers in request order.
		for i, c := range out {
			ids[created[i]] = c.ID
		}
	}
	var results []applyResult
	var upErr error
	if len(ups) > 0 {
		if _, err := h.UpdateInstances(ctx, ups); err != nil {
			upErr = err
		}
	}
	for _, p := range plans {
		r := applyResult{Kind: kindInstance}
		switch {
		case p.existing == nil:
			r.ID, r.Action = ids[p], "created"
			r.Ref = refOf(p.in.Namespace, p.in.Name, r.ID)
		case p.update != nil && upErr != nil:
			continue
		default:
			r.ID, r.Action = p.existing.ID, "unchanged"
			if p.update != nil {
				r.Action = "configured"
			}
			r.Ref = refOf(p.existing.Namespace, p.existing.Name, r.ID)
		}
		results = append(results, r)
	}
	return results, upErr
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

// resolveBackendAliases replaces a spec.backend.id that is not a UUID with
// the id of the storage backend instance that has that alias.
func resolveBackendAliases(ctx context.Context, h *hub.Hub, plans []*plan) error {
	var backends map[string][]string
	var errs []error
	for _, p := range plans {
		b := p.in.Backend
		if b == nil || b.ID == "" || uuid.Validate(b.ID) == nil {
			continue
		}
		if backends == nil {
			var err error
			if backends, err = storageBackendsByAlias(ctx, h); err != nil {
				return err
			}
		}
		switch ids := backends[b.ID]; len(ids) {
		case 1:
			b.ID = ids[0]
		case 0:
			errs = append(errs, p.errorf(cairn.CodeNotFound, "spec.backend.id %q is neither an id nor the alias of a storage backend", b.ID))
		default:
			errs = append(errs, p.errorf(cairn.CodeInvalid, "spec.backend.id %q is the alias of several storage backends (%s); use an id", b.ID, cairn.QuoteIDs(ids)))
		}
	}
	return errors.Join(errs...)
}

// storageBackendsByAlias maps each alias of a storage backend instance (one
// with the storage attribute) to the ids that carry it.
func storageBackendsByAlias(ctx context.Context, h *hub.Hub) (map[string][]string, error) {
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

// match finds the existing instance a document refers to and, when there is
// one, decides whether it needs a new resource version.
func (p *plan) match(ctx context.Context, h *hub.Hub, owner string) error {
	in := p.in
	withValue := in.Value != nil
	var inst cairn.Instance
	var err error
	switch {
	case in.ID != "":
		inst, err = h.GetInstance(ctx, in.ID, withValue)
		if err != nil {
			return fmt.Errorf("%s: metadata.id: %w", p.doc.Pos, err)
		}
	case in.Name != "":
		ns := cmp.Or(in.Namespace, cairn.DefaultNamespace)
		inst, err = h.GetInstanceByName(ctx, in.TypeRef.Path, ns, in.Name, withValue)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.doc.Pos, err)
		}
	default:
		return nil
	}
	return p.decide(inst, owner)
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
	if in.Value != nil && !hub.JSONEqual(in.Value, inst.Latest.Value) {
		return true
	}
	if in.Backend != nil && in.Backend.Context != nil && !hub.JSONEqual(in.Backend.Context, inst.Latest.Context) {
		return true
	}
	return !sameAttributes(in.Attributes, inst.Latest.Attributes) ||
		!maps.Equal(in.Labels, inst.Labels) ||
		!maps.Equal(in.Annotations, inst.Annotations)
}

func sameAttributes(a, b []cairn.AttributeRef) bool {
	key := func(r cairn.AttributeRef) string { return r.Path + ":" + r.Revision }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i, r := range a {
		ka[i] = key(r)
	}
	for i, r := range b {
		kb[i] = key(r)
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
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
