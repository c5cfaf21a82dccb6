package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/store"
)

// Server-side printing, as the API server does it: a GET or list whose
// Accept asks for application/json;as=Table;g=meta.k8s.io;v=v1 (what
// kubectl get sends) is answered with a meta.k8s.io Table whose columns
// are the kind's: a Type's additionalPrinterColumns (else AGE, as for a
// CRD that declares none) and cairn's own columns for its kinds. Columns
// of priority above 0 are printed by kubectl only with -o wide.

// Table is a meta.k8s.io Table.
type Table struct {
	Kind              string        `json:"kind"`
	APIVersion        string        `json:"apiVersion"`
	Metadata          ListMeta      `json:"metadata"`
	ColumnDefinitions []TableColumn `json:"columnDefinitions"`
	Rows              []TableRow    `json:"rows"`
}

// TableColumn defines one column.
type TableColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
}

// TableRow is one object's cells and, unless includeObject=None, the
// object or its metadata.
type TableRow struct {
	Cells  []any `json:"cells"`
	Object any   `json:"object,omitempty"`
}

// tableRequest says whether a request asks for a Table, at which version,
// and what each row carries (includeObject).
type tableRequest struct {
	version       string // "v1" or "v1beta1"; "" when no Table is wanted
	includeObject string // None, Metadata (default) or Object
	// unknown: the uids of rows whose values could not be read (their
	// backend is down); their value columns show <unknown>.
	unknown map[string]bool
}

// unknownCell is what a value column shows when the value could not be
// read, as kubectl shows what it cannot compute.
const unknownCell = "<unknown>"

// unreadable collects, for a Table whose columns read values, the
// instances whose backend could not give theirs (hub.ListOptions.Unreadable):
// the table lists them with <unknown> cells and a warning per backend says
// why, instead of the whole table failing while one backend is down.
type unreadable struct {
	backends []string         // in the order found
	first    map[string]error // the first error of each backend
	count    map[string]int
}

// collect returns the hub's Unreadable callback for tr, nil when tr's rows
// carry whole objects (which cannot be shown without their values).
func (u *unreadable) collect(tr *tableRequest) func(cairn.Instance, error) {
	if tr.version == "" || tr.includeObject == "Object" {
		return nil
	}
	return func(inst cairn.Instance, err error) {
		if tr.unknown == nil {
			tr.unknown, u.first, u.count = map[string]bool{}, map[string]error{}, map[string]int{}
		}
		tr.unknown[inst.ID] = true
		b := inst.Backend.ID
		if _, ok := u.first[b]; !ok {
			u.backends = append(u.backends, b)
			u.first[b] = err
		}
		u.count[b]++
	}
}

// warn adds a warning per backend whose values could not be read.
func (u *unreadable) warn(w http.ResponseWriter) {
	for _, b := range u.backends {
		msg := fmt.Sprintf("1 value could not be read and shows %s: %v", unknownCell, u.first[b])
		if n := u.count[b]; n > 1 {
			msg = fmt.Sprintf("%d values could not be read and show %s; the first: %v", n, unknownCell, u.first[b])
		}
		addWarning(w, msg)
	}
}

// wantsTable reads the Accept header in order: the first media type the
// server can serve decides, as the API server negotiates.
func wantsTable(r *http.Request) (tableRequest, error) {
	var tr tableRequest
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mt, params, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		if mt != "application/json" && mt != "*/*" && mt != "application/*" {
			continue
		}
		if params["as"] == "" {
			return tr, nil
		}
		if params["as"] == "Table" && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
			tr.version = params["v"]
			break
		}
	}
	if tr.version == "" {
		return tr, nil
	}
	switch io := query(r).Get("includeObject"); io {
	case "":
		tr.includeObject = "Metadata"
	case "None", "Metadata", "Object":
		tr.includeObject = io
	default:
		return tr, errStatus{badRequest("includeObject %q is not supported: want None, Metadata or Object", io)}
	}
	return tr, nil
}

// printColumn is a column and how to get its cell from a served object.
type printColumn struct {
	def  TableColumn
	path *jsonpath.JSONPath // nil for the name column
	// cell, when set, computes the cell instead of path. It reads only
	// the object: a row's cells are kept by the object's change number.
	cell func(obj map[string]any) any
	// resolve, when set, turns the cell into what the row shows, at each
	// request: what depends on more than the object (a backend's alias).
	resolve func(cell any) any
	// src is the column's JSON path, as declared (part of the key rows
	// are kept by).
	src string
	// value: the cell is computed from the instance's value (spec of a
	// Type's kind), which must then be read from its backend.
	value bool
}

// valueColumn is a declared column of a Type's kind: it reads the value
// unless its path stays in metadata or status, which the hub holds.
func valueColumn(c cairn.PrinterColumn) printColumn {
	pc := newColumn(c)
	p := strings.TrimPrefix(strings.TrimSpace(c.JSONPath), "$")
	pc.value = true
	for _, root := range []string{".metadata", ".status"} {
		if rest, ok := strings.CutPrefix(p, root); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			pc.value = false
		}
	}
	return pc
}

func newColumn(c cairn.PrinterColumn) printColumn {
	pc := printColumn{def: TableColumn{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority},
		src: c.JSONPath}
	if pc.def.Description == "" {
		pc.def.Description = "Custom resource definition column (in JSONPath format): " + c.JSONPath
	}
	jp := jsonpath.New(c.Name).AllowMissingKeys(true)
	if err := jp.Parse("{" + c.JSONPath + "}"); err == nil {
		pc.path = jp
	}
	return pc
}

func nameColumn(desc string) printColumn {
	return printColumn{def: TableColumn{Name: "Name", Type: "string", Format: "name", Description: desc}}
}

var ageColumn = cairn.PrinterColumn{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
	Description: "When the object was created."}

// userColumns are a user kind's columns: NAME, the Type's declared
// columns (else AGE), and cairn's own at priority 1 (-o wide).
func userColumns(t *cairn.Type, backendName func(id string) string) []printColumn {
	cols := []printColumn{nameColumn("The instance's name, unique per Type and namespace.")}
	declared := []cairn.PrinterColumn{ageColumn}
	switch {
	case t != nil && len(t.PrinterColumns) > 0:
		declared = t.PrinterColumns
	case len(schemaColumns(t)) > 0:
		// Columns kept in the JSON Schema (hub.PrinterColumnsKey, what
		// stack installation kinds declare), then AGE.
		declared = append(schemaColumns(t), ageColumn)
	}
	taken := map[string]bool{}
	for _, c := range declared {
		cols = append(cols, valueColumn(c))
		taken[strings.ToLower(c.Name)] = true
	}
	for _, c := range []cairn.PrinterColumn{
		{Name: "Revision", Type: "integer", JSONPath: ".metadata.generation", Priority: 1, Description: "The instance's resource version: 1, 2, ..."},
		{Name: "Backend", Type: "string", JSONPath: ".status.backend.id", Priority: 1, Description: "The storage backend holding the value: its alias, else its id."},
		{Name: "Locked-By", Type: "string", JSONPath: ".status.lockedBy", Priority: 1, Description: "The lock owner, if locked."},
	} {
		if taken[strings.ToLower(c.Name)] {
			continue
		}
		pc := newColumn(c)
		if c.Name == "Backend" {
			pc.cell = func(o map[string]any) any {
				id, _ := nested(o, "status", "backend", "id").(string)
				return id
			}
			pc.resolve = backendAlias(backendName)
		}
		cols = append(cols, pc)
	}
	return cols
}

// backendAlias resolves a Backend cell, the backend's id, to its alias.
func backendAlias(backendName func(id string) string) func(any) any {
	return func(cell any) any {
		id, _ := cell.(string)
		return backendName(id)
	}
}

// typeInstanceColumns are the Capact view's: NAME is the instance's
// readable name (the object is addressed by id, which -o wide shows).
func typeInstanceColumns(backendName func(id string) string) []printColumn {
	cols := []printColumn{
		{def: TableColumn{Name: "Name", Type: "string", Format: "name", Description: "The instance's name (typeinstances/<name> finds it when unique; the ID always does)."},
			cell: func(o map[string]any) any { return nested(o, "spec", "name") }},
		newColumn(cairn.PrinterColumn{Name: "Type", Type: "string", JSONPath: ".spec.typeRef.path", Description: "The Type's path."}),
		newColumn(cairn.PrinterColumn{Name: "Revision", Type: "integer", JSONPath: ".status.resourceVersion", Description: "The instance's latest resource version."}),
		{def: TableColumn{Name: "Backend", Type: "string", Description: "The storage backend holding the value: its alias, else its id."},
			cell: func(o map[string]any) any {
				id, _ := nested(o, "spec", "backend", "id").(string)
				return id
			},
			resolve: backendAlias(backendName)},
		newColumn(cairn.PrinterColumn{Name: "Locked-By", Type: "string", JSONPath: ".status.lockedBy", Description: "The lock owner, if locked."}),
		newColumn(ageColumn),
		newColumn(cairn.PrinterColumn{Name: "Namespace", Type: "string", JSONPath: ".spec.namespace", Priority: 1, Description: "The instance's namespace."}),
		newColumn(cairn.PrinterColumn{Name: "Alias", Type: "string", JSONPath: ".spec.alias", Priority: 1, Description: "The instance's alias."}),
		newColumn(cairn.PrinterColumn{Name: "Type-Revision", Type: "string", JSONPath: ".spec.typeRef.revision", Priority: 1, Description: "The Type's revision."}),
		newColumn(cairn.PrinterColumn{Name: "Created-By", Type: "string", JSONPath: ".status.createdBy", Priority: 1, Description: "Who wrote the latest resource version."}),
		newColumn(cairn.PrinterColumn{Name: "ID", Type: "string", JSONPath: ".metadata.uid", Priority: 1, Description: "The instance's id, its name in the URL."}),
	}
	return cols
}

func typeColumns() []printColumn {
	return []printColumn{
		nameColumn("<path>:<revision>."),
		newColumn(cairn.PrinterColumn{Name: "Kind", Type: "string", JSONPath: ".spec.rest.names.kind", Description: "The kind it is served as, if any."}),
		{def: TableColumn{Name: "API-Version", Type: "string", Description: "The group/version it is served at."},
			cell: func(o map[string]any) any {
				g, _ := nested(o, "spec", "rest", "group").(string)
				v, _ := nested(o, "spec", "rest", "version").(string)
				if g == "" {
					return nil
				}
				return g + "/" + v
			}},
		newColumn(ageColumn),
		newColumn(cairn.PrinterColumn{Name: "Short-Names", Type: "string", JSONPath: ".spec.rest.names.shortNames", Priority: 1}),
	}
}

func backendColumns() []printColumn {
	return []printColumn{
		nameColumn("The backend's id."),
		newColumn(cairn.PrinterColumn{Name: "Alias", Type: "string", JSONPath: ".spec.alias"}),
		newColumn(cairn.PrinterColumn{Name: "Type", Type: "string", JSONPath: ".spec.typeRef.path"}),
		newColumn(cairn.PrinterColumn{Name: "Accept-Value", Type: "boolean", JSONPath: ".spec.acceptValue"}),
		newColumn(ageColumn),
		newColumn(cairn.PrinterColumn{Name: "URL", Type: "string", JSONPath: ".spec.url", Priority: 1}),
	}
}

// stackColumns are those of cairn stack list: the version, the kind of
// its installations and their apiVersion (-o wide: digest, description).
func stackColumns() []printColumn {
	return []printColumn{
		nameColumn("<name>@<version>."),
		newColumn(cairn.PrinterColumn{Name: "Version", Type: "string", JSONPath: ".spec.version", Description: "The package's version."}),
		newColumn(cairn.PrinterColumn{Name: "Kind", Type: "string", JSONPath: ".spec.manifest.kind.names.kind", Description: "The kind of the stack's installations."}),
		{def: TableColumn{Name: "API-Version", Type: "string", Description: "The group/version its installations are served at."},
			cell: func(o map[string]any) any {
				g, _ := nested(o, "spec", "manifest", "kind", "group").(string)
				v, _ := nested(o, "spec", "manifest", "kind", "version").(string)
				if g == "" {
					return nil
				}
				return g + "/" + v
			}},
		newColumn(ageColumn),
		newColumn(cairn.PrinterColumn{Name: "Digest", Type: "string", JSONPath: ".spec.digest", Priority: 1, Description: "The SHA-256 of the package's canonical archive."}),
		newColumn(cairn.PrinterColumn{Name: "Description", Type: "string", JSONPath: ".spec.description", Priority: 1}),
	}
}

func proposalColumns() []printColumn {
	return []printColumn{
		nameColumn("The proposal's id."),
		newColumn(cairn.PrinterColumn{Name: "Instance", Type: "string", JSONPath: ".spec.instances[0].name"}),
		newColumn(cairn.PrinterColumn{Name: "RV", Type: "integer", JSONPath: ".spec.instances[0].resourceVersion"}),
		newColumn(cairn.PrinterColumn{Name: "State", Type: "string", JSONPath: ".status.state"}),
		newColumn(cairn.PrinterColumn{Name: "URL", Type: "string", JSONPath: ".spec.url"}),
		newColumn(ageColumn),
		newColumn(cairn.PrinterColumn{Name: "Branch", Type: "string", JSONPath: ".spec.branch", Priority: 1}),
	}
}

// writeTable answers with a Table of objects (each as served).
func writeTable(w http.ResponseWriter, tr tableRequest, cols []printColumn, meta ListMeta, objects []any) {
	writeTableJSON(w, tableOf(tr, cols, meta, objects))
}

// tableOf is the Table of objects (each as served), every row computed.
func tableOf(tr tableRequest, cols []printColumn, meta ListMeta, objects []any) Table {
	items := make([]tableItem, len(objects))
	for i, o := range objects {
		items[i].obj = o
	}
	return buildTable(tr, cols, meta, items, nil, "", time.Now())
}

// tableItem is an object of a Table and, when its row may be kept
// (rowKeepable), the instance it shows.
type tableItem struct {
	obj  any
	inst *cairn.Instance
	// row, when set, is inst's kept row, found before obj was built (and
	// obj is nil unless includeObject=Object).
	row *keptRow
}

// buildTable is the Table of items. A row's cells and metadata are taken
// from rows when its instance's are kept there under key (the columns),
// else computed from its object and kept; either way each cell is then
// shown as of now (tableRows says why).
func buildTable(tr tableRequest, cols []printColumn, meta ListMeta, items []tableItem, rows *tableRows, key string, now time.Time) Table {
	t := Table{Kind: "Table", APIVersion: "meta.k8s.io/" + tr.version, Metadata: meta, Rows: make([]TableRow, 0, len(items))}
	for _, c := range cols {
		t.ColumnDefinitions = append(t.ColumnDefinitions, c.def)
	}
	for _, it := range items {
		// A row whose value could not be read (its backend is down) shows
		// <unknown> in the columns that read the value, and is not kept.
		unknown := false
		if len(tr.unknown) > 0 {
			if it.inst != nil {
				unknown = tr.unknown[it.inst.ID]
			} else {
				unknown = tr.unknown[fmt.Sprint(nested(asMap(it.obj), "metadata", "uid"))]
			}
		}
		keep := rows != nil && it.inst != nil && !unknown
		kr, ok := keptRow{}, false
		switch {
		case it.row != nil:
			kr, ok = *it.row, true
		case keep:
			kr, ok = rows.get(it.inst, key)
		}
		var m map[string]any
		if !ok {
			m = asMap(it.obj)
			kr.cells = make([]any, len(cols))
			for i, c := range cols {
				kr.cells[i] = cellOf(c, m)
			}
			if keep {
				if kr.meta = partialMetadata(m); kr.meta != nil {
					rows.put(it.inst, key, kr)
				}
			}
		}
		row := TableRow{Cells: make([]any, len(cols))}
		for i, c := range cols {
			if unknown && c.value {
				row.Cells[i] = unknownCell
				continue
			}
			row.Cells[i] = c.show(kr.cells[i], now)
		}
		switch tr.includeObject {
		case "Object":
			row.Object = it.obj
		case "Metadata":
			if kr.meta != nil {
				row.Object = json.RawMessage(kr.meta)
			} else {
				row.Object = map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": m["metadata"]}
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// partialMetadata is the encoded PartialObjectMetadata of an object as
// asMap decodes it (what includeObject=Metadata, kubectl's default,
// shows); nil if it cannot be encoded.
func partialMetadata(m map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": m["metadata"]})
	if err != nil {
		return nil
	}
	return b
}

// asMap is o as JSON decodes it, which the column paths are evaluated on.
// A Type's JSON Schema, which can be large, is left out: no column reads
// it (typeColumns), and the rows' objects are o itself.
func asMap(o any) map[string]any {
	if t, ok := o.(TypeObject); ok {
		t.Spec.JSONSchema = nil
		o = t
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&m)
	return m
}

func nested(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

// cellOf computes one cell the way the API server does for a CRD column:
// the first result of the JSON path, typed by the column; missing is nil
// (kubectl prints <none>). It depends on obj only: a date is the time
// (show makes it an age), a Backend cell the backend's id (show names it).
func cellOf(c printColumn, obj map[string]any) any {
	if c.cell != nil {
		return c.cell(obj)
	}
	if c.path == nil {
		if c.def.Format == "name" {
			return nested(obj, "metadata", "name")
		}
		return nil
	}
	results, err := c.path.FindResults(obj)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	v := results[0][0].Interface()
	if v == nil {
		return nil
	}
	switch c.def.Type {
	case "string":
		var buf bytes.Buffer
		if err := c.path.PrintResults(&buf, []reflect.Value{reflect.ValueOf(v)}); err != nil {
			return nil
		}
		return buf.String()
	case "integer":
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				return i
			}
		}
		return nil
	case "number":
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return f
			}
		}
		return nil
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
		return nil
	case "date":
		s, ok := v.(string)
		if !ok {
			return nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return "<invalid>"
		}
		return t
	}
	return fmt.Sprint(v)
}

// show is what the row shows for cell (cellOf's) at now: a date's age,
// a resolved cell.
func (c printColumn) show(cell any, now time.Time) any {
	if t, ok := cell.(time.Time); ok {
		return duration.HumanDuration(now.Sub(t))
	}
	if c.resolve != nil {
		return c.resolve(cell)
	}
	return cell
}

// writeRead answers a GET or a list: the object or list as JSON, or a
// Table of it when the request asks for one.
func (s *Server) writeRead(w http.ResponseWriter, r *http.Request, res *resource, v any) {
	tr, err := wantsTable(r)
	if err != nil {
		writeStatus(w, statusOf(err, target{}))
		return
	}
	var cols []printColumn
	if tr.version != "" {
		cols = s.columns(r, res)
	}
	writeReadAs(w, tr, cols, v)
}

// writeReadAs is writeRead with the request's Table and columns known.
func writeReadAs(w http.ResponseWriter, tr tableRequest, cols []printColumn, v any) {
	if tr.version == "" {
		writeJSON(w, http.StatusOK, v)
		return
	}
	if l, ok := v.(List); ok {
		writeTable(w, tr, cols, l.Metadata, l.Items)
		return
	}
	writeTable(w, tr, cols, ListMeta{}, []any{v})
}

// listShape is what a list or watch answers with: a Table (tr, with its
// columns) or objects, and whether it reads the instances' values.
func (s *Server) listShape(r *http.Request, req request, o listOptions) (tr tableRequest, cols []printColumn, values bool, err error) {
	if tr, err = wantsTable(r); err != nil {
		return tr, nil, false, err
	}
	if tr.version != "" {
		cols = s.columns(r, req.res)
	}
	return tr, cols, withValues(o, tr, cols), nil
}

// withValues says whether a list or watch of instances shows their values
// (each read from its backend): JSON does unless ?values=false; a Table
// only when a column or the rows' objects (includeObject=Object) show
// them, so that kubectl get lists every instance while a backend is down.
func withValues(o listOptions, tr tableRequest, cols []printColumn) bool {
	if tr.version == "" {
		return !o.noValues
	}
	if tr.includeObject == "Object" {
		return !o.noValues
	}
	return slices.ContainsFunc(cols, func(c printColumn) bool { return c.value })
}

// withoutValues clears the values of insts that were listed without them
// (the read cache may have had some): an object shows its value or none.
func withoutValues(insts []cairn.Instance) {
	for i := range insts {
		insts[i].Latest.Value = nil
	}
}

// listErr is the error of a list or watch of res that failed, saying how
// to list without values when a backend is unavailable.
func listErr(err error, res *resource, tr tableRequest) error {
	if !cairn.HasCode(err, cairn.CodeUnavailable) {
		return err
	}
	name := res.plural
	if res.group != "" {
		name += "." + res.group
	}
	if tr.version != "" {
		return fmt.Errorf("list %s: %w; the table's columns show values: ?values=false lists the objects without them", name, err)
	}
	return fmt.Errorf("list %s: %w; ?values=false lists them without values (as does a table, kubectl get's default output)", name, err)
}

// columns are the Table columns of a resource.
func (s *Server) columns(r *http.Request, res *resource) []printColumn {
	switch res.hubKind {
	case "":
		return userColumns(res.typ, s.backendNames(r))
	case "typeinstances":
		return typeInstanceColumns(s.backendNames(r))
	case "types":
		return typeColumns()
	case "backends":
		return backendColumns()
	case "namespaces":
		return namespaceColumns()
	case "proposals":
		return proposalColumns()
	case "stacks":
		return stackColumns()
	}
	return []printColumn{nameColumn(""), newColumn(ageColumn)}
}

// backendNames names storage backends by alias for the BACKEND column,
// reading the backends once per table, and only when an instance is held
// by a backend other than the built-in one (a store query: a fifth of a
// 100-row table's time when every row was the built-in backend's).
func (s *Server) backendNames(r *http.Request) func(id string) string {
	aliases := map[string]string{cairn.BuiltinBackendID: cairn.BuiltinBackendAlias}
	read := false
	return func(id string) string {
		if a, ok := aliases[id]; ok {
			return a
		}
		if !read {
			read = true
			// An alias is the backend's own setting: shown only to who may
			// list backends, as the backends resource would show it.
			if !s.hub.Authorize(r.Context(), rbac.Attributes{Verb: "list", ResourceRequest: true, APIGroup: HubGroup, Resource: "backends"}).Allowed {
				return id
			}
			insts, err := s.hub.ListInstances(r.Context(), store.InstanceFilter{
				Attributes: []store.AttributeFilter{{Path: cairn.StorageAttributePath}},
			}, false)
			if err == nil {
				for _, inst := range insts {
					if inst.Alias != "" && inst.Alias != inst.ID {
						aliases[inst.ID] = inst.Alias
					}
				}
			}
			if a, ok := aliases[id]; ok {
				return a
			}
		}
		return id
	}
}
