package schema

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/cairn-dev/cairn"
)

// messenger turns the library's error tree into causes worded as AJV words
// them.
type messenger struct {
	doc  any // the schema document, nil when unknown
	inst any // the instance validated, nil when unknown
	// showValues: name what an enum or a const allows after AJV's words
	// (Schema.ValidateShowingValues).
	showValues bool
}

// extraProperties is ": " and the properties additionalProperties refused,
// with those the schema at schemaURL declares, when m shows values:
// ": zone (known: projectID, region)".
func (m messenger) extraProperties(schemaURL string, extra []string) string {
	if !m.showValues || len(extra) == 0 {
		return ""
	}
	names := func(ns []string) string {
		ns = slices.Sorted(slices.Values(ns))
		out := make([]string, 0, min(len(ns), maxShownValues))
		for _, n := range ns[:min(len(ns), maxShownValues)] {
			out = append(out, propertyName(n))
		}
		return shownList(out, len(ns))
	}
	msg := ": " + names(extra)
	if tokens, ok := schemaPointer(schemaURL); ok {
		if node, ok := lookup(m.doc, tokens).(map[string]any); ok {
			if props, ok := node["properties"].(map[string]any); ok && len(props) > 0 {
				msg += " (known: " + names(slices.Collect(maps.Keys(props))) + ")"
			}
		}
	}
	return msg
}

// propertyName is a member name as a message names it: as written, or
// quoted as JSON when it would not read as one name in a list (empty,
// with spaces, commas, quotes or control characters, which a terminal
// would act on).
func propertyName(n string) string {
	if n != "" && !strings.ContainsFunc(n, func(r rune) bool {
		return r <= ' ' || r == ',' || r == '"' || r == 0x7f || !unicode.IsPrint(r)
	}) {
		return n
	}
	b, err := json.Marshal(n)
	if err != nil {
		return strconv.Quote(n)
	}
	return string(b)
}

// maxShownValues bounds the values (an enum's, the properties refused) a
// message names, and maxShownText each one's text: they are the schema
// author's or the writer's, of any number and length.
const (
	maxShownValues = 20
	maxShownText   = 64
)

// shownList joins the first maxShownValues items, each cut to
// maxShownText and printable, saying how many of total it leaves out.
func shownList(items []string, total int) string {
	items = items[:min(len(items), maxShownValues)]
	shown := make([]string, 0, len(items)+1)
	for _, it := range items {
		shown = append(shown, cairn.BoundText(it, maxShownText))
	}
	if total > len(items) {
		shown = append(shown, fmt.Sprintf("... (%d more)", total-len(items)))
	}
	return strings.Join(shown, ", ")
}

// allowed is ": " and the values, as JSON, when m shows them.
func (m messenger) allowed(values ...any) string {
	if !m.showValues || len(values) == 0 {
		return ""
	}
	texts := make([]string, 0, min(len(values), maxShownValues))
	for _, v := range values[:min(len(values), maxShownValues)] {
		b, err := json.Marshal(v)
		if err != nil {
			b = []byte(fmt.Sprint(v))
		}
		texts = append(texts, string(b))
	}
	return ": " + shownList(texts, len(values))
}

// collect appends the causes of e and its descendants to out. Wrapper errors
// (the schema, a group, allOf, $ref) contribute only their causes; leaves and
// the applicators AJV reports (anyOf, oneOf) contribute a message.
func (m messenger) collect(root string, e *jsonschema.ValidationError, out []cairn.Cause) []cairn.Cause {
	at := func(msg string) cairn.Cause {
		return cairn.Cause{Field: field(root, e.InstanceLocation), Message: msg}
	}
	recurse := func() {
		for _, c := range e.Causes {
			out = m.collect(root, c, out)
		}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		recurse()
	case *kind.AnyOf:
		out = append(out, at("must match a schema in anyOf"))
		recurse()
	case *kind.OneOf:
		out = append(out, at("must match exactly one schema in oneOf"))
		recurse()
	case *kind.Type:
		out = append(out, at("must be "+m.types(e.SchemaURL, k.Want)))
	case *kind.Required:
		for _, p := range k.Missing {
			out = append(out, at("must have required property '"+p+"'"))
		}
	case *kind.Dependency:
		out = append(out, at(dependencyMessage(k.Prop, k.Missing)))
	case *kind.DependentRequired:
		out = append(out, at(dependencyMessage(k.Prop, k.Missing)))
	case *kind.AdditionalProperties:
		out = append(out, at("must NOT have additional properties"+m.extraProperties(e.SchemaURL, k.Properties)))
	case *kind.PropertyNames:
		// The causes locate the name, not a value: report the name itself.
		out = append(out, at(fmt.Sprintf("property name '%s' must be valid", k.Property)))
	case *kind.Const:
		out = append(out, at("must be equal to constant"+m.allowed(k.Want)))
	case *kind.Enum:
		out = append(out, at("must be equal to one of the allowed values"+m.allowed(k.Want...)))
	case *kind.Minimum:
		out = append(out, at("must be >= "+ratString(k.Want)))
	case *kind.Maximum:
		out = append(out, at("must be <= "+ratString(k.Want)))
	case *kind.ExclusiveMinimum:
		out = append(out, at("must be > "+ratString(k.Want)))
	case *kind.ExclusiveMaximum:
		out = append(out, at("must be < "+ratString(k.Want)))
	case *kind.MultipleOf:
		out = append(out, at("must be multiple of "+ratString(k.Want)))
	case *kind.MinLength:
		out = append(out, at(fmt.Sprintf("must NOT have fewer than %d characters", k.Want)))
	case *kind.MaxLength:
		out = append(out, at(fmt.Sprintf("must NOT have more than %d characters", k.Want)))
	case *kind.MinItems:
		out = append(out, at(fmt.Sprintf("must NOT have fewer than %d items", k.Want)))
	case *kind.MaxItems:
		out = append(out, at(fmt.Sprintf("must NOT have more than %d items", k.Want)))
	case *kind.AdditionalItems:
		n := "the allowed number of"
		if arr, ok := lookup(m.inst, e.InstanceLocation).([]any); ok {
			n = strconv.Itoa(len(arr) - k.Count)
		}
		out = append(out, at("must NOT have more than "+n+" items"))
	case *kind.MinProperties:
		out = append(out, at(fmt.Sprintf("must NOT have fewer than %d properties", k.Want)))
	case *kind.MaxProperties:
		out = append(out, at(fmt.Sprintf("must NOT have more than %d properties", k.Want)))
	case *kind.UniqueItems:
		out = append(out, at("must NOT have duplicate items"))
	case *kind.Contains:
		// The causes say why each item failed the contains schema; AJV
		// reports only the count.
		out = append(out, at("must contain at least 1 valid item(s)"))
	case *kind.MinContains:
		out = append(out, at(fmt.Sprintf("must contain at least %d valid item(s)", k.Want)))
	case *kind.MaxContains:
		out = append(out, at(fmt.Sprintf("must contain at most %d valid item(s)", k.Want)))
	case *kind.Pattern:
		out = append(out, at(fmt.Sprintf("must match pattern %q", k.Want)))
	case *kind.Format:
		out = append(out, at(fmt.Sprintf("must match format %q", k.Want)))
	case *kind.Not:
		out = append(out, at("must NOT be valid"))
	case *kind.FalseSchema:
		out = append(out, m.falseSchema(root, e))
	default:
		if len(e.Causes) > 0 {
			recurse()
			break
		}
		msg := e.ErrorKind.LocalizedString(message.NewPrinter(language.English))
		out = append(out, at(msg))
	}
	return out
}

// falseSchema words a value rejected by a false schema. Where the false
// schema is a keyword value AJV reports on the parent ("unevaluatedProperties":
// false, "items": false after "prefixItems"), so does this.
func (m messenger) falseSchema(root string, e *jsonschema.ValidationError) cairn.Cause {
	cause := cairn.Cause{Field: field(root, e.InstanceLocation), Message: "boolean schema is false"}
	tokens, ok := schemaPointer(e.SchemaURL)
	if !ok || len(tokens) == 0 || len(e.InstanceLocation) == 0 || !lastIsKeyword(tokens) {
		return cause
	}
	parentField := field(root, e.InstanceLocation[:len(e.InstanceLocation)-1])
	switch tokens[len(tokens)-1] {
	case "unevaluatedProperties":
		return cairn.Cause{Field: parentField, Message: "must NOT have unevaluated properties"}
	case "unevaluatedItems":
		return cairn.Cause{Field: parentField, Message: "must NOT have unevaluated items"}
	case "items":
		n := 0
		if parent, ok := lookup(m.doc, tokens[:len(tokens)-1]).(map[string]any); ok {
			if prefix, ok := parent["prefixItems"].([]any); ok {
				n = len(prefix)
			}
		}
		return cairn.Cause{Field: parentField, Message: fmt.Sprintf("must NOT have more than %d items", n)}
	}
	return cause
}

// types renders the types a "type" keyword wants as AJV does: in the order
// the schema lists them, joined with ",".
func (m messenger) types(schemaURL string, want []string) string {
	if tokens, ok := schemaPointer(schemaURL); ok {
		if node, ok := lookup(m.doc, tokens).(map[string]any); ok {
			switch t := node["type"].(type) {
			case string:
				return t
			case []any:
				names := make([]string, 0, len(t))
				for _, x := range t {
					if s, ok := x.(string); ok {
						names = append(names, s)
					}
				}
				if len(names) > 0 {
					return strings.Join(names, ",")
				}
			}
		}
	}
	return strings.Join(want, ",")
}

func dependencyMessage(prop string, missing []string) string {
	noun := "property"
	if len(missing) > 1 {
		noun = "properties"
	}
	return fmt.Sprintf("must have %s %s when property %s is present", noun, strings.Join(missing, ", "), prop)
}

// ratString renders a keyword's number as JSON would.
func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// schemaPointer returns the JSON Pointer tokens of a location inside the
// compiled document, false for locations elsewhere (a metaschema).
func schemaPointer(loc string) ([]string, bool) {
	frag, ok := strings.CutPrefix(loc, baseURL+"#")
	if !ok {
		return nil, false
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, false
	}
	if frag == "" {
		return nil, true
	}
	if !strings.HasPrefix(frag, "/") {
		return nil, false // an anchor, not a pointer
	}
	tokens := strings.Split(frag[1:], "/")
	for i, t := range tokens {
		tokens[i] = tokenUnescaper.Replace(t)
	}
	return tokens, true
}

// lookup returns the node of v at path, nil when there is none.
func lookup(v any, path []string) any {
	for _, tok := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// lastIsKeyword reports whether the last token of a pointer into a schema
// names a keyword, rather than a property, a definition or an index.
func lastIsKeyword(tokens []string) bool {
	keyword := true // whether the token at hand is in keyword position
	for i, t := range tokens {
		if i == len(tokens)-1 {
			return keyword
		}
		if !keyword {
			keyword = true // a name or an index, followed by a schema
			continue
		}
		switch {
		case schemaMapKeywords[t], schemaListKeywords[t]:
			keyword = false
		case t == "items":
			// Draft 07 "items" may be an array: an index follows.
			_, err := strconv.Atoi(tokens[i+1])
			keyword = err != nil
		}
	}
	return false
}

func sortCauses(causes []cairn.Cause) []cairn.Cause {
	slices.SortFunc(causes, func(a, b cairn.Cause) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(causes)
}
