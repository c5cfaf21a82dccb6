package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/stack"
	"github.com/cairn-dev/cairn/store"
)

// stackAPI is what `cairn stack` and `cairn trace` need, served by the
// hub in local mode and by a server's REST API in client mode. (Written
// for both until the CLI has its one client interface.)
type stackAPI interface {
	AddStack(ctx context.Context, archive []byte) (hub.StackEntry, bool, error)
	ListStacks(ctx context.Context) ([]hub.StackEntry, error)
	GetStack(ctx context.Context, name, version string) (hub.StackEntry, error)
	// Installation finds an installation by KIND/NAME (KIND: kind,
	// plural, singular or short name) and returns it as served over REST.
	Installation(ctx context.Context, kind, namespace, name string) (installationView, error)
}

// installationView is an installation as trace shows it.
type installationView struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	UID        string          `json:"uid"`
	Backend    string          `json:"backend"`
	Status     stackctl.Status `json:"-"`
}

// stackCommands returns `stack` and `trace`. output points at the output
// format; defineOutput declares -o on them (client mode has no global
// -o).
func stackCommands(api func(ctx context.Context, fn func(stackAPI) error) error, output *string, defineOutput bool) []*cobra.Command {
	stackCmd := &cobra.Command{
		Use:   "stack",
		Short: "Add stack packages to the catalog and show them",
		Long: `A stack is a package of resource templates (a kustomize base) with high-level
parameters: adding one registers its installation kind, and each instance of
that kind (an installation) is rendered, applied and kept in line by the
stack controller of cairn serve.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	add := &cobra.Command{
		Use:   "add PATH|GIT-URL@REF|FILE.tgz",
		Short: "Add a stack package to the catalog and register its installation kind",
		Example: `  cairn stack add examples/stacks/minimal-gcp
  cairn stack add examples/stacks/sql-env
  cairn stack add minimal-gcp-0.1.0.tgz
  cairn stack add https://github.com/org/stacks.git@v0.1.0//minimal-gcp`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := stack.Load(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			archive, err := s.Archive()
			if err != nil {
				return err
			}
			return api(cmd.Context(), func(a stackAPI) error {
				e, added, err := a.AddStack(cmd.Context(), archive)
				if err != nil {
					return err
				}
				verb := "added"
				if !added {
					verb = "unchanged"
				}
				k := e.Manifest.Kind
				sets := ""
				if c := e.Manifest.Configurations; c != nil {
					sets = fmt.Sprintf("; configuration sets (spec.%s): %s (default %s)", c.Field, strings.Join(setNames(c), ", "), c.Default)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "stack %s@%s %s (%s); installations: kind %s, apiVersion %s/%s, resource %s%s\n",
					e.Name, e.Version, verb, e.Digest, k.Names.Kind, k.Group, k.Version, pluralOf(e), sets)
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use:     "list",
		Short:   "List the stacks of the catalog",
		Example: `  cairn stack list`,
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return api(cmd.Context(), func(a stackAPI) error {
				all, err := a.ListStacks(cmd.Context())
				if err != nil {
					return err
				}
				if done, err := printStackData(cmd.OutOrStdout(), *output, all); done {
					return err
				}
				t := newTable(cmd.OutOrStdout(), "NAME", "VERSION", "KIND", "APIVERSION", "DIGEST", "DESCRIPTION")
				for _, e := range all {
					k := e.Manifest.Kind
					t.row(e.Name, e.Version, k.Names.Kind, k.Group+"/"+k.Version, shortDigest(e.Digest), e.Description)
				}
				return t.flush()
			})
		},
	}
	show := &cobra.Command{
		Use:   "show NAME[@VERSION]",
		Short: "Show a stack of the catalog (the highest release unless a version is given)",
		Example: `  cairn stack show minimal-gcp
  cairn stack show minimal-gcp@0.1.0 -o yaml
  cairn stack show sql-env`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, _ := strings.Cut(args[0], "@")
			return api(cmd.Context(), func(a stackAPI) error {
				e, err := a.GetStack(cmd.Context(), name, version)
				if err != nil {
					return err
				}
				e.Archive = nil
				if done, err := printStackData(cmd.OutOrStdout(), *output, e); done {
					return err
				}
				return printStack(cmd.OutOrStdout(), e)
			})
		},
	}
	stackCmd.AddCommand(add, list, show)

	var namespace string
	trace := &cobra.Command{
		Use:   "trace KIND/NAME",
		Short: "Show an installation's children: backend, Synced, Ready and why not",
		Long: `trace shows the installation and every instance it owns (its children), with
the backend each is stored in, whether it matches the render (SYNCED), whether
its readiness checks pass (READY) and, for anything not ready, the first
reason. -o json prints the same as JSON.`,
		Example: `  cairn trace minimalgcp/small-infra
  cairn trace minimalgcps/small-infra -n team-a -o json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok || kind == "" || name == "" {
				return usageErrorf("trace takes KIND/NAME, e.g. minimalgcp/small-infra (got %q)", args[0])
			}
			return api(cmd.Context(), func(a stackAPI) error {
				v, err := a.Installation(cmd.Context(), kind, namespace, name)
				if err != nil {
					return err
				}
				return printTrace(cmd.OutOrStdout(), *output, v)
			})
		},
	}
	trace.Flags().StringVarP(&namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of the installation")
	if defineOutput {
		for _, c := range []*cobra.Command{list, show, trace} {
			c.Flags().StringVarP(output, "output", "o", "table", "output format: table, json or yaml")
		}
	}
	return []*cobra.Command{stackCmd, trace}
}

// pluralOf is the resource e's installations are served as: the hub fills
// in the registered plural where the manifest gives none.
func pluralOf(e hub.StackEntry) string {
	n := e.Manifest.Kind.Names
	if n.Plural != "" {
		return n.Plural
	}
	return cairn.PluralForKind(n.Kind)
}

func setNames(c *stack.Configurations) []string {
	out := make([]string, len(c.Sets))
	for i, s := range c.Sets {
		out[i] = s.Name
	}
	return out
}

func shortDigest(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// printAs writes v as JSON or YAML when asked; false for tables.
func printStackData(w io.Writer, output string, v any) (bool, error) {
	a := &app{output: output}
	return a.printData(w, v)
}

func printStack(w io.Writer, e hub.StackEntry) error {
	k := e.Manifest.Kind
	fmt.Fprintf(w, "Name:         %s\nVersion:      %s\nDigest:       %s\n", e.Name, e.Version, e.Digest)
	if e.Description != "" {
		fmt.Fprintf(w, "Description:  %s\n", e.Description)
	}
	fmt.Fprintf(w, "Kind:         %s (%s/%s, resource %s)\nType:         %s\n", k.Names.Kind, k.Group, k.Version, pluralOf(e), e.InstallationType)
	if len(k.Parameters) > 0 {
		var sch struct {
			Properties map[string]struct {
				Type        any    `json:"type"`
				Description string `json:"description"`
			} `json:"properties"`
			Required []string `json:"required"`
		}
		_ = json.Unmarshal(k.Parameters, &sch)
		names := make([]string, 0, len(sch.Properties))
		for n := range sch.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintln(w, "Parameters:")
		for _, n := range names {
			p := sch.Properties[n]
			req := ""
			if slices.Contains(sch.Required, n) {
				req = " (required)"
			}
			fmt.Fprintf(w, "  %s\t%v%s\t%s\n", n, p.Type, req, p.Description)
		}
	}
	if c := e.Manifest.Configurations; c != nil {
		fmt.Fprintf(w, "Configuration sets (spec.%s, default %s):\n", c.Field, c.Default)
		for _, set := range c.Sets {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", set.Name, set.Path, set.Description)
		}
	}
	if len(e.Manifest.Outputs) > 0 {
		fmt.Fprintln(w, "Outputs:")
		for _, o := range e.Manifest.Outputs {
			fmt.Fprintf(w, "  %s\t%s\n", o.Name, o.Value)
		}
	}
	return nil
}

// traceJSON is trace's -o json.
type traceJSON struct {
	Installation traceRow   `json:"installation"`
	Children     []traceRow `json:"children"`
}

type traceRow struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
	Backend    string `json:"backend,omitempty"`
	Synced     string `json:"synced"`
	Ready      string `json:"ready"`
	Reason     string `json:"reason,omitempty"`
}

func condStatus(st stackctl.Status, t string) (status, reason string) {
	for _, c := range st.Conditions {
		if c.Type == t {
			r := c.Message
			if r == "" {
				r = c.Reason
			}
			return c.Status, r
		}
	}
	return "Unknown", ""
}

func boolStatus(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func printTrace(w io.Writer, output string, v installationView) error {
	synced, sreason := condStatus(v.Status, "Synced")
	ready, rreason := condStatus(v.Status, "Ready")
	reason := ""
	// Synced is not there before the first render (an installation
	// waiting for its dependencies): Ready's reason says why then.
	switch {
	case synced == "False":
		reason = sreason
	case ready != "True" && rreason != "":
		reason = rreason
	case synced != "True":
		reason = sreason
	}
	if del, dreason := condStatus(v.Status, "Deleting"); del != "Unknown" {
		reason = "deleting: " + dreason
	}
	out := traceJSON{Installation: traceRow{APIVersion: v.APIVersion, Kind: v.Kind, Namespace: v.Namespace, Name: v.Name, UID: v.UID,
		Backend: backendLabel(v.Backend), Synced: synced, Ready: ready, Reason: reason}, Children: []traceRow{}}
	for _, r := range v.Status.Resources {
		out.Children = append(out.Children, traceRow{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID,
			Backend: r.Backend, Synced: boolStatus(r.Synced), Ready: boolStatus(r.Ready), Reason: firstReason(r.Reason)})
	}
	if done, err := printStackData(w, output, out); done {
		return err
	}
	t := newTable(w, "NAME", "KIND", "BACKEND", "SYNCED", "READY", "REASON")
	i := out.Installation
	t.row(i.Name, i.Kind, i.Backend, i.Synced, i.Ready, firstReason(i.Reason))
	for n, c := range out.Children {
		branch := "├─ "
		if n == len(out.Children)-1 {
			branch = "└─ "
		}
		t.row(branch+c.Name, c.Kind, c.Backend, c.Synced, c.Ready, c.Reason)
	}
	return t.flush()
}

// firstReason is the first of the reasons a readiness message joins.
func firstReason(r string) string {
	first, _, _ := strings.Cut(r, "; ")
	return first
}

// hubStacks is stackAPI in local mode.
type hubStacks struct{ h *hub.Hub }

func (s hubStacks) AddStack(ctx context.Context, archive []byte) (hub.StackEntry, bool, error) {
	return s.h.AddStack(ctx, archive)
}

func (s hubStacks) ListStacks(ctx context.Context) ([]hub.StackEntry, error) {
	return s.h.ListStacks(ctx)
}

func (s hubStacks) GetStack(ctx context.Context, name, version string) (hub.StackEntry, error) {
	return s.h.GetStack(ctx, name, version)
}

func (s hubStacks) Installation(ctx context.Context, kind, namespace, name string) (installationView, error) {
	types, err := s.h.ListTypes(ctx, store.TypeFilter{})
	if err != nil {
		return installationView{}, err
	}
	k := strings.ToLower(kind)
	for _, t := range types {
		if t.Names == nil {
			continue
		}
		n := t.Names
		if !(strings.ToLower(n.Kind) == k || n.Plural == k || n.Singular == k || slices.Contains(n.ShortNames, k)) {
			continue
		}
		if t.ClusterScoped() {
			namespace = "" // -n is ignored, as kubectl ignores it
		}
		inst, err := s.h.GetInstanceByName(ctx, t.Path, namespace, name, false)
		if err != nil {
			return installationView{}, err
		}
		v := installationView{APIVersion: t.Group + "/" + t.Version, Kind: n.Kind, Namespace: inst.Namespace, Name: inst.Name, UID: inst.ID, Backend: inst.Backend.ID}
		if len(inst.Status) > 0 {
			_ = json.Unmarshal(inst.Status, &v.Status)
		}
		v.nameBackends(func(id string) string {
			sb, err := s.h.StorageBackend(ctx, id)
			if err != nil {
				return ""
			}
			return sb.Alias
		})
		return v, nil
	}
	return installationView{}, cairn.Errorf(cairn.CodeNotFound, "no Type serves the kind %q", kind)
}

// restStacks is stackAPI in client mode.
type restStacks struct{ c *client.Client }

func fromStackObject(o rest.StackObject) (hub.StackEntry, error) {
	e := hub.StackEntry{Name: o.Spec.Name, Version: o.Spec.Version, Description: o.Spec.Description, Digest: o.Spec.Digest, ID: o.Metadata.UID}
	if o.Spec.InstallationType != nil {
		e.InstallationType = *o.Spec.InstallationType
	}
	if len(o.Spec.Manifest) > 0 {
		if err := json.Unmarshal(o.Spec.Manifest, &e.Manifest); err != nil {
			return e, fmt.Errorf("stack %s: the server's manifest: %w", o.Metadata.Name, err)
		}
	}
	return e, nil
}

func (s restStacks) AddStack(ctx context.Context, archive []byte) (hub.StackEntry, bool, error) {
	o, added, err := s.c.AddStack(ctx, archive)
	if err != nil {
		return hub.StackEntry{}, false, err
	}
	e, err := fromStackObject(o)
	return e, added, err
}

func (s restStacks) ListStacks(ctx context.Context) ([]hub.StackEntry, error) {
	objs, err := s.c.ListStacks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]hub.StackEntry, 0, len(objs))
	for _, o := range objs {
		e, err := fromStackObject(o)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (s restStacks) GetStack(ctx context.Context, name, version string) (hub.StackEntry, error) {
	o, err := s.c.GetStack(ctx, name, version)
	if err != nil {
		return hub.StackEntry{}, err
	}
	return fromStackObject(o)
}

func (s restStacks) Installation(ctx context.Context, kind, namespace, name string) (installationView, error) {
	res, err := s.c.FindResource(ctx, kind)
	if err != nil {
		return installationView{}, err
	}
	raw, err := s.c.Get(ctx, res, namespaceOf(res, namespace), name)
	if err != nil {
		return installationView{}, err
	}
	var o struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		Metadata   rest.ObjectMeta `json:"metadata"`
		Status     json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return installationView{}, fmt.Errorf("%s/%s: %w", kind, name, err)
	}
	v := installationView{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Metadata.Namespace, Name: o.Metadata.Name, UID: o.Metadata.UID}
	if len(o.Status) > 0 {
		var hubPart struct {
			Backend struct {
				ID string `json:"id"`
			} `json:"backend"`
		}
		_ = json.Unmarshal(o.Status, &hubPart)
		v.Backend = hubPart.Backend.ID
		_ = json.Unmarshal(o.Status, &v.Status)
	}
	v.nameBackends(func(id string) string {
		raw, err := s.c.Get(ctx, client.Backends, "", id)
		if err != nil {
			return "" // one who may not get the backend sees its id
		}
		var b rest.BackendObject
		_ = json.Unmarshal(raw, &b)
		return b.Spec.Alias
	})
	return v, nil
}

// nameBackends replaces the backend ids of v's children (the stack
// controller records ids: an alias is for those who may get the backend)
// by the aliases alias finds, asking once per backend.
func (v *installationView) nameBackends(alias func(id string) string) {
	names := map[string]string{}
	for i, r := range v.Status.Resources {
		if r.Backend == "" || r.Backend == cairn.BuiltinBackendAlias {
			continue
		}
		name, ok := names[r.Backend]
		if !ok {
			name = cmp.Or(alias(r.Backend), r.Backend)
			names[r.Backend] = name
		}
		v.Status.Resources[i].Backend = name
	}
}

// backendLabel names the built-in backend by its alias, as the controller
// names the children's backends, so the installation's row reads the same.
func backendLabel(id string) string {
	if id == cairn.BuiltinBackendID {
		return cairn.BuiltinBackendAlias
	}
	return id
}
