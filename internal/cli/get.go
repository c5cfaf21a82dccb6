package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
)

type getOptions struct {
	selector      string
	namespace     string
	allNamespaces bool
	output        string
	watch         bool
	watchOnly     bool
	watchEvents   bool
	showLabels    bool
	// jsonpath is the parsed template of -o jsonpath=TEMPLATE (output
	// "jsonpath"), template its text.
	jsonpath *jsonpath.JSONPath
	template string
}

func (o getOptions) wide() bool { return o.output == "wide" }

// showsValues reports whether the output shows whole objects, values
// included (a table or -o name reads none).
func (o getOptions) showsValues() bool {
	return o.output == "json" || o.output == "yaml" || o.output == "jsonpath"
}

// parseOutput checks -o and parses the template of jsonpath=TEMPLATE, in
// kubectl's words.
func (o *getOptions) parseOutput() error {
	format, tmpl, withTemplate := strings.Cut(o.output, "=")
	switch format {
	case "", "table", "wide", "json", "yaml", "name":
		if !withTemplate {
			return nil
		}
	case "jsonpath":
		if tmpl == "" {
			return usageErrorf("template format specified but no template given")
		}
		// As kubectl's --allow-missing-template-keys (true by default):
		// a key an object lacks prints nothing.
		jp := jsonpath.New("output").AllowMissingKeys(true)
		if err := jp.Parse(tmpl); err != nil {
			return cairn.Errorf(cairn.CodeInvalid, "error parsing jsonpath %s, %v", tmpl, err)
		}
		o.output, o.jsonpath, o.template = "jsonpath", jp, tmpl
		return nil
	}
	return usageErrorf("--output %q: want table, wide, json, yaml, name or jsonpath=TEMPLATE", o.output)
}

// printJSONPath writes what o's template makes of v (an object or a List)
// as kubectl does, its numbers as integers where they are: nothing when
// the template fails.
func (o getOptions) printJSONPath(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return fmt.Errorf("decode JSON: %w", err)
	}
	var out bytes.Buffer
	if err := o.jsonpath.Execute(&out, numbers(data)); err != nil {
		return cairn.Errorf(cairn.CodeInvalid, "error executing jsonpath %q: %v", o.template, err)
	}
	_, err = w.Write(out.Bytes())
	return err
}

// numbers turns the json.Numbers of v into int64 or float64, as the
// objects kubectl's jsonpath sees hold them, so that 5432 prints as 5432,
// not 5.432e+03, and filters compare numbers.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// listOptions are the options of a list or watch of res. Tables and names
// show no values: instances are listed without them (?values=false), so
// none is read from a backend and every instance shows while one is down.
func (o getOptions) listOptions(res client.Resource) client.ListOptions {
	lo := client.ListOptions{LabelSelector: o.selector}
	if !o.showsValues() && (res.Group != rest.HubGroup || isHub(res, "typeinstances")) {
		lo.Extra = url.Values{"values": {"false"}}
	}
	return lo
}

func (r *kube) getCommand() *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get RESOURCE[,RESOURCE...] [NAME...] | get RESOURCE/NAME...",
		Short: "Show resources: objects of a served Type, typeinstances, types, backends",
		Long: `get shows one or many resources of the server. RESOURCE is a plural, a singular,
a short name or a kind, optionally qualified by its group (flags.flipt.io), as
'cairn api-resources' lists them. Objects of namespaced resources are read in
-n NAMESPACE (default "default"), or in every namespace with -A. Several
resources are separated by commas (flags,postgresconfigs), as in kubectl.

Tables: objects of a served kind (and stacks, proposals) show the server's
table, the columns kubectl get prints: NAME, the kind's printer columns (a stack installation's READY,
SYNCED and its stack's own; a Type's additionalPrinterColumns) or AGE; -o wide
adds REVISION, BACKEND and LOCKED-BY, -A adds NAMESPACE (namespaced kinds),
--show-labels adds LABELS. typeinstances (ti) is every instance by id, with
its Type, backend, lock and version; types shows each Type revision.
An instance's id alone (a UUID, or a Terraform state's or output's id such as
terraformoutput.default.network-ip) names that TypeInstance, also in describe,
edit and delete.

Tables and -o name list every instance while a backend is down: -o name
reads no value, and a column that shows one prints <unknown> for an instance
whose backend cannot be read, with a warning naming it; -o json and -o yaml
show values and then fail (exit 6) naming the instance and the backend that
cannot be read.
-o jsonpath=TEMPLATE prints what kubectl's JSONPath template makes of the
object, or of the List of several (a key an object lacks prints nothing).

-w prints the rows, then a row for every change until interrupted (Ctrl-C).`,
		Example: `  cairn get flags
  cairn get flags -l team=moonshots -o wide
  cairn get flag/new-project -o yaml
  cairn get ti -A
  cairn get terraformoutput.default.network-ip -o yaml
  cairn get types
  cairn get flags -w
  cairn get flags,postgresconfigs
  cairn get flags -o 'jsonpath={.items[*].metadata.name}'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.parseOutput(); err != nil {
				return err
			}
			ctx := cmd.Context()
			groups, err := r.parseResourceArgs(ctx, args, o.namespace)
			if err != nil {
				return err
			}
			named := slices.ContainsFunc(groups, func(g resourceNames) bool { return len(g.names) > 0 })
			switch {
			case named && o.selector != "":
				return usageErrorf("name cannot be provided when a selector is specified")
			case named && o.allNamespaces:
				return usageErrorf("a resource cannot be retrieved by name across all namespaces")
			}
			if o.watch || o.watchOnly {
				if len(groups) != 1 {
					return usageErrorf("you may only watch one resource type at a time")
				}
				if printsServerTable(groups[0].res, o.output) {
					return r.watchTable(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), groups[0], o)
				}
				return r.watch(ctx, cmd.OutOrStdout(), groups[0], o)
			}
			return r.get(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), groups, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. team=moonshots,env!=prod, tier in (db,cache)")
	fl.StringVarP(&o.namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of namespaced resources")
	fl.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list across every namespace")
	fl.StringVarP(&o.output, "output", "o", "table", "output format: table, wide, json, yaml, name or jsonpath=TEMPLATE (kubectl's JSONPath, e.g. '{.items[*].metadata.name}')")
	fl.BoolVarP(&o.watch, "watch", "w", false, "after listing, print every change until interrupted")
	fl.BoolVar(&o.watchOnly, "watch-only", false, "print changes only, without listing first")
	fl.BoolVar(&o.watchEvents, "output-watch-events", false, "show the event type (ADDED, MODIFIED, DELETED) of each change")
	fl.BoolVar(&o.showLabels, "show-labels", false, "add a LABELS column to a table of a served kind's objects, as kubectl's --show-labels")
	return cmd
}

// fetched is the objects read for one resource, or the server's table
// of them.
type fetched struct {
	res   client.Resource
	objs  []object
	table *rest.Table
}

func (r *kube) get(ctx context.Context, w, errw io.Writer, groups []resourceNames, o getOptions) error {
	var all []fetched
	var errs []error
	single := len(groups) == 1 && len(groups[0].names) == 1
	for _, g := range groups {
		f := fetched{res: g.res}
		ns := namespaceOf(g.res, o.namespace)
		if printsServerTable(g.res, o.output) {
			t, err := r.serverTable(ctx, errw, g, ns, o)
			if err != nil {
				if len(g.names) == 0 {
					return err
				}
				errs = append(errs, err)
			}
			f.table = t
			all = append(all, f)
			continue
		}
		if len(g.names) == 0 {
			if err := require(g.res, "list"); err != nil {
				return err
			}
			if o.allNamespaces {
				ns = ""
			}
			l, err := r.c.ListAll(ctx, g.res, ns, o.listOptions(g.res))
			if cairn.HasCode(err, cairn.CodeUnavailable) && o.showsValues() {
				return fmt.Errorf("%w\n(-o %s shows values; a table or -o name lists every instance without reading any)", err, o.output)
			}
			if err != nil {
				return err
			}
			for _, raw := range l.Items {
				obj, err := decodeObject(raw)
				if err != nil {
					return err
				}
				f.objs = append(f.objs, obj)
			}
			sortObjects(g.res, f.objs)
		} else {
			if err := require(g.res, "get"); err != nil {
				return err
			}
			for _, name := range g.names {
				obj, err := r.getObject(ctx, g.res, ns, name)
				if err != nil {
					// Show what was found; report the rest after it, as kubectl does.
					errs = append(errs, err)
					continue
				}
				f.objs = append(f.objs, obj)
			}
		}
		all = append(all, f)
	}

	total := 0
	for _, f := range all {
		total += len(f.objs)
		if f.table != nil {
			total += len(f.table.Rows)
		}
	}
	if total == 0 && len(errs) > 0 {
		return joinErrors(errs)
	}
	var out error
	switch o.output {
	case "json", "yaml", "jsonpath":
		var v any
		if single && len(all[0].objs) == 1 {
			v = all[0].objs[0].raw
		} else {
			items := []json.RawMessage{}
			for _, f := range all {
				for _, obj := range f.objs {
					items = append(items, obj.raw)
				}
			}
			v = map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": ""}, "items": items}
		}
		if o.output == "jsonpath" {
			out = o.printJSONPath(w, v)
		} else {
			out = printAs(w, o.output, v)
		}
	case "name":
		for _, f := range all {
			for _, obj := range f.objs {
				if _, err := fmt.Fprintf(w, "%s/%s\n", kindName(f.res), obj.Metadata.Name); err != nil {
					return err
				}
			}
		}
	default:
		printed := 0
		for _, f := range all {
			if f.table != nil && len(f.table.Rows) > 0 {
				if printed > 0 {
					fmt.Fprintln(w)
				}
				printed++
				t := newServerTable(f.table.ColumnDefinitions, o.wide(), o.allNamespaces && f.res.Namespaced, o.showLabels, false)
				rows := [][]string{t.header}
				for _, row := range f.table.Rows {
					rows = append(rows, t.row(row, ""))
				}
				if out = (&columns{w: w}).print(rows...); out != nil {
					break
				}
				continue
			}
			if len(f.objs) == 0 {
				continue
			}
			if printed > 0 {
				fmt.Fprintln(w)
			}
			printed++
			t := r.table(ctx, f.res, o.wide(), false)
			rows := [][]string{t.header}
			for _, obj := range f.objs {
				rows = append(rows, t.row(obj, ""))
			}
			if out = (&columns{w: w}).print(rows...); out != nil {
				break
			}
		}
		if printed == 0 && len(errs) == 0 {
			fmt.Fprintln(errw, noResources(groups, o))
		}
	}
	if out != nil {
		return out
	}
	return joinErrors(errs)
}

// serverTable reads the server's table of g: the list, or each named
// object (a name that fails is reported after the others, as kubectl does:
// the table then holds what was found).
func (r *kube) serverTable(ctx context.Context, errw io.Writer, g resourceNames, ns string, o getOptions) (*rest.Table, error) {
	if len(g.names) == 0 {
		if err := require(g.res, "list"); err != nil {
			return nil, err
		}
		if o.allNamespaces {
			ns = ""
		}
		t, warnings, err := r.c.Table(ctx, g.res, ns, "", client.ListOptions{LabelSelector: o.selector})
		if err != nil {
			return nil, err
		}
		printWarnings(errw, warnings)
		return &t, nil
	}
	if err := require(g.res, "get"); err != nil {
		return nil, err
	}
	var all *rest.Table
	var errs []error
	for _, name := range g.names {
		t, warnings, err := r.c.Table(ctx, g.res, ns, name, client.ListOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		printWarnings(errw, warnings)
		if all == nil {
			all = &t
		} else {
			all.Rows = append(all.Rows, t.Rows...)
		}
	}
	return all, joinErrors(errs)
}

// sortObjects orders a list as kubectl shows one, by namespace and name
// (the server lists by Type and creation time). TypeInstances go by the
// namespace and name they have beside their id.
func sortObjects(res client.Resource, objs []object) {
	key := func(o object) (string, string) {
		if isHub(res, "typeinstances") {
			var spec rest.TypeInstanceSpec
			_ = json.Unmarshal(o.Spec, &spec)
			return spec.Namespace, spec.Name
		}
		return o.Metadata.Namespace, o.Metadata.Name
	}
	slices.SortStableFunc(objs, func(a, b object) int {
		an, aname := key(a)
		bn, bname := key(b)
		return cmpStrings(an, bn, aname, bname)
	})
}

// getObject reads one object by the name a user gave.
func (r *kube) getObject(ctx context.Context, res client.Resource, ns, name string) (object, error) {
	n, err := r.resolveName(ctx, res, name)
	if err != nil {
		return object{}, err
	}
	raw, err := r.c.Get(ctx, res, ns, n)
	if err != nil {
		return object{}, err
	}
	return decodeObject(raw)
}

func noResources(groups []resourceNames, o getOptions) string {
	if o.allNamespaces || !groups[0].res.Namespaced {
		return "No resources found"
	}
	return fmt.Sprintf("No resources found in %s namespace.", namespaceOf(groups[0].res, o.namespace))
}

// joinErrors keeps a single error as it is, so its message is not
// repeated by errors.Join's wrapping.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return joinedErrors(errs)
}

type joinedErrors []error

func (j joinedErrors) Error() string {
	s := make([]string, len(j))
	for i, e := range j {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

func (j joinedErrors) Unwrap() []error { return j }

// printAs writes v as indented JSON or as YAML (through JSON, so both
// show the same fields).
func printAs(w io.Writer, format string, v any) error {
	j, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", strings.ToUpper(format), err)
	}
	if format == "json" {
		_, err = fmt.Fprintf(w, "%s\n", j)
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	_, err = w.Write(y)
	return err
}

// tableView is how a resource shows as table rows.
type tableView struct {
	header []string
	// row renders obj; event, when not "", is the watch event's type.
	row func(obj object, event string) []string
}

// table returns the columns of one of the hub's kinds: kubectl-like, with
// what the hub tracks beside the value (Type, backend, lock, version).
func (r *kube) table(ctx context.Context, res client.Resource, wide, events bool) tableView {
	now := r.env.Now()
	var header []string
	var cells func(obj object) []string
	switch {
	case isHub(res, "typeinstances"):
		header = []string{"ID", "NAMESPACE", "NAME", "TYPE", "VERSION", "BACKEND", "LOCKED BY", "AGE"}
		if wide {
			header = append(header, "ALIAS", "LABELS")
		}
		cells = func(obj object) []string {
			var spec rest.TypeInstanceSpec
			var st rest.TypeInstanceStatus
			_ = json.Unmarshal(obj.Spec, &spec)
			_ = json.Unmarshal(obj.Status, &st)
			row := []string{obj.Metadata.Name, spec.Namespace, spec.Name, spec.TypeRef.String(), version(obj.Metadata.Generation),
				r.backendName(ctx, spec.Backend.ID), st.LockedBy, age(now, obj.created())}
			if wide {
				row = append(row, spec.Alias, keyValues(obj.Metadata.Labels))
			}
			return row
		}
	case isHub(res, "types"):
		header = []string{"NAME", "PATH", "REVISION", "REST", "AGE"}
		if wide {
			header = append(header, "ADDITIONAL REFS")
		}
		cells = func(obj object) []string {
			var spec rest.TypeSpec
			_ = json.Unmarshal(obj.Spec, &spec)
			restName := ""
			if spec.REST != nil && spec.REST.Names != nil {
				restName = spec.REST.Group + "/" + spec.REST.Version + " " + spec.REST.Names.Kind
			}
			row := []string{obj.Metadata.Name, spec.Path, spec.Revision, restName, age(now, obj.created())}
			if wide {
				row = append(row, strings.Join(spec.AdditionalRefs, ","))
			}
			return row
		}
	case isHub(res, "backends"):
		header = []string{"ID", "ALIAS", "URL", "ACCEPT VALUE", "ABSTRACT"}
		if wide {
			header = append(header, "TYPE", "AGE")
		}
		cells = func(obj object) []string {
			var spec rest.BackendSpec
			_ = json.Unmarshal(obj.Spec, &spec)
			row := []string{obj.Metadata.Name, spec.Alias, spec.URL, strconv.FormatBool(spec.AcceptValue), strconv.FormatBool(spec.Abstract)}
			if wide {
				row = append(row, spec.TypeRef.String(), age(now, obj.created()))
			}
			return row
		}
	default:
		// The hub's other kinds; the objects of served kinds print the
		// server's table (printsServerTable).
		header = []string{"NAME", "AGE"}
		cells = func(obj object) []string { return []string{obj.Metadata.Name, age(now, obj.created())} }
	}
	if events {
		header = append([]string{"EVENT"}, header...)
	}
	return tableView{header: header, row: func(obj object, event string) []string {
		row := cells(obj)
		if events {
			row = append([]string{event}, row...)
		}
		return row
	}}
}

func version(generation int64) string {
	if generation == 0 {
		return ""
	}
	return strconv.FormatInt(generation, 10)
}

// columns prints aligned rows. Unlike a tabwriter it remembers the widths
// it printed, so rows a watch prints one at a time line up with the table
// above them as far as their cells fit.
type columns struct {
	w      io.Writer
	widths []int
}

func (c *columns) print(rows ...[]string) error {
	for _, row := range rows {
		for i, cell := range row {
			if cell == "" {
				row[i] = "<none>"
			}
			if i >= len(c.widths) {
				c.widths = append(c.widths, 0)
			}
			c.widths[i] = max(c.widths[i], utf8.RuneCountInString(row[i]))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", c.widths[i]-utf8.RuneCountInString(cell)+3))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(c.w, b.String())
	return err
}

// watchNamespace checks that res can be watched and returns the namespace
// a watch of it covers ("" for all namespaces).
func watchNamespace(res client.Resource, o getOptions) (string, error) {
	if err := require(res, "watch"); err != nil {
		return "", err
	}
	if o.allNamespaces {
		return "", nil
	}
	return namespaceOf(res, o.namespace), nil
}

// watch lists (unless --watch-only), then prints every change from the
// list's resourceVersion on, so no change between the two is missed,
// until ctx ends or the server ends the stream.
func (r *kube) watch(ctx context.Context, w io.Writer, g resourceNames, o getOptions) error {
	res := g.res
	ns, err := watchNamespace(res, o)
	if err != nil {
		return err
	}
	// Names are matched here rather than with a field selector: the name of
	// a typeinstance is its id, which no field selector matches.
	want := map[string]bool{}
	for _, n := range g.names {
		id, err := r.resolveName(ctx, res, n)
		if err != nil {
			return err
		}
		want[id] = true
	}
	keep := func(obj object) bool { return len(want) == 0 || want[obj.Metadata.Name] }

	var view tableView
	cols := &columns{w: w}
	first := true
	emit := func(event string, obj object) error {
		switch o.output {
		case "json", "yaml":
			var v any = obj.raw
			if o.watchEvents {
				v = rest.WatchEvent{Type: event, Object: obj.raw}
			}
			if o.output == "yaml" && !first {
				if _, err := io.WriteString(w, "---\n"); err != nil {
					return err
				}
			}
			first = false
			return printAs(w, o.output, v)
		case "jsonpath":
			var v any = obj.raw
			if o.watchEvents {
				v = rest.WatchEvent{Type: event, Object: obj.raw}
			}
			return o.printJSONPath(w, v)
		case "name":
			line := kindName(res) + "/" + obj.Metadata.Name
			if o.watchEvents {
				line = event + " " + line
			}
			_, err := fmt.Fprintln(w, line)
			return err
		}
		// The header goes with the first row, so both line up; with nothing
		// to show nothing is printed, as kubectl does.
		rows := [][]string{view.row(obj, event)}
		if first {
			rows = append([][]string{view.header}, rows...)
			first = false
		}
		return cols.print(rows...)
	}
	if !o.showsValues() && o.output != "name" {
		view = r.table(ctx, res, o.wide(), o.watchEvents)
	}

	opts := o.listOptions(res)
	if o.watchOnly {
		// Only the list's resourceVersion is needed.
		opts.Limit = 1
	}
	l, err := r.c.List(ctx, res, ns, opts)
	if err != nil {
		return err
	}
	if !o.watchOnly {
		if l.Metadata.Continue != "" {
			if l, err = r.c.ListAll(ctx, res, ns, opts); err != nil {
				return err
			}
		}
		var objs []object
		for _, raw := range l.Items {
			obj, err := decodeObject(raw)
			if err != nil {
				return err
			}
			if keep(obj) {
				objs = append(objs, obj)
			}
		}
		sortObjects(res, objs)
		for _, obj := range objs {
			if err := emit("ADDED", obj); err != nil {
				return err
			}
		}
	}
	opts = o.listOptions(res)
	opts.ResourceVersion = l.Metadata.ResourceVersion
	events, err := r.c.Watch(ctx, res, ns, opts)
	if err != nil {
		return err
	}
	for ev := range events {
		if ev.Type == "ERROR" {
			var st rest.Status
			if err := json.Unmarshal(ev.Object, &st); err != nil {
				return fmt.Errorf("the watch ended with an error that does not decode: %s", ev.Object)
			}
			return statusError(st)
		}
		obj, err := decodeObject(ev.Object)
		if err != nil {
			return err
		}
		if keep(obj) {
			if err := emit(ev.Type, obj); err != nil {
				return err
			}
		}
	}
	// The stream ended: interrupted (Ctrl-C) or closed by the server.
	return nil
}

// watchTable is watch for a kind whose table is the server's: the rows of
// its Table (unless --watch-only), then a row of every change, from the
// Table the server sends with each event.
func (r *kube) watchTable(ctx context.Context, w, errw io.Writer, g resourceNames, o getOptions) error {
	res := g.res
	ns, err := watchNamespace(res, o)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range g.names {
		want[n] = true
	}
	keep := func(row rest.TableRow) bool {
		_, name := rowMeta(row)
		return len(want) == 0 || want[name]
	}
	list, warnings, err := r.c.Table(ctx, res, ns, "", client.ListOptions{LabelSelector: o.selector})
	if err != nil {
		return err
	}
	printWarnings(errw, warnings)
	view := newServerTable(list.ColumnDefinitions, o.wide(), ns == "" && res.Namespaced, o.showLabels, o.watchEvents)
	cols := &columns{w: w}
	first := true
	emit := func(event string, row rest.TableRow) error {
		rows := [][]string{view.row(row, event)}
		if first {
			rows = append([][]string{view.header}, rows...)
			first = false
		}
		return cols.print(rows...)
	}
	if !o.watchOnly {
		for _, row := range list.Rows {
			if keep(row) {
				if err := emit("ADDED", row); err != nil {
					return err
				}
			}
		}
	}
	events, err := r.c.WatchTable(ctx, res, ns, client.ListOptions{LabelSelector: o.selector, ResourceVersion: list.Metadata.ResourceVersion})
	if err != nil {
		return err
	}
	for ev := range events {
		if ev.Type == "ERROR" {
			var st rest.Status
			if err := json.Unmarshal(ev.Object, &st); err != nil {
				return fmt.Errorf("the watch ended with an error that does not decode: %s", ev.Object)
			}
			return statusError(st)
		}
		var t rest.Table
		if err := json.Unmarshal(ev.Object, &t); err != nil {
			return fmt.Errorf("decode a watch event's table: %w", err)
		}
		for _, row := range t.Rows {
			if keep(row) {
				if err := emit(ev.Type, row); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// statusError maps a Status sent inside a watch stream to the hub's codes,
// as the client does for Status answers.
func statusError(st rest.Status) error {
	code := cairn.CodeInternal
	switch st.Reason {
	case "NotFound":
		code = cairn.CodeNotFound
	case "AlreadyExists":
		code = cairn.CodeAlreadyExists
	case "Conflict":
		code = cairn.CodeConflict
	case "Invalid", "BadRequest":
		code = cairn.CodeInvalid
	case "Expired", "Gone":
		code = cairn.CodeGone
	case "ServiceUnavailable":
		code = cairn.CodeUnavailable
	}
	return &cairn.Error{Code: code, Msg: "the watch ended: " + st.Message}
}

func (r *kube) apiResourcesCommand() *cobra.Command {
	var output string
	var namespaced string
	cmd := &cobra.Command{
		Use:   "api-resources",
		Short: "List the resources the hub serves",
		Long: `api-resources lists the served resources, one per group in its preferred
version: cairn's own (hub.cairn.dev: types, typeinstances, backends,
lockrequests) and one for each Type that declares REST names.`,
		Example: `  cairn api-resources
  cairn api-resources -o wide
  cairn api-resources --namespaced=true -o name`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "table", "wide", "name":
			default:
				return usageErrorf("--output %q: want table, wide or name", output)
			}
			switch namespaced {
			case "", "true", "false":
			default:
				return usageErrorf("--namespaced %q: want true or false", namespaced)
			}
			all, err := r.discover(cmd.Context())
			if err != nil {
				return err
			}
			var list []client.Resource
			for _, res := range all {
				// Discovery lists a group's preferred version first.
				if slices.ContainsFunc(list, func(x client.Resource) bool { return x.Group == res.Group && x.Plural == res.Plural }) {
					continue
				}
				if namespaced != "" && strconv.FormatBool(res.Namespaced) != namespaced {
					continue
				}
				list = append(list, res)
			}
			slices.SortStableFunc(list, func(a, b client.Resource) int {
				return cmpStrings(a.Group, b.Group, a.Plural, b.Plural)
			})
			w := cmd.OutOrStdout()
			if output == "name" {
				for _, res := range list {
					if _, err := fmt.Fprintln(w, pluralName(res)); err != nil {
						return err
					}
				}
				return nil
			}
			header := []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"}
			if output == "wide" {
				header = append(header, "VERBS")
			}
			rows := [][]string{header}
			for _, res := range list {
				row := []string{res.Plural, strings.Join(res.ShortNames, ","), res.GroupVersion(), strconv.FormatBool(res.Namespaced), res.Kind}
				if output == "wide" {
					row = append(row, "["+strings.Join(res.Verbs, " ")+"]")
				}
				rows = append(rows, row)
			}
			return (&blankColumns{columns{w: w}}).print(rows...)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, wide or name")
	cmd.Flags().StringVar(&namespaced, "namespaced", "", "true or false: only namespaced, or only cluster-scoped, resources")
	return cmd
}

func cmpStrings(a1, b1, a2, b2 string) int {
	if c := strings.Compare(a1, b1); c != 0 {
		return c
	}
	return strings.Compare(a2, b2)
}

// blankColumns prints empty cells as blanks, as kubectl api-resources does.
type blankColumns struct{ columns }

func (c *blankColumns) print(rows ...[]string) error {
	for _, row := range rows {
		for i, cell := range row {
			if cell == "" {
				row[i] = " "
			}
		}
	}
	return c.columns.print(rows...)
}
