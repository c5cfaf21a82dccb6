package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
)

func (r *kube) describeCommand() *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe RESOURCE NAME... | describe RESOURCE/NAME...",
		Short: "Show resources in detail: metadata, spec, backend, lock, relations and every resource version",
		Example: `  cairn describe flag new-project
  cairn describe ti 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10
  cairn describe type io.flipt.flag:1.0.0-alpha.1`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			groups, err := r.parseResourceArgs(ctx, args, namespace)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			var errs []error
			n := 0
			for _, g := range groups {
				if len(g.names) == 0 {
					return usageErrorf("describe needs a name: describe %s NAME", args[0])
				}
				if err := require(g.res, "get"); err != nil {
					return err
				}
				for _, name := range g.names {
					ns := namespaceOf(g.res, namespace)
					obj, err := r.getObject(ctx, g.res, ns, name)
					// unavailable: the value could not be read (its backend
					// is down); the rest is the hub's, and still shown.
					var unavailable error
					if cairn.HasCode(err, cairn.CodeUnavailable) {
						if o, ok := r.objectWithoutValue(ctx, g.res, ns, name); ok {
							obj, unavailable, err = o, err, nil
						}
					}
					if err != nil {
						errs = append(errs, err)
						continue
					}
					if n > 0 {
						fmt.Fprintln(w)
					}
					n++
					if err := r.describe(ctx, w, g.res, obj, unavailable); err != nil {
						return err
					}
					if unavailable != nil {
						errs = append(errs, unavailable)
					}
				}
			}
			return joinErrors(errs)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of a namespaced resource")
	return cmd
}

// objectWithoutValue reads the object name of res as a list without values
// (values=false) serves it: what the hub itself keeps, read when its value
// cannot be. A TypeInstance is found by its id, else by its name when
// exactly one instance has it (as typeinstances/NAME is).
func (r *kube) objectWithoutValue(ctx context.Context, res client.Resource, ns, name string) (object, bool) {
	find := func(selector string) []json.RawMessage {
		l, err := r.c.List(ctx, res, ns, client.ListOptions{FieldSelector: selector, Extra: url.Values{"values": {"false"}}})
		if err != nil {
			return nil
		}
		return l.Items
	}
	items := find("metadata.name=" + name)
	if len(items) == 0 && isHub(res, "typeinstances") {
		items = find("spec.name=" + name)
	}
	if len(items) != 1 {
		return object{}, false
	}
	obj, err := decodeObject(items[0])
	return obj, err == nil
}

// describedInstance is what describe shows of an instance, from either of
// its served forms.
type describedInstance struct {
	kind, apiVersion  string
	id, name, ns      string
	alias             string
	typeRef           cairn.TypeRef
	labels, ann       map[string]string
	created           time.Time
	createdBy, locked string
	generation        int64
	resourceVersion   string
	backend           rest.StatusBackend
	uses, usedBy      []string
	value             json.RawMessage
	// unavailable says why the value could not be read, if it could not.
	unavailable error
	// reported is the status the instance's controllers wrote, if any.
	reported   json.RawMessage
	attributes []cairn.AttributeRef
}

func (r *kube) describe(ctx context.Context, w io.Writer, res client.Resource, obj object, unavailable error) error {
	switch {
	case isHub(res, "types"):
		return r.describeType(w, obj)
	case isHub(res, "backends"):
		return r.describeBackend(w, obj)
	case isHub(res, "typeinstances"):
		var spec rest.TypeInstanceSpec
		var st rest.TypeInstanceStatus
		if err := json.Unmarshal(obj.Spec, &spec); err != nil {
			return fmt.Errorf("the server's TypeInstance does not decode: %w", err)
		}
		_ = json.Unmarshal(obj.Status, &st)
		return r.describeInstance(ctx, w, describedInstance{
			kind: obj.Kind, apiVersion: obj.APIVersion, id: obj.Metadata.UID, name: spec.Name, ns: spec.Namespace, alias: spec.Alias,
			typeRef: spec.TypeRef, labels: obj.Metadata.Labels, ann: obj.Metadata.Annotations, created: obj.created(),
			createdBy: st.CreatedBy, locked: st.LockedBy, generation: obj.Metadata.Generation, resourceVersion: obj.Metadata.ResourceVersion,
			backend: spec.Backend, uses: st.Uses, usedBy: st.UsedBy, value: spec.Value, attributes: spec.Attributes,
			unavailable: unavailable,
		})
	}
	var st rest.ObjectStatus
	_ = json.Unmarshal(obj.Status, &st)
	return r.describeInstance(ctx, w, describedInstance{
		kind: obj.Kind, apiVersion: obj.APIVersion, id: obj.Metadata.UID, name: obj.Metadata.Name, ns: obj.Metadata.Namespace, alias: st.Alias,
		typeRef: st.TypeRef, labels: obj.Metadata.Labels, ann: obj.Metadata.Annotations, created: obj.created(),
		createdBy: st.CreatedBy, locked: st.LockedBy, generation: obj.Metadata.Generation, resourceVersion: obj.Metadata.ResourceVersion,
		backend: st.Backend, uses: st.Uses, usedBy: st.UsedBy, value: obj.Spec, reported: reportedStatus(obj.Status),
		unavailable: unavailable,
	})
}

// reportedStatus is the part of an object's status its own controllers
// wrote (an installation's conditions, outputs and events): the status
// without the hub's fields, which describe shows on their own lines; nil
// when there is none.
func reportedStatus(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	for _, k := range []string{"typeRef", "alias", "backend", "lockedBy", "createdBy", "uses", "usedBy"} {
		delete(m, k)
	}
	if len(m) == 0 {
		return nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return b
}

// fields writes "Name:  value" lines aligned by a tabwriter.
type fields struct{ tw *tabwriter.Writer }

func newFields(w io.Writer) fields { return fields{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)} }

func (f fields) add(indent int, name, value string) {
	fmt.Fprintf(f.tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), name, cmpOr(value, "<none>"))
}

func (f fields) title(indent int, name string) {
	fmt.Fprintf(f.tw, "%s%s:\n", strings.Repeat("  ", indent), name)
}

func (f fields) flush() error { return f.tw.Flush() }

func (r *kube) describeInstance(ctx context.Context, w io.Writer, d describedInstance) error {
	f := newFields(w)
	f.add(0, "Name", d.name)
	f.add(0, "Namespace", d.ns)
	f.add(0, "Kind", d.kind+" ("+d.apiVersion+")")
	f.add(0, "UID", d.id)
	f.add(0, "Alias", d.alias)
	f.add(0, "Type", d.typeRef.String())
	f.add(0, "Labels", keyValues(d.labels))
	f.add(0, "Annotations", keyValues(d.ann))
	created := ""
	if !d.created.IsZero() {
		created = fmt.Sprintf("%s (%s ago)", d.created.Format(timeLayout), age(r.env.Now(), d.created))
	}
	f.add(0, "Created", created)
	f.add(0, "Created By", d.createdBy)
	f.add(0, "Generation", version(d.generation))
	f.add(0, "Resource Version", d.resourceVersion)
	f.add(0, "Locked By", d.locked)
	if d.attributes != nil {
		f.add(0, "Attributes", attributes(d.attributes))
	}
	f.title(0, "Backend")
	f.add(1, "ID", d.backend.ID)
	backendName := d.backend.ID
	if raw, err := r.c.Get(ctx, client.Backends, "", d.backend.ID); err == nil {
		var b rest.BackendObject
		_ = json.Unmarshal(raw, &b)
		backendName = cmpOr(b.Spec.Alias, backendName)
		f.add(1, "Alias", b.Spec.Alias)
		f.add(1, "URL", b.Spec.URL)
		f.add(1, "Accept Value", strconv.FormatBool(b.Spec.AcceptValue))
	} else {
		// Still worth showing the rest: an unusable backend is worth seeing.
		f.add(1, "Error", err.Error())
	}
	f.add(1, "Abstract", strconv.FormatBool(d.backend.Abstract))
	f.add(1, "Context", compactJSON(d.backend.Context))
	if err := f.flush(); err != nil {
		return err
	}
	for _, rel := range []struct {
		title string
		ids   []string
	}{{"Uses", d.uses}, {"Used By", d.usedBy}} {
		if len(rel.ids) == 0 {
			fmt.Fprintf(w, "%s:  <none>\n", rel.title)
			continue
		}
		fmt.Fprintf(w, "%s:\n", rel.title)
		rows := make([][]string, 0, len(rel.ids))
		for _, id := range rel.ids {
			typ, name := "<unknown>", "<unknown>"
			if raw, err := r.c.Get(ctx, client.TypeInstances, "", id); err == nil {
				var o rest.TypeInstanceObject
				if json.Unmarshal(raw, &o) == nil {
					typ, name = o.Spec.TypeRef.String(), refOf(o.Spec.Namespace, o.Spec.Name, id)
				}
			}
			rows = append(rows, []string{"  " + id, typ, name})
		}
		if err := (&columns{w: w}).print(rows...); err != nil {
			return err
		}
	}
	if d.unavailable != nil {
		if _, err := fmt.Fprintf(w, "Spec:  <unavailable: backend %s could not be read: %v>\n", backendName, d.unavailable); err != nil {
			return err
		}
	} else if err := writeYAMLBlock(w, "Spec", d.value); err != nil {
		return err
	}
	if d.reported != nil {
		if err := writeYAMLBlock(w, "Status", d.reported); err != nil {
			return err
		}
	}
	return r.describeHistory(ctx, w, d.id)
}

// describeHistory lists every resource version of the instance id, oldest
// first: who made it, when, its attributes and backend context.
func (r *kube) describeHistory(ctx context.Context, w io.Writer, id string) error {
	rvs, err := r.c.ResourceVersions(ctx, id, false)
	if err != nil {
		_, err = fmt.Fprintf(w, "Resource Versions:  <unknown: %v>\n", err)
		return err
	}
	fmt.Fprintln(w, "Resource Versions:")
	rows := [][]string{{"  VERSION", "CREATED BY", "CREATED", "ATTRIBUTES", "CONTEXT"}}
	for _, rv := range rvs {
		rows = append(rows, []string{"  " + strconv.Itoa(rv.ResourceVersion), rv.CreatedBy,
			rv.CreatedAt.Format(timeLayout), attributes(rv.Attributes), compactJSON(rv.Context)})
	}
	return (&columns{w: w}).print(rows...)
}

// writeYAMLBlock writes raw as YAML indented under a title.
func writeYAMLBlock(w io.Writer, title string, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		_, err := fmt.Fprintf(w, "%s:  <none>\n", title)
		return err
	}
	y, err := yaml.JSONToYAML(raw)
	if err != nil {
		return fmt.Errorf("encode %s: %w", title, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", title)
	for line := range strings.SplitSeq(strings.TrimRight(string(y), "\n"), "\n") {
		b.WriteString("  " + line + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func (r *kube) describeType(w io.Writer, obj object) error {
	var spec rest.TypeSpec
	if err := json.Unmarshal(obj.Spec, &spec); err != nil {
		return fmt.Errorf("the server's Type does not decode: %w", err)
	}
	f := newFields(w)
	f.add(0, "Name", obj.Metadata.Name)
	f.add(0, "Path", spec.Path)
	f.add(0, "Revision", spec.Revision)
	f.add(0, "Additional Refs", strings.Join(spec.AdditionalRefs, ","))
	if c := obj.created(); !c.IsZero() {
		f.add(0, "Created", fmt.Sprintf("%s (%s ago)", c.Format(timeLayout), age(r.env.Now(), c)))
	}
	if spec.REST != nil && spec.REST.Names != nil {
		n := spec.REST.Names
		f.title(0, "REST")
		f.add(1, "API Version", spec.REST.Group+"/"+spec.REST.Version)
		f.add(1, "Kind", n.Kind)
		f.add(1, "Plural", n.Plural)
		f.add(1, "Singular", n.Singular)
		f.add(1, "Short Names", strings.Join(n.ShortNames, ","))
	} else {
		f.add(0, "REST", "")
	}
	if err := f.flush(); err != nil {
		return err
	}
	return writeYAMLBlock(w, "JSON Schema", spec.JSONSchema)
}

func (r *kube) describeBackend(w io.Writer, obj object) error {
	var spec rest.BackendSpec
	if err := json.Unmarshal(obj.Spec, &spec); err != nil {
		return fmt.Errorf("the server's Backend does not decode: %w", err)
	}
	f := newFields(w)
	f.add(0, "ID", obj.Metadata.Name)
	f.add(0, "Alias", spec.Alias)
	f.add(0, "Type", spec.TypeRef.String())
	f.add(0, "URL", spec.URL)
	f.add(0, "Accept Value", strconv.FormatBool(spec.AcceptValue))
	f.add(0, "Abstract", strconv.FormatBool(spec.Abstract))
	f.add(0, "Labels", keyValues(obj.Metadata.Labels))
	if err := f.flush(); err != nil {
		return err
	}
	return writeYAMLBlock(w, "Context Schema", spec.ContextSchema)
}
