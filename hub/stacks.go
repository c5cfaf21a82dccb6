package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
)

// The stack catalog: every added stack package is an instance of
// StackTypeRef in SystemNamespace named <name>-<version>, whose value holds
// the manifest, the digest and the package archive. Being instances, the
// catalog lives in whichever store the hub runs on and every replica sees
// it, with no store migration.

// StackTypeRef is the Type of catalog entries.
func StackTypeRef() cairn.TypeRef {
	return cairn.TypeRef{Path: "cap.core.type.stack", Revision: cairn.CoreRevision}
}

// StackEntry is one stack package version in the catalog.
type StackEntry struct {
	Name        string         `json:"name"`
	Version     string         `json:"version"`
	Description string         `json:"description,omitempty"`
	Digest      string         `json:"digest"`
	Manifest    stack.Manifest `json:"manifest"`
	// Archive is the package (stack.Archive()); JSON carries it in base64.
	Archive []byte `json:"archive,omitempty"`
	// InstallationType is the Type registered for the stack's kind.
	InstallationType cairn.TypeRef `json:"installationType"`
	// ID is the catalog instance's id.
	ID string `json:"id,omitempty"`
	// Added is when the version was added to the catalog: the catalog
	// instance's creation, not part of its value.
	Added time.Time `json:"-"`
}

// Stack loads the entry's package.
func (e StackEntry) Stack() (*stack.Stack, error) {
	s, err := stack.FromArchive(e.Archive)
	if err != nil {
		return nil, fmt.Errorf("stack %s@%s in the catalog: %w", e.Name, e.Version, err)
	}
	return s, nil
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9.-]+`)

// stackInstanceName is the catalog instance name of name@version.
func stackInstanceName(name, version string) string {
	return strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(name+"-"+version), "-"), "-.")
}

// AddStack adds a stack package (a gzipped tar archive, stack.Archive's
// output) to the catalog and registers the Type of its installations: its
// REST names, its parameters as the JSON Schema, the printer columns READY,
// SYNCED (and the manifest's own) and the status subresource. Adding the
// same package again changes nothing (added is false); a different package
// under a name and version already in the catalog is refused.
func (h *Hub) AddStack(ctx context.Context, archive []byte) (StackEntry, bool, error) {
	return h.addStack(ctx, archive, false)
}

func (h *Hub) addStack(ctx context.Context, archive []byte, retried bool) (StackEntry, bool, error) {
	s, err := stack.FromNewArchive(archive)
	if err != nil {
		if cairn.ErrorCode(err) == cairn.CodeInternal {
			err = &cairn.Error{Code: cairn.CodeInvalid, Msg: "the stack package is not valid: " + err.Error(), Err: err}
		}
		return StackEntry{}, false, err
	}
	m := s.Manifest
	// Its dependencies and credentials sections are refused now, with the
	// field at fault, rather than when a plan first reads them.
	if _, err := deps.FromManifest(&m); err != nil {
		return StackEntry{}, false, &cairn.Error{Code: cairn.CodeInvalid, Msg: "the stack package is not valid: " + err.Error(), Err: err}
	}
	if existing, err := h.GetStack(ctx, m.Name, m.Version); err == nil {
		if existing.Digest == s.Digest {
			existing.Archive = nil
			return existing, false, nil
		}
		return StackEntry{}, false, cairn.Errorf(cairn.CodeConflict,
			"stack %s@%s is already in the catalog with digest %s, not %s: a published version is immutable, give the package a new version",
			m.Name, m.Version, existing.Digest, s.Digest)
	} else if !cairn.HasCode(err, cairn.CodeNotFound) {
		return StackEntry{}, false, err
	}
	canonical, err := s.Archive()
	if err != nil {
		return StackEntry{}, false, fmt.Errorf("stack %s@%s: archive: %w", m.Name, m.Version, err)
	}
	t, err := installationType(m)
	if err != nil {
		return StackEntry{}, false, err
	}
	if m.Kind.Names.Plural == "" {
		// A derived plural is a guess, and the rule that guesses has
		// changed (PortalSettings was portalsettingses): a kind already
		// registered keeps the plural its installations are served as.
		if p, err := h.registeredPlural(ctx, m.Kind.Group, m.Kind.Names.Kind); err != nil {
			return StackEntry{}, false, err
		} else if p != "" {
			t.Names.Plural = p
		}
	}
	// Another stack may define the same kind: that is fine as long as both
	// define it the same way (ApplyType refuses a different schema under a
	// registered revision).
	if _, _, err := h.ApplyType(ctx, t); err != nil {
		if cairn.HasCode(err, cairn.CodeConflict) {
			if old, gerr := h.GetType(ctx, t.Ref()); gerr == nil {
				return StackEntry{}, false, h.kindChanged(ctx, s, old, t, err)
			}
		}
		return StackEntry{}, false, fmt.Errorf("stack %s@%s: register the installation kind %s: %w", m.Name, m.Version, m.Kind.Names.Kind, err)
	}
	ref := StackTypeRef()
	if _, _, err := h.ApplyType(ctx, cairn.Type{Path: ref.Path, Revision: ref.Revision, JSONSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		return StackEntry{}, false, err
	}
	e := StackEntry{Name: m.Name, Version: m.Version, Description: m.Description, Digest: s.Digest, Manifest: m,
		Archive: canonical, InstallationType: t.Ref()}
	value, err := json.Marshal(e)
	if err != nil {
		return StackEntry{}, false, err
	}
	created, err := h.CreateInstances(ctx, CreateRequest{Instances: []NewInstance{{
		Namespace: SystemNamespace, Name: stackInstanceName(m.Name, m.Version), TypeRef: ref, Value: value,
		Labels:  map[string]string{"stacks.cairn.dev/stack": stackInstanceName(m.Name, "")},
		Backend: &BackendInput{ID: cairn.BuiltinBackendID},
	}}})
	if cairn.HasCode(err, cairn.CodeAlreadyExists) && !retried {
		// Another replica added it at the same time: decide as above.
		return h.addStack(ctx, archive, true)
	}
	if err != nil {
		return StackEntry{}, false, fmt.Errorf("stack %s@%s: %w", m.Name, m.Version, err)
	}
	e.ID, e.Added = created[0].ID, created[0].Instance.CreatedAt
	e.Archive = nil
	e.Manifest.Kind.Names.Singular, e.Manifest.Kind.Names.Plural = t.Names.Singular, t.Names.Plural
	h.log.InfoContext(ctx, "stack added", "stack", m.Name, "version", m.Version, "digest", s.Digest, "kind", m.Kind.Names.Kind)
	return e, true, nil
}

// PrinterColumn is a kubectl get column of a Type, as a CRD's
// additionalPrinterColumns; REST serves them in Table answers. They are
// kept in the Type's JSON Schema under PrinterColumnsKey, which JSON
// Schema validation ignores.
type PrinterColumn = stack.PrinterColumn

// PrinterColumnsKey holds a Type's printer columns in its JSON Schema.
const PrinterColumnsKey = "x-cairn-printer-columns"

// installationType is the Type of a stack's installations.
func installationType(m stack.Manifest) (cairn.Type, error) {
	k := m.Kind
	rev, err := cairn.RevisionForVersion(k.Version)
	if err != nil {
		return cairn.Type{}, cairn.Errorf(cairn.CodeInvalid, "stack %s: kind.version: %v", m.Name, err)
	}
	sch := map[string]any{"type": "object"}
	if len(k.Parameters) > 0 {
		sch = nil
		if err := json.Unmarshal(k.Parameters, &sch); err != nil || sch == nil {
			return cairn.Type{}, cairn.Errorf(cairn.CodeInvalid, "stack %s: kind.parameters is not a JSON Schema object", m.Name)
		}
	}
	cols := []PrinterColumn{
		{Name: "READY", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		{Name: "SYNCED", Type: "string", JSONPath: `.status.conditions[?(@.type=="Synced")].status`},
	}
	cols = append(cols, k.AdditionalPrinterColumns...)
	sch[PrinterColumnsKey] = cols
	if k.Scope == stack.Cluster {
		sch[cairn.ScopeKey] = cairn.ScopeCluster
	}
	raw, err := json.Marshal(sch)
	if err != nil {
		return cairn.Type{}, err
	}
	singular := k.Names.Singular
	if singular == "" {
		singular = strings.ToLower(k.Names.Kind)
	}
	plural := k.Names.Plural
	if plural == "" {
		plural = cairn.PluralForKind(k.Names.Kind)
	}
	return cairn.Type{
		Path: cairn.PathForGroupKind(k.Group, k.Names.Kind), Revision: rev, JSONSchema: raw,
		AdditionalRefs: []string{InstallationParent},
		Group:          k.Group, Version: k.Version,
		Names: &cairn.Names{Kind: k.Names.Kind, Singular: singular, Plural: plural, ShortNames: k.Names.ShortNames},
	}, nil
}

// registeredPlural is the plural kind of group is served as by a Type
// already registered (any version), or "".
func (h *Hub) registeredPlural(ctx context.Context, group, kind string) (string, error) {
	ts, err := h.st.ListTypes(ctx, store.TypeFilter{Group: group})
	if err != nil {
		return "", fmt.Errorf("find the Types of %s %s: %w", group, kind, err)
	}
	for _, t := range ts {
		if t.Names != nil && t.Names.Kind == kind {
			return t.Names.Plural, nil
		}
	}
	return "", nil
}

// servedNames fills in the names e's installations are served as where its
// manifest leaves them to cairn: what its registered Type says, so that
// what cairn shows of a stack matches discovery.
func (h *Hub) servedNames(ctx context.Context, e *StackEntry) error {
	n := &e.Manifest.Kind.Names
	if n.Plural != "" && n.Singular != "" {
		return nil
	}
	t, err := h.st.GetType(ctx, e.InstallationType)
	if err != nil {
		return fmt.Errorf("stack %s@%s: its installation kind %s: %w", e.Name, e.Version, e.InstallationType, err)
	}
	if t.Names != nil {
		n.Plural, n.Singular = t.Names.Plural, t.Names.Singular
	}
	return nil
}

// ListStacks returns the catalog without archives, by name, then version
// (highest first).
func (h *Hub) ListStacks(ctx context.Context) ([]StackEntry, error) {
	insts, err := h.ListInstances(ctx, store.InstanceFilter{TypePath: StackTypeRef().Path, Namespace: SystemNamespace}, true)
	if err != nil {
		return nil, fmt.Errorf("list the stack catalog: %w", err)
	}
	out := make([]StackEntry, 0, len(insts))
	for _, inst := range insts {
		e, err := decodeStack(inst)
		if err != nil {
			return nil, err
		}
		e.Archive = nil
		if err := h.servedNames(ctx, &e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b StackEntry) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return -compareSemver(a.Version, b.Version)
	})
	return out, nil
}

// GetStack returns one catalog entry with its archive; version "" means the
// highest release of name (a pre-release when there is no release).
func (h *Hub) GetStack(ctx context.Context, name, version string) (StackEntry, error) {
	if version != "" {
		inst, err := h.GetInstanceByName(ctx, StackTypeRef().Path, SystemNamespace, stackInstanceName(name, version), true)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return StackEntry{}, cairn.Errorf(cairn.CodeNotFound, "stack %s@%s is not in the catalog", name, version)
		}
		if err != nil {
			return StackEntry{}, err
		}
		e, err := decodeStack(inst)
		if err == nil && e.Name != name {
			return StackEntry{}, cairn.Errorf(cairn.CodeNotFound, "stack %s@%s is not in the catalog", name, version)
		}
		if err == nil {
			err = h.servedNames(ctx, &e)
		}
		return e, err
	}
	all, err := h.ListStacks(ctx)
	if err != nil {
		return StackEntry{}, err
	}
	if e, ok := latest(all, func(e StackEntry) bool { return e.Name == name }); ok {
		return h.GetStack(ctx, name, e.Version)
	}
	return StackEntry{}, cairn.Errorf(cairn.CodeNotFound, "stack %s is not in the catalog", name)
}

// latest returns the first of entries (ListStacks' order) that match and
// are of the version deps.Latest picks among the matching ones: the
// highest release, a pre-release only when there is nothing else.
func latest(entries []StackEntry, match func(StackEntry) bool) (StackEntry, bool) {
	var vs []string
	for _, e := range entries {
		if match(e) {
			vs = append(vs, e.Version)
		}
	}
	v := deps.Latest(vs)
	for _, e := range entries {
		if match(e) && (e.Version == v || v == "") {
			return e, true
		}
	}
	return StackEntry{}, false
}

// AnnotationStackVersion on an installation pins the stack version that
// renders it; without it the highest release defining its kind does.
const AnnotationStackVersion = "stacks.cairn.dev/version"

// StackFor returns the catalog entry (with its archive) that renders an
// installation of Type ref: the version the installation pins, else the
// highest release whose kind is that Type (deps.Latest).
func (h *Hub) StackFor(ctx context.Context, ref cairn.TypeRef, pinned string) (StackEntry, error) {
	all, err := h.ListStacks(ctx)
	if err != nil {
		return StackEntry{}, err
	}
	if e, ok := latest(all, func(e StackEntry) bool {
		return e.InstallationType == ref && (pinned == "" || e.Version == pinned)
	}); ok {
		return h.GetStack(ctx, e.Name, e.Version)
	}
	if pinned != "" {
		return StackEntry{}, cairn.Errorf(cairn.CodeNotFound, "no stack version %s in the catalog defines %s", pinned, ref)
	}
	return StackEntry{}, cairn.Errorf(cairn.CodeNotFound, "no stack in the catalog defines %s", ref)
}

func decodeStack(inst cairn.Instance) (StackEntry, error) {
	var e StackEntry
	if err := json.Unmarshal(inst.Latest.Value, &e); err != nil {
		return e, fmt.Errorf("catalog entry %s/%s: %w", inst.Namespace, inst.Name, err)
	}
	e.ID, e.Added = inst.ID, inst.CreatedAt
	return e, nil
}

func compareSemver(a, b string) int {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	return va.Compare(vb)
}
