package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

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
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
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
func (a *app) instanceTable(ctx context.Context, w io.Writer, h cairnclient.Interface, list []cairn.Instance, values bool) error {
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
	h     cairnclient.Interface
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
		Long: `Update adds a new resource version (latest + 1) to a TypeInstance. The value
file holds the whole new value (it is not merged into the latest one); what
is not given (value, context, attributes) is carried over from the latest
version. An update that changes nothing adds no version and says unchanged. --attribute replaces the attributes (repeat it for several). Files
hold YAML or JSON; "-" reads standard input. A locked TypeInstance is updated
only with --owner set to its lock owner.`,
		Example: `  cairn update 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --value-file db-config.yaml
  cairn update 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --value-file - --owner deploy-42 < db-config.yaml
  cairn update 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --attribute cap.attribute.cloud.provider.aws:0.1.0`,
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
			return a.withClient(func(h cairnclient.Interface) error {
				// The version before, to tell an update that changed
				// nothing: the API answers it with the latest version as
				// it was, adding none.
				before, err := h.GetInstance(cmd.Context(), u.ID, false)
				if err != nil {
					return err
				}
				out, err := h.UpdateInstances(cmd.Context(), []hub.UpdateInstance{u})
				if err != nil {
					return err
				}
				inst := out[0]
				if printed, err := a.printData(cmd.OutOrStdout(), inst); printed {
					return err
				}
				what := "configured"
				if inst.Latest.ResourceVersion == before.Latest.ResourceVersion {
					what = "unchanged"
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "typeinstance/%s/%s (id %s) %s, resource version %d\n",
					inst.Namespace, inst.Name, inst.ID, what, inst.Latest.ResourceVersion)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&valueFile, "value-file", "", "file holding the new value (YAML or JSON), - for stdin")
	fl.StringVar(&contextFile, "context-file", "", "file holding the new backend context (YAML or JSON), - for stdin")
	fl.StringArrayVar(&attrs, "attribute", nil, "attribute PATH:REVISION of the new version; repeatable; replaces all")
	fl.StringVar(&owner, "owner", "", "lock owner, required when the TypeInstance is locked")
	addDryRunFlag(cmd)
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
	// The conversion reads the first document only: a second one would be
	// dropped without a word.
	if n := yamlDocuments(data); n > 1 {
		return nil, cairn.Errorf(cairn.CodeInvalid, "%s: holds %d YAML documents (separated by ---); this file must hold one", path, n)
	}
	return j, nil
}

// yamlDocuments counts the documents of a YAML stream that hold something;
// 0 when it does not parse (the conversion has reported that already).
func yamlDocuments(data []byte) int {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		var doc yamlv3.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return n
			}
			return 0
		}
		if len(doc.Content) > 0 && !(doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].Tag == "!!null") {
			n++
		}
	}
}
