package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/controller/install"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/manifest"
)

// docClass says how client mode sends a document.
type docClass int

const (
	// classType: a cairn Type, a Capact OCF Type or a cup
	// ResourceDefinition (one Type per version), POSTed to types.
	classType docClass = iota
	// classInstance: a hub.cairn.dev/v1 TypeInstance, in cairn's manifest
	// form or as the server serves it (then it has metadata.uid). New ones
	// are created in one batch (POST typeinstances), existing ones replaced
	// by id (PUT typeinstances/{id}).
	classInstance
	// classObject: an object of a resource the server serves, sent as it is.
	classObject
)

// rdoc is one document of the -f files.
type rdoc struct {
	raw   manifest.Raw
	class docClass
	types []cairn.Type
	inst  *manifest.Instance
	// rv is metadata.resourceVersion of a TypeInstance as served, kept for
	// replace.
	rv string
}

// readDocs reads the documents of the -f arguments. Like local mode it
// reads every document before sending any, so a mistake in one file stops
// the command before anything changed.
func (r *kube) readDocs(files []string) ([]rdoc, error) {
	if len(files) == 0 {
		return nil, usageErrorf("give at least one -f FILE|DIR|-")
	}
	paths, err := expandFiles(files)
	if err != nil {
		return nil, err
	}
	var out []rdoc
	var errs []error
	for _, p := range paths {
		raws, err := r.splitFile(p)
		if err != nil {
			errs = append(errs, err)
		}
		for _, raw := range raws {
			d, err := classify(raw)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, d)
		}
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	if len(out) == 0 {
		return nil, cairn.Errorf(cairn.CodeInvalid, "no documents in %s", strings.Join(files, ", "))
	}
	return out, nil
}

func (r *kube) splitFile(path string) ([]manifest.Raw, error) {
	if path == "-" {
		return manifest.Split(r.env.Stdin, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err)
	}
	defer f.Close()
	return manifest.Split(f, path)
}

func classify(d manifest.Raw) (rdoc, error) {
	doc := rdoc{raw: d, class: classObject}
	hubDoc := d.APIVersion == manifest.APIVersion
	switch {
	case hubDoc && d.Kind == string(manifest.KindType) && servedType(d.JSON) != nil:
		doc.class, doc.types = classType, []cairn.Type{*servedType(d.JSON)}
	case d.OCF, d.APIVersion == manifest.CupAPIVersion, hubDoc && d.Kind == string(manifest.KindType):
		docs, err := manifest.DecodeRaw(d)
		if err != nil {
			return doc, err
		}
		doc.class = classType
		for _, x := range docs {
			doc.types = append(doc.types, *x.Type)
		}
	case hubDoc && d.Kind == string(manifest.KindTypeInstance):
		doc.class = classInstance
		docs, err := manifest.DecodeRaw(d)
		if err != nil {
			return doc, err
		}
		// A TypeInstance as the server serves it names the instance by id,
		// and its resourceVersion is kept for the replace's precondition.
		doc.inst, doc.rv = docs[0].Instance, docs[0].Instance.ResourceVersion
	case d.APIVersion == "" || d.Kind == "":
		return doc, &cairn.Error{Code: cairn.CodeInvalid, Subject: d.Pos.String(), Msg: "apiVersion and kind are required"}
	}
	return doc, nil
}

// servedType reads a Type as the server serves it (cairn get types -o
// yaml): metadata.name is "<path>:<revision>". It returns nil for other
// Type documents.
func servedType(raw json.RawMessage) *cairn.Type {
	var o rest.TypeObject
	if json.Unmarshal(raw, &o) != nil || o.Spec.Path == "" || o.Metadata.Name != rest.TypeName(cairn.TypeRef{Path: o.Spec.Path, Revision: o.Spec.Revision}) {
		return nil
	}
	t := &cairn.Type{Path: o.Spec.Path, Revision: o.Spec.Revision, AdditionalRefs: o.Spec.AdditionalRefs, JSONSchema: o.Spec.JSONSchema}
	if o.Spec.REST != nil {
		t.Group, t.Version, t.Names = o.Spec.REST.Group, o.Spec.REST.Version, o.Spec.REST.Names
		t.PrinterColumns = o.Spec.REST.AdditionalPrinterColumns
	}
	return t
}

// applier sends documents for apply, create or replace.
type applier struct {
	r     *kube
	w     io.Writer
	mode  string // "apply", "create" or "replace"
	owner string
	// namespace is -n; explicit says it was given, so a document of another
	// namespace is a mistake rather than a choice.
	namespace string
	explicit  bool
	// applied are the objects written or found unchanged, by display name
	// and uid, for reconcileLocal.
	applied []appliedObject
}

type appliedObject struct{ display, uid string }

func (r *kube) writeCommand(mode, short, long, example string) *cobra.Command {
	var files []string
	a := &applier{r: r, mode: mode}
	cmd := &cobra.Command{
		Use:     mode + " -f FILE|DIR|- [-f ...]",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			docs, err := r.readDocs(files)
			if err != nil {
				return err
			}
			a.w, a.explicit = cmd.OutOrStdout(), cmd.Flags().Changed("namespace")
			return a.run(cmd.Context(), docs)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&files, "filename", "f", nil, "file, directory (its *.yaml, *.yml, *.json) or - (stdin); repeatable")
	fl.StringVarP(&a.namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of objects whose document names none")
	if mode != "create" {
		fl.StringVar(&a.owner, "lock-owner", "", "lock owner, to write objects locked by it")
	}
	addDryRunFlag(cmd)
	return cmd
}

func (r *kube) applyCommand() *cobra.Command {
	return r.writeCommand("apply", "Create or update resources from YAML or JSON files",
		`apply makes the server hold what the documents describe. A directory means its
*.yaml, *.yml and *.json files in name order; "-" reads standard input; a file
may hold several documents (YAML "---", a JSON stream, or a List).

Types (cairn Type, Capact OCF Type, cup ResourceDefinition) are applied first:
a new revision is created, an identical one left unchanged, and a different
definition under an existing revision refused (revisions are immutable).

Objects of a served resource (any apiVersion GROUP/VERSION and kind the server
serves) are created when missing; otherwise their spec, labels and annotations
are made what the document says (a merge patch), or left unchanged when they
already are.

TypeInstance documents (hub.cairn.dev/v1) match an existing instance by
metadata.id, or by Type path, namespace and name. New ones are created in one
atomic batch with the uses relations between them (spec.uses names other
documents by alias, or ids); existing ones get a new resource version when
their value, context, attributes, labels or annotations differ.

In local mode a stack installation is reconciled before apply returns (no
server's stack controller does it): its children are rendered and written,
and apply fails with the reason when they cannot be.`,
		`  cairn apply -f examples/flags/flags.json
  cairn apply -f examples/flags/new-project.yaml
  cairn apply -f examples/quickstart
  cat flag.yaml | cairn apply -f -`)
}

func (r *kube) createCommand() *cobra.Command {
	return r.writeCommand("create", "Create resources from YAML or JSON files",
		`create creates what the documents describe and fails for what exists already.
TypeInstance documents are created in one atomic batch.`,
		`  cairn create -f examples/flags/new-project.yaml`)
}

func (r *kube) replaceCommand() *cobra.Command {
	return r.writeCommand("replace", "Replace resources with the objects of YAML or JSON files",
		`replace puts each object as the document gives it (PUT). A metadata.resourceVersion
in the document must still be the object's, so replacing what someone else
changed since it was read fails with a conflict (exit code 4). Types cannot be
replaced: their revisions are immutable.`,
		`  cairn get flag new-project -o yaml > flag.yaml
  # edit flag.yaml
  cairn replace -f flag.yaml`)
}

// run applies Types first (later documents may be objects of the kinds
// they serve), then the TypeInstance documents as one batch, then the
// objects, printing a line for each as it is done.
func (a *applier) run(ctx context.Context, docs []rdoc) error {
	var errs []error
	for _, d := range docs {
		if d.class != classType {
			continue
		}
		for _, t := range d.types {
			action, err := a.typeDoc(ctx, t)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.raw.Pos, err))
				continue
			}
			if action == "created" {
				a.r.resources = nil // discovery changes with the new Type
			}
			if err := a.line("type."+rest.HubGroup+"/"+rest.TypeName(t.Ref()), action); err != nil {
				return err
			}
		}
	}
	if len(errs) > 0 {
		// Documents of a Type that failed would be checked against the
		// wrong schema, or none: send nothing more.
		return joinErrors(errs)
	}
	if err := a.instances(ctx, docs); err != nil {
		errs = append(errs, err)
	}
	for _, d := range docs {
		if d.class == classObject {
			if err := a.object(ctx, d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := a.reconcileLocal(ctx); err != nil {
		errs = append(errs, err)
	}
	return joinErrors(errs)
}

// record notes an object the server answered a write with.
func (a *applier) record(display string, raw json.RawMessage) {
	if o, err := decodeObject(raw); err == nil {
		a.applied = append(a.applied, appliedObject{display, o.Metadata.UID})
	}
}

// reconcileLocal, in local mode, renders the stack installations the
// documents applied, as cairn serve's stack controller would: no server
// runs one, and an installation nobody reconciles never gets its children
// (cairn install and cairn delete run the controller in process too). An
// installation the controller cannot apply fails the command with the
// reason; it stays applied, as it would against a server.
func (a *applier) reconcileLocal(ctx context.Context) error {
	if a.r.hub == nil || cairn.IsDryRun(ctx) || len(a.applied) == 0 {
		return nil
	}
	var installations []appliedObject
	isInstallation := map[cairn.TypeRef]bool{} // a large apply is mostly of a few Types
	for _, o := range a.applied {
		inst, err := a.r.hub.GetInstance(ctx, o.uid, false)
		if err != nil {
			continue // not an instance: a Type, a namespace, ...
		}
		ok, known := isInstallation[inst.TypeRef]
		if !known {
			if ok, err = a.r.hub.IsInstallationType(ctx, inst.TypeRef); err != nil {
				return err
			}
			isInstallation[inst.TypeRef] = ok
		}
		if ok {
			installations = append(installations, o)
		}
	}
	if len(installations) == 0 {
		return nil
	}
	// Installations whose stack requires others get them installed first,
	// as cairn serve's controller does (install.Runner), which needs the
	// controller running until they are ready.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner := install.NewRunner(rctx, &install.Service{Hub: a.r.hub, Log: slog.New(slog.DiscardHandler)})
	c := stackctl.New(stackctl.Config{Hub: a.r.hub, Dependencies: runner, LeaseDuration: 3 * time.Second})
	var errs []error
	var waiting []appliedObject
	for _, o := range installations {
		err := reconcileTree(ctx, a.r.hub, c, o.uid, 0)
		if errors.Is(err, errDependencies) {
			waiting = append(waiting, o)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: applied, but the stack controller cannot apply it: %w", o.display, err))
		}
	}
	if len(waiting) > 0 {
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Run(rctx) }()
		defer func() { cancel(); <-done }()
		for _, o := range waiting {
			if err := waitDependencies(ctx, a.r.hub, o.uid); err != nil {
				errs = append(errs, fmt.Errorf("%s: applied, but the stack controller cannot apply it: %w", o.display, err))
			}
		}
	}
	return joinErrors(errs)
}

// errDependencies says an installation waits for its dependencies.
var errDependencies = errors.New("waiting for the dependencies")

// dependenciesTimeout bounds how long apply waits, in local mode, for an
// installation's dependencies to be installed and for it to render.
const dependenciesTimeout = 2 * time.Minute

// waitDependencies waits, while the controller runs, until the
// installation id rendered after its dependencies were installed, and
// reports a failure of either.
func waitDependencies(ctx context.Context, h *hub.Hub, id string) error {
	deadline := time.Now().Add(dependenciesTimeout)
	for {
		inst, err := h.GetInstance(ctx, id, false)
		if err != nil {
			return err
		}
		st, err := decodeStatus(inst)
		if err != nil {
			return err
		}
		deps := statusCondition(st, "Dependencies")
		synced := statusCondition(st, "Synced")
		switch {
		case deps != nil && strings.HasPrefix(deps.Message, "installing the dependencies failed"):
			return cairn.Errorf(cairn.CodeInvalid, "%s", deps.Message)
		case (deps == nil || deps.Status == "True") && synced != nil && synced.ObservedGeneration >= int64(inst.Latest.ResourceVersion):
			if synced.Status == "False" {
				return cairn.Errorf(cairn.CodeInvalid, "%s", synced.Message)
			}
			return nil
		}
		if time.Now().After(deadline) {
			msg := "not reconciled"
			if deps != nil {
				msg = deps.Message
			}
			return cairn.Errorf(cairn.CodeUnavailable, "not applied after %s (cairn serve, or apply again, continues it): %s", dependenciesTimeout, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func decodeStatus(inst cairn.Instance) (stackctl.Status, error) {
	var st stackctl.Status
	if err := json.Unmarshal(orEmptyObject(inst.Status), &st); err != nil {
		return st, fmt.Errorf("the status of %s/%s does not decode: %w", inst.Namespace, inst.Name, err)
	}
	return st, nil
}

func statusCondition(st stackctl.Status, typ string) *stackctl.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// maxNesting bounds how deep reconcileTree follows installations that are
// children of installations (the controller refuses ownership cycles).
const maxNesting = 16

// reconcileTree reconciles the installation id, then every child of it
// that is an installation itself (stacks nest), and reports a Synced=False
// of the current generation as an error.
func reconcileTree(ctx context.Context, h *hub.Hub, c *stackctl.Controller, id string, depth int) error {
	if _, err := c.Reconcile(ctx, id); err != nil {
		return err
	}
	inst, err := h.GetInstance(ctx, id, false)
	if err != nil {
		return err
	}
	st, err := decodeStatus(inst)
	if err != nil {
		return err
	}
	if d := statusCondition(st, "Dependencies"); d != nil && d.Status == "False" && depth == 0 {
		return errDependencies
	}
	if c := statusCondition(st, "Synced"); c != nil && c.Status == "False" {
		return cairn.Errorf(cairn.CodeInvalid, "%s", c.Message)
	}
	if depth >= maxNesting {
		return nil
	}
	kids, err := h.Children(ctx, inst)
	if err != nil {
		return err
	}
	for _, kid := range kids {
		k, err := h.GetInstance(ctx, kid, false)
		if err != nil {
			return err
		}
		if ok, err := h.IsInstallationType(ctx, k.TypeRef); err != nil {
			return err
		} else if ok {
			if err := reconcileTree(ctx, h, c, kid, depth+1); err != nil {
				return fmt.Errorf("%s/%s: %w", k.Namespace, k.Name, err)
			}
		}
	}
	return nil
}

func (a *applier) line(name, action string) error {
	_, err := fmt.Fprintf(a.w, "%s %s\n", name, action)
	return err
}

// typeDoc registers one Type revision. apply compares with an existing
// revision as the hub's ApplyType does locally.
func (a *applier) typeDoc(ctx context.Context, t cairn.Type) (string, error) {
	if a.mode == "replace" {
		return "", cairn.Errorf(cairn.CodeInvalid, "Type %s cannot be replaced: Type revisions are immutable; publish a new revision", t.Ref())
	}
	_, err := a.r.c.Create(ctx, client.Types, "", typeDocument(t))
	if err == nil {
		return "created", nil
	}
	if a.mode != "apply" || !cairn.HasCode(err, cairn.CodeAlreadyExists) {
		return "", err
	}
	raw, err := a.r.c.Get(ctx, client.Types, "", rest.TypeName(t.Ref()))
	if err != nil {
		return "", err
	}
	cur := servedType(raw)
	if cur == nil || !sameType(*cur, t) {
		return "", cairn.Errorf(cairn.CodeConflict, "Type %s already exists with a different definition; Type revisions are immutable, publish a new revision", t.Ref())
	}
	return "unchanged", nil
}

// typeDocument is t as a cairn Type document, the form POST types reads
// for every source format: a cup ResourceDefinition is sent one version at
// a time, so each is created or found unchanged on its own.
func typeDocument(t cairn.Type) map[string]any {
	spec := map[string]any{"revision": t.Revision}
	if len(t.AdditionalRefs) > 0 {
		spec["additionalRefs"] = t.AdditionalRefs
	}
	if len(t.JSONSchema) > 0 {
		spec["jsonSchema"] = t.JSONSchema
	}
	if t.Group != "" || t.Names != nil {
		rest := map[string]any{"group": t.Group, "version": t.Version, "names": t.Names}
		if len(t.PrinterColumns) > 0 {
			rest["additionalPrinterColumns"] = t.PrinterColumns
		}
		spec["rest"] = rest
	}
	return map[string]any{"apiVersion": manifest.APIVersion, "kind": string(manifest.KindType),
		"metadata": map[string]any{"name": t.Path}, "spec": spec}
}

func sameType(a, b cairn.Type) bool {
	namesEqual := a.Names == nil && b.Names == nil || a.Names != nil && b.Names != nil &&
		a.Names.Kind == b.Names.Kind && a.Names.Singular == b.Names.Singular && a.Names.Plural == b.Names.Plural &&
		slices.Equal(a.Names.ShortNames, b.Names.ShortNames) && slices.Equal(a.Names.Categories, b.Names.Categories)
	return a.Path == b.Path && a.Revision == b.Revision && slices.Equal(a.AdditionalRefs, b.AdditionalRefs) &&
		slices.Equal(a.PrinterColumns, b.PrinterColumns) &&
		a.Group == b.Group && a.Version == b.Version && namesEqual &&
		(len(a.JSONSchema) == 0 && len(b.JSONSchema) == 0 || cairn.JSONEqual(a.JSONSchema, b.JSONSchema))
}

// docMeta is the metadata of an object document.
type docMeta struct {
	Name            string
	Namespace       string
	ResourceVersion string
	Labels          map[string]string
	Annotations     map[string]string
}

// decodeMeta reads the metadata of an object document. Label and
// annotation values must be strings; YAML reads "team: y" or "replicas: 3"
// as other types, so say how to fix that rather than what JSON refused.
func decodeMeta(raw json.RawMessage) (docMeta, error) {
	var doc struct {
		Metadata struct {
			Name            string                     `json:"name"`
			Namespace       string                     `json:"namespace"`
			ResourceVersion string                     `json:"resourceVersion"`
			Labels          map[string]json.RawMessage `json:"labels"`
			Annotations     map[string]json.RawMessage `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return docMeta{}, cairn.Errorf(cairn.CodeInvalid, "the document's metadata is not valid: %w", err)
	}
	m := doc.Metadata
	meta := docMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}
	var causes []cairn.Cause
	strs := func(field string, in map[string]json.RawMessage) map[string]string {
		if in == nil {
			return nil
		}
		out := make(map[string]string, len(in))
		for _, k := range slices.Sorted(maps.Keys(in)) {
			if err := json.Unmarshal(in[k], new(string)); err != nil {
				causes = append(causes, cairn.Cause{Field: field + "." + k, Message: fmt.Sprintf("must be a string (got %s; quote it)", in[k])})
				continue
			}
			var v string
			_ = json.Unmarshal(in[k], &v)
			out[k] = v
		}
		return out
	}
	meta.Labels = strs("metadata.labels", m.Labels)
	meta.Annotations = strs("metadata.annotations", m.Annotations)
	if len(causes) > 0 {
		return meta, &cairn.Error{Code: cairn.CodeInvalid, Causes: causes, Msg: "invalid document: " + joinCauses(causes)}
	}
	return meta, nil
}

// object sends one object of a served resource.
func (a *applier) object(ctx context.Context, d rdoc) error {
	fail := func(err error) error { return fmt.Errorf("%s: %w", d.raw.Pos, err) }
	res, err := a.r.resourceFor(ctx, d.raw.APIVersion, d.raw.Kind)
	if err != nil {
		return fail(err)
	}
	var doc struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(d.raw.JSON, &doc); err != nil {
		return fail(cairn.Errorf(cairn.CodeInvalid, "not a valid %s object: %w", d.raw.Kind, err))
	}
	meta, err := decodeMeta(d.raw.JSON)
	if err != nil {
		return fail(err)
	}
	name := meta.Name
	if name == "" {
		return fail(cairn.Errorf(cairn.CodeInvalid, "metadata.name is required"))
	}
	ns, err := a.namespaceFor(res, meta.Namespace)
	if err != nil {
		return fail(err)
	}
	display := kindName(res) + "/" + name
	opts := client.WriteOptions{LockOwner: a.owner}
	create := func() error {
		if err := require(res, "create"); err != nil {
			return fail(err)
		}
		raw, err := a.r.c.Create(ctx, res, ns, d.raw.JSON)
		if err != nil {
			return fail(err)
		}
		a.record(display, raw)
		return a.line(display, "created")
	}
	switch a.mode {
	case "create":
		return create()
	case "replace":
		if err := require(res, "update"); err != nil {
			return fail(err)
		}
		raw, err := a.r.c.Replace(ctx, res, ns, name, d.raw.JSON, opts)
		if err != nil {
			return fail(err)
		}
		a.record(display, raw)
		return a.line(display, "replaced")
	}
	raw, err := a.r.c.Get(ctx, res, ns, name)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return create()
	}
	if err != nil {
		return fail(err)
	}
	cur, err := decodeObject(raw)
	if err != nil {
		return fail(err)
	}
	patch, err := objectPatch(cur, meta, doc.Spec)
	if err != nil {
		return fail(err)
	}
	if patch == nil {
		a.applied = append(a.applied, appliedObject{display, cur.Metadata.UID})
		return a.line(display, "unchanged")
	}
	if err := require(res, "patch"); err != nil {
		return fail(err)
	}
	raw, err = a.r.c.Patch(ctx, res, ns, name, client.MergePatch, patch, opts)
	if err != nil {
		return fail(err)
	}
	a.record(display, raw)
	return a.line(display, "configured")
}

// objectPatch is the merge patch that makes cur's spec, labels and
// annotations those of the document (the document is the desired state:
// what it leaves out is removed), or nil when they already are. The
// backend annotations are not stored: the backend cannot change after
// create, and the context one is compared with the context in status.
func objectPatch(cur object, meta docMeta, spec json.RawMessage) ([]byte, error) {
	var st rest.ObjectStatus
	if len(cur.Status) > 0 {
		if err := json.Unmarshal(cur.Status, &st); err != nil {
			return nil, fmt.Errorf("the server's status does not decode: %w", err)
		}
	}
	ann := maps.Clone(meta.Annotations)
	ctxAnn, hasCtx := ann[rest.AnnotationBackendContext]
	delete(ann, rest.AnnotationBackend)
	delete(ann, rest.AnnotationBackendContext)
	from, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": nonNilMap(cur.Metadata.Labels), "annotations": nonNilMap(cur.Metadata.Annotations)},
		"spec":     orEmptyObject(cur.Spec),
	})
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"labels": nonNilMap(meta.Labels), "annotations": nonNilMap(ann)},
		"spec":     orEmptyObject(spec),
	})
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("compare with the server's object: %w", err)
	}
	if hasCtx && !cairn.JSONEqual(json.RawMessage(ctxAnn), st.Backend.Context) {
		var m map[string]any
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		md, _ := m["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			m["metadata"] = md
		}
		a, _ := md["annotations"].(map[string]any)
		if a == nil {
			a = map[string]any{}
			md["annotations"] = a
		}
		a[rest.AnnotationBackendContext] = ctxAnn
		if p, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	if string(p) == "{}" {
		return nil, nil
	}
	return p, nil
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// namespaceFor is the namespace an object document goes to.
func (a *applier) namespaceFor(res client.Resource, docNS string) (string, error) {
	if !res.Namespaced {
		return "", nil
	}
	if docNS != "" && a.explicit && docNS != a.namespace {
		return "", cairn.Errorf(cairn.CodeInvalid, "the namespace from the provided object %q does not match the namespace %q; pass --namespace=%s or leave -n out", docNS, a.namespace, docNS)
	}
	return cmp.Or(docNS, a.namespace, cairn.DefaultNamespace), nil
}

// tiName names a TypeInstance in output lines.
func tiName(id, namespace, name string) string {
	return fmt.Sprintf("typeinstance.%s/%s (%s)", rest.HubGroup, id, refOf(namespace, name, id))
}

// instances sends the TypeInstance documents, deciding with the local
// apply's rules (aliases, duplicates, what may change) on instances read
// from the server.
func (a *applier) instances(ctx context.Context, docs []rdoc) error {
	var plans []*plan
	rvs := map[*plan]string{}
	for _, d := range docs {
		if d.class == classInstance {
			p := &plan{doc: manifest.Document{Pos: d.raw.Pos, Kind: manifest.KindTypeInstance, Instance: d.inst}, in: d.inst}
			plans = append(plans, p)
			rvs[p] = d.rv
		}
	}
	if len(plans) == 0 {
		return nil
	}
	byAlias, err := assignAliases(plans)
	if err != nil {
		return err
	}
	if err := checkDuplicates(plans); err != nil {
		return err
	}
	if err := a.resolveBackendAliases(ctx, plans); err != nil {
		return err
	}
	current := map[*plan]rest.TypeInstanceObject{}
	if a.mode != "create" {
		var errs []error
		for _, p := range plans {
			cur, found, err := a.match(ctx, p)
			switch {
			case err != nil:
				errs = append(errs, err)
			case !found && a.mode == "replace":
				errs = append(errs, p.errorf(cairn.CodeNotFound, "no TypeInstance to replace: %s", describeDoc(p.in)))
			case found:
				current[p] = cur
			}
		}
		if len(errs) > 0 {
			return joinErrors(errs)
		}
	}

	var errs []error
	var created []*plan
	var batch []map[string]any
	for _, p := range plans {
		if p.existing != nil {
			if a.mode == "apply" {
				if err := p.checkUses(byAlias); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if len(p.in.Uses) > 0 && p.alias == "" {
			errs = append(errs, p.errorf(cairn.CodeInvalid,
				"spec.uses needs the document to have an alias within the apply: set metadata.alias (metadata.name is shared with another document)"))
			continue
		}
		uses := make([]string, len(p.in.Uses))
		for i, u := range p.in.Uses {
			uses[i] = u
			if t, ok := byAlias[u]; ok && t.existing != nil {
				uses[i] = t.existing.ID
			}
		}
		batch = append(batch, instanceDocument(p.in, p.alias, uses))
		created = append(created, p)
	}
	if len(errs) > 0 {
		return joinErrors(errs)
	}

	if len(batch) > 0 {
		out, err := a.createBatch(ctx, batch)
		if err != nil {
			return fmt.Errorf("create TypeInstances: %w", err)
		}
		if len(out) != len(created) {
			return fmt.Errorf("create TypeInstances: the server answered with %d TypeInstances for %d documents", len(out), len(created))
		}
		// The server answers in request order.
		for i := range created {
			if err := a.line(tiName(out[i].Metadata.UID, out[i].Spec.Namespace, out[i].Spec.Name), withProposal("created", out[i].Spec.Backend.Context)); err != nil {
				return err
			}
		}
	}
	for _, p := range plans {
		cur, ok := current[p]
		if !ok {
			continue
		}
		name := tiName(cur.Metadata.UID, cur.Spec.Namespace, cur.Spec.Name)
		rv, action := cur.Metadata.ResourceVersion, "configured"
		switch {
		case a.mode == "replace":
			// The document's resourceVersion, so a stale one conflicts.
			rv, action = rvs[p], "replaced"
		case p.update == nil:
			if err := a.line(name, "unchanged"); err != nil {
				return err
			}
			continue
		}
		body := replacement(cur, p.in, rv)
		raw, err := a.r.c.Replace(ctx, client.TypeInstances, "", cur.Metadata.UID, body, client.WriteOptions{LockOwner: a.owner})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.doc.Pos, err))
			continue
		}
		var written rest.TypeInstanceObject
		if json.Unmarshal(raw, &written) == nil {
			action = withProposal(action, written.Spec.Backend.Context)
		}
		if err := a.line(name, action); err != nil {
			return err
		}
	}
	return joinErrors(errs)
}

// describeDoc names what a TypeInstance document refers to.
func describeDoc(in *manifest.Instance) string {
	if in.ID != "" {
		return "metadata.id " + in.ID
	}
	return fmt.Sprintf("%s %s", in.TypeRef.Path, refOf(in.Namespace, in.Name, ""))
}

// match finds the instance a document refers to and decides what to do
// with it.
func (a *applier) match(ctx context.Context, p *plan) (rest.TypeInstanceObject, bool, error) {
	cur, found, err := a.r.lookup(ctx, p, true)
	if err != nil || !found {
		return cur, found, err
	}
	return cur, true, p.decide(instanceOf(cur), a.owner)
}

// lookup finds the instance a document refers to, as local apply does: by
// metadata.id, else by Type path, namespace and name; with its value when
// withValue (found by name, it is read from its backend only then).
func (r *kube) lookup(ctx context.Context, p *plan, withValue bool) (rest.TypeInstanceObject, bool, error) {
	in := p.in
	var cur rest.TypeInstanceObject
	switch {
	case in.ID != "":
		raw, err := r.c.Get(ctx, client.TypeInstances, "", in.ID)
		if in.Served && cairn.HasCode(err, cairn.CodeNotFound) {
			return cur, false, nil // created again under its id
		}
		if err != nil {
			return cur, false, fmt.Errorf("%s: metadata.id: %w", p.doc.Pos, err)
		}
		if err := json.Unmarshal(raw, &cur); err != nil {
			return cur, false, fmt.Errorf("%s: the server's TypeInstance does not decode: %w", p.doc.Pos, err)
		}
	case in.Name != "":
		// Listed without values, then read by id: a list's values are
		// redacted (the marker, sent back, would replace a password) and
		// read from every instance's backend, so one of another Type in a
		// backend that is down failed the lookup.
		ns := cmp.Or(in.Namespace, cairn.DefaultNamespace)
		l, err := r.c.ListAll(ctx, client.TypeInstances, "", client.ListOptions{
			FieldSelector: "spec.name=" + in.Name + ",spec.namespace=" + ns,
			Extra:         url.Values{"values": {"false"}, "typePath": {in.TypeRef.Path}}})
		if err != nil {
			return cur, false, fmt.Errorf("%s: %w", p.doc.Pos, err)
		}
		found := false
		for _, raw := range l.Items {
			var o rest.TypeInstanceObject
			if json.Unmarshal(raw, &o) == nil && o.Spec.TypeRef.Path == in.TypeRef.Path {
				cur, found = o, true
				break
			}
		}
		if !found || !withValue {
			return cur, found, nil
		}
		raw, err := r.c.Get(ctx, client.TypeInstances, "", cur.Metadata.UID)
		if err != nil {
			return cur, false, fmt.Errorf("%s: %w", p.doc.Pos, err)
		}
		cur = rest.TypeInstanceObject{}
		if err := json.Unmarshal(raw, &cur); err != nil {
			return cur, false, fmt.Errorf("%s: the server's TypeInstance does not decode: %w", p.doc.Pos, err)
		}
	default:
		return cur, false, nil
	}
	return cur, true, nil
}

// instanceOf is what the server shows of an instance, as the hub's type,
// for the decisions shared with local mode.
func instanceOf(o rest.TypeInstanceObject) cairn.Instance {
	return cairn.Instance{
		ID: o.Metadata.UID, TypeRef: o.Spec.TypeRef, Namespace: o.Spec.Namespace, Name: o.Spec.Name, Alias: o.Spec.Alias,
		Labels: o.Metadata.Labels, Annotations: o.Metadata.Annotations,
		Backend:  cairn.BackendRef{ID: o.Spec.Backend.ID, Abstract: o.Spec.Backend.Abstract},
		LockedBy: o.Status.LockedBy, Uses: o.Status.Uses, UsedBy: o.Status.UsedBy,
		Latest: cairn.ResourceVersion{ResourceVersion: o.Status.ResourceVersion, Value: o.Spec.Value,
			Context: o.Spec.Backend.Context, Attributes: o.Spec.Attributes},
	}
}

// replacement is the object PUT typeinstances/{id} takes for the document:
// the current object with what the document sets. A value or context the
// document leaves out is carried over, labels, annotations and attributes
// are the document's, as in local mode.
func replacement(cur rest.TypeInstanceObject, in *manifest.Instance, rv string) rest.TypeInstanceObject {
	o := cur
	o.Metadata.ResourceVersion = rv
	o.Metadata.Labels, o.Metadata.Annotations = in.Labels, in.Annotations
	o.Spec.Attributes = in.Attributes
	// Left out, the server carries them over; the current value sent
	// back could be a redacted one (a caller without reveal reads the
	// marker in place of each secret).
	o.Spec.Value, o.Spec.Backend.Context = in.Value, nil
	if in.Backend != nil {
		o.Spec.Backend.Context = in.Backend.Context
	}
	return o
}

// instanceDocument is a TypeInstance document as POST typeinstances reads
// it, with the alias the apply gave it and its uses resolved.
func instanceDocument(in *manifest.Instance, alias string, uses []string) map[string]any {
	meta := map[string]any{"name": in.Name}
	for k, v := range map[string]string{"namespace": in.Namespace, "alias": alias} {
		if v != "" {
			meta[k] = v
		}
	}
	if in.Labels != nil {
		meta["labels"] = in.Labels
	}
	if in.Annotations != nil {
		meta["annotations"] = in.Annotations
	}
	spec := map[string]any{"typeRef": in.TypeRef}
	if in.Value != nil {
		spec["value"] = in.Value
	}
	if len(in.Attributes) > 0 {
		spec["attributes"] = in.Attributes
	}
	if b := in.Backend; b != nil {
		bm := map[string]any{"id": b.ID}
		if b.Context != nil {
			bm["context"] = b.Context
		}
		if b.Abstract {
			bm["abstract"] = true
		}
		spec["backend"] = bm
	}
	doc := map[string]any{"apiVersion": manifest.APIVersion, "kind": string(manifest.KindTypeInstance), "metadata": meta, "spec": spec}
	if in.Served {
		// A served TypeInstance whose instance is gone (deleted, or on
		// another hub) is sent in the form it was served in, so the server
		// creates it again under its id.
		for _, k := range []string{"name", "namespace", "alias"} {
			if v, ok := meta[k]; ok {
				spec[k] = v
				delete(meta, k)
			}
		}
		meta["name"], meta["uid"] = in.ID, in.ID
		doc["status"] = map[string]any{"uses": uses}
		return doc
	}
	if len(uses) > 0 {
		spec["uses"] = uses
	}
	return doc
}

// createBatch creates the documents in one request, hence one hub batch.
func (a *applier) createBatch(ctx context.Context, batch []map[string]any) ([]rest.TypeInstanceObject, error) {
	var body any = batch[0]
	if len(batch) > 1 {
		body = map[string]any{"apiVersion": "v1", "kind": "List", "items": batch}
	}
	raw, err := a.r.c.Create(ctx, client.TypeInstances, "", body)
	if err != nil {
		return nil, err
	}
	var list struct {
		Kind  string                    `json:"kind"`
		Items []rest.TypeInstanceObject `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("the server's answer does not decode: %w", err)
	}
	if list.Kind == "TypeInstanceList" {
		return list.Items, nil
	}
	var one rest.TypeInstanceObject
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, fmt.Errorf("the server's answer does not decode: %w", err)
	}
	return []rest.TypeInstanceObject{one}, nil
}

// resolveBackendAliases replaces a spec.backend.id that is not a UUID with
// the id of the backend that has that alias, as local apply does.
func (a *applier) resolveBackendAliases(ctx context.Context, plans []*plan) error {
	var errs []error
	for _, p := range plans {
		b := p.in.Backend
		if b == nil || b.ID == "" || uuid.Validate(b.ID) == nil {
			continue
		}
		aliases, err := a.r.backendAliasMap(ctx)
		if err != nil {
			return err
		}
		var ids []string
		for id, alias := range aliases {
			if alias == b.ID {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		switch len(ids) {
		case 1:
			b.ID = ids[0]
		case 0:
			errs = append(errs, p.errorf(cairn.CodeNotFound, "spec.backend.id %q is neither an id nor the alias of a storage backend", b.ID))
		default:
			errs = append(errs, p.errorf(cairn.CodeInvalid, "spec.backend.id %q is the alias of several storage backends (%s); use an id", b.ID, cairn.QuoteIDs(ids)))
		}
	}
	return joinErrors(errs)
}
