package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
)

// The objects of a served kind are printed as the server's Table prints
// them (what kubectl get shows): the kind's printer columns (a stack
// installation's READY and SYNCED, a Type's additionalPrinterColumns, else
// AGE), and with -o wide those of priority above 0 (REVISION, BACKEND,
// LOCKED-BY). The columns are defined once, by the server, for both.

// printsServerTable reports whether res's table is the server's: the
// objects of the kinds Types serve, and the hub's kinds the CLI has no
// table of its own for (stacks, proposals). typeinstances, types and
// backends keep the CLI's tables (cli.md).
func printsServerTable(res client.Resource, output string) bool {
	if output != "table" && output != "wide" && output != "" {
		return false
	}
	if res.Group == rest.HubGroup {
		return res.Plural != "typeinstances" && res.Plural != "types" && res.Plural != "backends" && slices.Contains(res.Verbs, "list")
	}
	return res.Group != ""
}

// serverTable is a Table as the CLI prints it.
type serverTable struct {
	shown         []int // the columns shown, by index
	header        []string
	withNamespace bool
	labels        bool
	events        bool
}

func newServerTable(defs []rest.TableColumn, wide, withNamespace, labels, events bool) serverTable {
	t := serverTable{withNamespace: withNamespace, labels: labels, events: events}
	if events {
		t.header = append(t.header, "EVENT")
	}
	if withNamespace {
		t.header = append(t.header, "NAMESPACE")
	}
	for i, c := range defs {
		if c.Priority > 0 && !wide {
			continue
		}
		t.shown = append(t.shown, i)
		t.header = append(t.header, strings.ToUpper(c.Name))
	}
	if labels {
		t.header = append(t.header, "LABELS")
	}
	return t
}

// row is the printed row of r; event is the watch event's type.
func (t serverTable) row(r rest.TableRow, event string) []string {
	var out []string
	if t.events {
		out = append(out, event)
	}
	if t.withNamespace {
		ns, _ := rowMeta(r)
		out = append(out, ns)
	}
	for _, i := range t.shown {
		var cell any
		if i < len(r.Cells) {
			cell = r.Cells[i]
		}
		out = append(out, cellText(cell))
	}
	if t.labels {
		out = append(out, rowLabels(r))
	}
	return out
}

// rowLabels are a row's object's labels as kubectl --show-labels prints
// them: k=v,k=v, sorted.
func rowLabels(r rest.TableRow) string {
	m, _ := r.Object.(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	raw, _ := meta["labels"].(map[string]any)
	labels := make(map[string]string, len(raw))
	for k, v := range raw {
		labels[k], _ = v.(string)
	}
	return keyValues(labels)
}

// rowMeta is the namespace and name of a row's object (includeObject=Metadata).
func rowMeta(r rest.TableRow) (namespace, name string) {
	m, _ := r.Object.(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	namespace, _ = meta["namespace"].(string)
	name, _ = meta["name"].(string)
	return namespace, name
}

// cellText is a cell as kubectl prints it; nothing is empty (<none>).
func cellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// printWarnings shows the server's warnings as kubectl does.
func printWarnings(errw io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(errw, "Warning: %s\n", w)
	}
}
