package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

func (a *app) getCommand() *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "get ID | get TYPEPATH NAME [-n NAMESPACE]",
		Short: "Show one TypeInstance with its value",
		Long: `Get shows one TypeInstance and its latest value, read from its storage backend.
Name it by id, or by Type path and name within a namespace.`,
		Example: `  cairn get 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10
  cairn get cap.type.database.postgresql.config db-config -n default -o yaml`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h *hub.Hub) error {
			ctx := cmd.Context()
			var inst cairn.Instance
			var err error
			if len(args) == 1 {
				inst, err = h.GetInstance(ctx, args[0], true)
			} else {
				inst, err = h.GetInstanceByName(ctx, args[0], namespace, args[1], true)
			}
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), inst); printed {
				return err
			}
			return a.instanceTable(ctx, cmd.OutOrStdout(), h, []cairn.Instance{inst}, true)
		}),
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of the TypeInstance named by TYPEPATH NAME")
	return cmd
}

func (a *app) listCommand() *cobra.Command {
	var (
		typeRef, createdBy, namespace, selector string
		attrs, excluded                         []string
		values                                  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List TypeInstances",
		Long: `List lists TypeInstances, sorted by Type path, revision (newest first) and
creation time (newest first). Filters combine with AND.

--type takes PATH or PATH:REVISION; a PATH ending in ".*" matches every Type
below it. --attribute and --exclude-attribute take PATH or PATH:REVISION and
look at the latest resource version. -l takes a Kubernetes label selector.`,
		Example: `  cairn list
  cairn list --type 'cap.type.database.*' -n default
  cairn list -l 'env=prod,tier in (db,cache)' --values -o json
  cairn list --attribute cap.core.attribute.hub.storage.backend`,
		Args: usageArgs(cobra.NoArgs),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h *hub.Hub) error {
			f := store.InstanceFilter{CreatedBy: createdBy, Namespace: namespace}
			if typeRef != "" {
				f.TypePath, f.TypeRevision = splitRef(typeRef)
			}
			for _, s := range attrs {
				p, r := splitRef(s)
				f.Attributes = append(f.Attributes, store.AttributeFilter{Path: p, Revision: r})
			}
			for _, s := range excluded {
				p, r := splitRef(s)
				f.Attributes = append(f.Attributes, store.AttributeFilter{Path: p, Revision: r, Exclude: true})
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return cairn.Errorf(cairn.CodeInvalid, "--selector: %w", err)
			}
			f.Labels = sel

			ctx := cmd.Context()
			list, err := h.ListInstances(ctx, f, values)
			if err != nil {
				return err
			}
			if list == nil {
				list = []cairn.Instance{} // [] rather than null in JSON
			}
			if printed, err := a.printData(cmd.OutOrStdout(), list); printed {
				return err
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No TypeInstances found.")
				return nil
			}
			return a.instanceTable(ctx, cmd.OutOrStdout(), h, list, values)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&typeRef, "type", "", "Type PATH[:REVISION]; PATH may end in .*")
	fl.StringArrayVar(&attrs, "attribute", nil, "attribute PATH[:REVISION] the latest version must have; repeatable")
	fl.StringArrayVar(&excluded, "exclude-attribute", nil, "attribute PATH[:REVISION] the latest version must not have; repeatable")
	fl.StringVar(&createdBy, "created-by", "", "createdBy of the latest resource version")
	fl.StringVarP(&namespace, "namespace", "n", "", "namespace (default: all namespaces)")
	fl.StringVarP(&selector, "selector", "l", "", "label selector, e.g. env=prod,tier!=db")
	fl.BoolVar(&values, "values", false, "read and show each latest value")
	return cmd
}

// splitRef splits PATH[:REVISION].
func splitRef(s string) (path, revision string) {
	path, revision, _ = strings.Cut(s, ":")
	return path, revision
}

// instanceTable prints instances as kubectl-like rows.
func (a *app) instanceTable(ctx context.Context, w io.Writer, h *hub.Hub, list []cairn.Instance, values bool) error {
	header := []string{"ID", "NAMESPACE", "NAME", "TYPE", "VERSION", "BACKEND", "LOCKED BY", "AGE"}
	if values {
		header = append(header, "VALUE")
	}
	t := newTable(w, header...)
	names := backendNames{h: h, alias: map[string]string{}}
	now := a.env.Now()
	for _, inst := range list {
		row := []string{inst.ID, inst.Namespace, inst.Name, inst.TypeRef.String(),
			strconv.Itoa(inst.Latest.ResourceVersion), names.get(ctx, inst.Backend.ID),
			inst.LockedBy, age(now, inst.CreatedAt)}
		if values {
			row = append(row, compactJSON(inst.Latest.Value))
		}
		t.row(row...)
	}
	return t.flush()
}

// backendNames shows a backend by its alias when it has one.
type backendNames struct {
	h     *hub.Hub
	alias map[string]string
}

func (b *backendNames) get(ctx context.Context, id string) string {
	if name, ok := b.alias[id]; ok {
		return name
	}
	name := id
	if inst, err := b.h.GetInstance(ctx, id, false); err == nil && inst.Alias != "" {
		name = inst.Alias
	}
	b.alias[id] = name
	return name
}

// description is what describe shows; -o json/yaml print it as is.
type description struct {
	Instance         cairn.Instance          `json:"instance"`
	Backend          backendInfo             `json:"backend"`
	Uses             []related               `json:"uses"`
	UsedBy           []related               `json:"usedBy"`
	ResourceVersions []cairn.ResourceVersion `json:"resourceVersions"`
}

type backendInfo struct {
	ID          string `json:"id"`
	Alias       string `json:"alias,omitempty"`
	URL         string `json:"url,omitempty"`
	AcceptValue bool   `json:"acceptValue"`
	Abstract    bool   `json:"abstract"`
	// Error says why the backend could not be resolved.
	Error string `json:"error,omitempty"`
}

type related struct {
	ID        string        `json:"id"`
	TypeRef   cairn.TypeRef `json:"typeRef"`
	Namespace string        `json:"namespace,omitempty"`
	Name      string        `json:"name,omitempty"`
}

func (a *app) describeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe ID",
		Short: "Show a TypeInstance in detail: backend, lock, relations and every resource version",
		Example: `  cairn describe 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10
  cairn describe 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 -o yaml`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h *hub.Hub) error {
			d, err := describe(cmd.Context(), h, args[0])
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), d); printed {
				return err
			}
			return a.printDescription(cmd.OutOrStdout(), d)
		}),
	}
}

func describe(ctx context.Context, h *hub.Hub, id string) (description, error) {
	inst, err := h.GetInstance(ctx, id, false)
	if err != nil {
		return description{}, err
	}
	rvs, err := h.ResourceVersions(ctx, id, true)
	if err != nil {
		return description{}, err
	}
	d := description{Instance: inst, ResourceVersions: rvs, Uses: []related{}, UsedBy: []related{}}
	d.Backend = backendInfo{ID: inst.Backend.ID, Abstract: inst.Backend.Abstract}
	if sb, err := h.StorageBackend(ctx, inst.Backend.ID); err == nil {
		d.Backend.Alias, d.Backend.URL, d.Backend.AcceptValue = sb.Alias, sb.URL, sb.AcceptValue
	} else {
		// Still show what is known: an unreachable backend is worth seeing.
		d.Backend.Error = err.Error()
		if b, err := h.GetInstance(ctx, inst.Backend.ID, false); err == nil {
			d.Backend.Alias = b.Alias
		}
	}
	relate := func(ids []string) []related {
		out := []related{}
		for _, rid := range ids {
			r := related{ID: rid}
			if ri, err := h.GetInstance(ctx, rid, false); err == nil {
				r.TypeRef, r.Namespace, r.Name = ri.TypeRef, ri.Namespace, ri.Name
			}
			out = append(out, r)
		}
		return out
	}
	d.Uses, d.UsedBy = relate(inst.Uses), relate(inst.UsedBy)
	return d, nil
}

func (a *app) printDescription(w io.Writer, d description) error {
	inst := d.Instance
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	field := func(indent int, name, value string) {
		if value == "" {
			value = "<none>"
		}
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), name, value)
	}
	field(0, "ID", inst.ID)
	field(0, "Name", inst.Name)
	field(0, "Namespace", inst.Namespace)
	field(0, "Alias", inst.Alias)
	field(0, "Type", inst.TypeRef.String())
	field(0, "Labels", keyValues(inst.Labels))
	field(0, "Annotations", keyValues(inst.Annotations))
	field(0, "Created", fmt.Sprintf("%s (%s ago)", inst.CreatedAt.Format(timeLayout), age(a.env.Now(), inst.CreatedAt)))
	field(0, "Locked By", inst.LockedBy)
	fmt.Fprintln(tw, "Backend:")
	field(1, "ID", d.Backend.ID)
	field(1, "Alias", d.Backend.Alias)
	field(1, "URL", d.Backend.URL)
	field(1, "Accept Value", strconv.FormatBool(d.Backend.AcceptValue))
	field(1, "Abstract", strconv.FormatBool(d.Backend.Abstract))
	if d.Backend.Error != "" {
		field(1, "Error", d.Backend.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Relations get their own columns, independent of the fields above.
	for _, rel := range []struct {
		title string
		list  []related
	}{{"Uses", d.Uses}, {"Used By", d.UsedBy}} {
		if len(rel.list) == 0 {
			fmt.Fprintf(w, "%s:  <none>\n", rel.title)
			continue
		}
		fmt.Fprintf(w, "%s:\n", rel.title)
		rt := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		for _, r := range rel.list {
			name := "<unknown>"
			if r.Name != "" {
				name = r.Namespace + "/" + r.Name
			}
			fmt.Fprintf(rt, "  %s\t%s\t%s\n", r.ID, cmpOr(r.TypeRef.String(), "<unknown>"), name)
		}
		if err := rt.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "Resource Versions:")
	for _, rv := range d.ResourceVersions {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "  %d:\n", rv.ResourceVersion)
		field := func(name, value string) {
			fmt.Fprintf(tw, "    %s:\t%s\n", name, cmpOr(value, "<none>"))
		}
		field("Created By", rv.CreatedBy)
		field("Created At", rv.CreatedAt.Format(timeLayout))
		field("Attributes", attributes(rv.Attributes))
		field("Context", compactJSON(rv.Context))
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "    Value:\n      %s\n", indentJSON(rv.Value, "      "))
	}
	return nil
}

const timeLayout = "2006-01-02T15:04:05Z07:00"

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func keyValues(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func attributes(attrs []cairn.AttributeRef) string {
	parts := make([]string, len(attrs))
	for i, a := range attrs {
		parts[i] = a.Path + ":" + a.Revision
	}
	return strings.Join(parts, ",")
}

func (a *app) updateCommand() *cobra.Command {
	var valueFile, contextFile, owner string
	var attrs []string
	cmd := &cobra.Command{
		Use:   "update ID [--value-file FILE|-] [--context-file FILE] [--attribute PATH:REV ...] [--owner OWNER]",
		Short: "Add a resource version to a TypeInstance",
		Long: `Update adds a new resource version (latest + 1) to a TypeInstance. What is not
given is carried over from the latest version. --attribute replaces the
attributes (repeat it for several). Files hold YAML or JSON; "-" reads standard
input. A locked TypeInstance is updated only with --owner set to its lock owner.`,
		Example: `  cairn update 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --value-file db-config.yaml
  echo '{"port": 5433}' | cairn update 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --value-file - --owner deploy-42`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if valueFile == "" && contextFile == "" && !cmd.Flags().Changed("attribute") {
				return usageErrorf("nothing to update: give --value-file, --context-file or --attribute")
			}
			if valueFile == "-" && contextFile == "-" {
				return usageErrorf("--value-file and --context-file cannot both read standard input")
			}
			u := hub.UpdateInstance{ID: args[0], OwnerID: owner}
			var err error
			if valueFile != "" {
				if u.Value, err = a.readJSONFile(valueFile); err != nil {
					return err
				}
			}
			if contextFile != "" {
				if u.Context, err = a.readJSONFile(contextFile); err != nil {
					return err
				}
			}
			if cmd.Flags().Changed("attribute") {
				list := []cairn.AttributeRef{}
				for _, s := range attrs {
					p, r := splitRef(s)
					if p == "" || r == "" {
						return usageErrorf("--attribute %q: want PATH:REVISION", s)
					}
					list = append(list, cairn.AttributeRef{Path: p, Revision: r})
				}
				u.Attributes = &list
			}
			return a.withHub(cmd.Context(), func(h *hub.Hub) error {
				out, err := h.UpdateInstances(cmd.Context(), []hub.UpdateInstance{u})
				if err != nil {
					return err
				}
				inst := out[0]
				if printed, err := a.printData(cmd.OutOrStdout(), inst); printed {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "typeinstance/%s/%s (id %s) configured, resource version %d\n",
					inst.Namespace, inst.Name, inst.ID, inst.Latest.ResourceVersion)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&valueFile, "value-file", "", "file holding the new value (YAML or JSON), - for stdin")
	fl.StringVar(&contextFile, "context-file", "", "file holding the new backend context (YAML or JSON), - for stdin")
	fl.StringArrayVar(&attrs, "attribute", nil, "attribute PATH:REVISION of the new version; repeatable; replaces all")
	fl.StringVar(&owner, "owner", "", "lock owner, required when the TypeInstance is locked")
	return cmd
}

// readJSONFile reads one YAML or JSON document as JSON.
func (a *app) readJSONFile(path string) (json.RawMessage, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(a.env.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fileError(path, err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "%s: invalid YAML or JSON: %w", path, err)
	}
	return j, nil
}

func (a *app) deleteCommand() *cobra.Command {
	var owner string
	cmd := &cobra.Command{
		Use:   "delete ID [--owner OWNER]",
		Short: "Delete a TypeInstance and every resource version",
		Long: `Delete removes a TypeInstance, every resource version and its value in its
storage backend. It is refused while other TypeInstances use it, and while it is
locked by an owner other than --owner.`,
		Example: `  cairn delete 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10
  cairn delete 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --owner deploy-42`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h *hub.Hub) error {
			ctx := cmd.Context()
			inst, err := h.GetInstance(ctx, args[0], false)
			if err != nil {
				return err
			}
			if err := h.DeleteInstance(ctx, inst.ID, owner); err != nil {
				return err
			}
			r := applyResult{Kind: kindInstance, Ref: refOf(inst.Namespace, inst.Name, inst.ID), ID: inst.ID, Action: "deleted"}
			return a.printResults(cmd.OutOrStdout(), []applyResult{r})
		}),
	}
	cmd.Flags().StringVar(&owner, "owner", "", "lock owner, required when the TypeInstance is locked")
	return cmd
}

func (a *app) lockCommand(lock bool) *cobra.Command {
	var owner string
	verb, done := "lock", "locked"
	if !lock {
		verb, done = "unlock", "unlocked"
	}
	cmd := &cobra.Command{
		Use:   verb + " ID... --owner OWNER",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " TypeInstances, all or nothing",
		Long: fmt.Sprintf(`%s %ss every TypeInstance given, or none when any is missing or locked by
another owner. A locked TypeInstance can be updated and deleted only by its
lock owner.`, strings.ToUpper(verb[:1])+verb[1:], verb),
		Example: fmt.Sprintf("  cairn %s 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 9b2d8f1a-0c3e-4d5f-8a6b-7c8d9e0f1a2b --owner deploy-42", verb),
		Args:    usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if owner == "" {
				return usageErrorf("%s needs --owner", verb)
			}
			return a.withHub(cmd.Context(), func(h *hub.Hub) error {
				var err error
				if lock {
					err = h.LockInstances(cmd.Context(), args, owner)
				} else {
					err = h.UnlockInstances(cmd.Context(), args, owner)
				}
				if err != nil {
					return err
				}
				results := make([]applyResult, len(args))
				for i, id := range args {
					results[i] = applyResult{Kind: kindInstance, Ref: id, ID: id, Action: done + " by " + owner}
				}
				return a.printResults(cmd.OutOrStdout(), results)
			})
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "lock owner (required)")
	return cmd
}

// printResults prints one line per result, or the list as JSON/YAML.
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
