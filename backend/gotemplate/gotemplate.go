// Package gotemplate is the Go-template projection backend of seed 000
// ("Dynamic TypeInstance projections"): an instance stored in it has no value
// of its own but a context {template, variables}, and its value is the
// template rendered with the current latest values of the instances the
// variables name. A projection never goes stale: every read renders again.
//
// The backend is context-only (acceptValue false) and stateless: it keeps
// nothing, so it needs no storage and several copies may serve at once. It
// reads the instances it renders from a Source: the hub itself when the hub
// runs it in-process, or the hub's REST API when it runs as an external
// backend (cairn backend gotemplate; the REST client is a Source).
//
// Create-time resolution belongs to the hub, not here: the hub owns the uses
// tree (stored edges and those of the batch being created), so it resolves
// every relatedTypeInstanceAlias to an id before calling the backend, adds a
// uses edge from the projection to every instance it references, and passes
// the values of referenced instances that the batch is creating (not yet
// readable from any Source) in the reserved context field batchValues of the
// GetPreCreateValue call, which renders the template once so a broken
// template refuses the create. batchValues is never stored.
//
// Template functions are those of github.com/go-task/slim-sprig/v3 (sprig's
// string, list, dict, math, date, encoding and default functions, without the
// crypto and OS ones) plus toYaml and toJson; a missing key is an error
// (Option("missingkey=error")).
package gotemplate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"text/template"

	sprig "github.com/go-task/slim-sprig/v3"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
)

// Registration of the hub's own instance of this backend.
const (
	// TypePath is the Type of gotemplate backend instances (seed 000). The
	// hub treats every backend of this Type as a projection backend.
	TypePath = cairn.StorageTypePrefix + ".gotemplate"
	// BackendID is the fixed, documented id of the in-process instance
	// every hub registers (the id seed 000 gives it).
	BackendID = "abd48b8c-99bd-40a7-99c0-047bd69f1db8"
	// Alias is the alias of that instance.
	Alias = "gotemplate"
	// InProcessURL is its url: the hub serves it itself, no network.
	InProcessURL = "inprocess://gotemplate"
	// BatchValuesField is the reserved context field in which the hub
	// passes, at create, the values of referenced instances of the same
	// batch: {"<id>": <value>}.
	BatchValuesField = "batchValues"
)

// ContextSchema is the JSON Schema of a projection's context (seed 000).
const ContextSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "type": "object",
  "default": {},
  "examples": [{
    "template": "username: '{{ .creds.username }}'\npassword: '{{ .creds.password }}'",
    "variables": {"creds": {"relatedTypeInstanceAlias": "db-credentials"}, "host": {"typeInstanceID": "b895d2d4-d0e0-4f7c-9666-4c3d197d1795"}}
  }],
  "required": ["variables", "template"],
  "properties": {
    "template": {"type": "string", "minLength": 1},
    "variables": {
      "type": "object",
      "additionalProperties": false,
      "patternProperties": {
        "^[a-zA-Z0-9_]+$": {
          "type": "object",
          "properties": {
            "typeInstanceID": {"type": "string"},
            "relatedTypeInstanceAlias": {"type": "string"}
          },
          "additionalProperties": false
        }
      }
    }
  },
  "additionalProperties": true
}`

// TypeSchema is the JSON Schema of the backend Type's values: a storage
// backend value whose acceptValue is false (seed 000).
const TypeSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "type": "object",
  "required": ["url", "acceptValue", "contextSchema"],
  "properties": {
    "url": {"type": "string", "minLength": 1},
    "acceptValue": {"const": false},
    "contextSchema": {"type": "object"}
  }
}`

// Variable names one instance whose value a template sees under the
// variable's name.
type Variable struct {
	TypeInstanceID           string `json:"typeInstanceID,omitempty"`
	RelatedTypeInstanceAlias string `json:"relatedTypeInstanceAlias,omitempty"`
}

// Context is a projection's backend context.
type Context struct {
	Template  string              `json:"template"`
	Variables map[string]Variable `json:"variables"`
	// BatchValues is set by the hub at create only (see the package doc).
	BatchValues map[string]json.RawMessage `json:"batchValues,omitempty"`
}

// ParseContext decodes a context. It does not require ids (the hub calls it
// before resolving aliases).
func ParseContext(doc json.RawMessage) (Context, error) {
	var c Context
	if len(doc) == 0 {
		return c, cairn.Errorf(cairn.CodeInvalid, "gotemplate: a projection needs a context {template, variables}")
	}
	if err := json.Unmarshal(doc, &c); err != nil {
		return c, cairn.Errorf(cairn.CodeInvalid, "gotemplate: context: %w", err)
	}
	if c.Template == "" {
		return c, cairn.Errorf(cairn.CodeInvalid, "gotemplate: context.template is required")
	}
	return c, nil
}

// Source reads the instances a projection references.
type Source interface {
	// Value returns the latest value of an instance; cairn.CodeNotFound when
	// it does not exist.
	Value(ctx context.Context, id string) (json.RawMessage, error)
}

// BatchSource is a Source that reads several values at once; Render uses it
// when the Source implements it, so a projection with many variables costs
// one read, not one per variable.
type BatchSource interface {
	// Values returns the latest value of each id; cairn.CodeNotFound when
	// one does not exist.
	Values(ctx context.Context, ids []string) (map[string]json.RawMessage, error)
}

// Backend renders projections. It implements cairn.Backend and the SDK's
// ContextBackend.
type Backend struct {
	src Source

	// parsed caches parsed templates by text: every read of a projection
	// renders, and parsing with sprig's function map costs more than
	// executing. A parsed template is safe for concurrent Execute.
	mu     sync.Mutex
	parsed map[string]*template.Template
}

// maxParsed bounds the template cache; it is emptied when full.
const maxParsed = 1024

// New returns a backend reading instances from src.
func New(src Source) *Backend { return &Backend{src: src, parsed: map[string]*template.Template{}} }

func (b *Backend) parse(text string) (*template.Template, error) {
	b.mu.Lock()
	t, ok := b.parsed[text]
	b.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := Parse(text)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if len(b.parsed) >= maxParsed {
		clear(b.parsed)
	}
	b.parsed[text] = t
	b.mu.Unlock()
	return t, nil
}

// Parse parses a template with the backend's functions and missingkey=error.
func Parse(text string) (*template.Template, error) {
	t, err := template.New("projection").Option("missingkey=error").Funcs(funcs()).Parse(text)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "gotemplate: parse the template: %w", err)
	}
	return t, nil
}

func funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	f["toYaml"] = func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(b), "\n"), err
	}
	f["toJson"] = func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}
	return f
}

// Render renders c with the latest values of its variables (those of
// c.BatchValues first) and returns the output as a JSON value: the output
// must be a YAML or JSON document.
func (b *Backend) Render(ctx context.Context, c Context) (json.RawMessage, error) {
	t, err := b.parse(c.Template)
	if err != nil {
		return nil, err
	}
	data := make(map[string]any, len(c.Variables))
	var fetched map[string]json.RawMessage
	if bsrc, ok := b.src.(BatchSource); ok {
		var ids []string
		for _, v := range c.Variables {
			if _, given := c.BatchValues[v.TypeInstanceID]; !given && v.TypeInstanceID != "" {
				ids = append(ids, v.TypeInstanceID)
			}
		}
		if len(ids) > 0 {
			if fetched, err = bsrc.Values(ctx, ids); err != nil {
				return nil, fmt.Errorf("gotemplate: read the referenced TypeInstances: %w", err)
			}
		}
	}
	for _, name := range sortedKeys(c.Variables) {
		v := c.Variables[name]
		if v.TypeInstanceID == "" {
			return nil, cairn.Errorf(cairn.CodeInvalid, "gotemplate: variable %q has no typeInstanceID (an alias must be resolved by the hub at create)", name)
		}
		raw, ok := c.BatchValues[v.TypeInstanceID]
		if !ok {
			raw, ok = fetched[v.TypeInstanceID]
		}
		if !ok {
			if raw, err = b.src.Value(ctx, v.TypeInstanceID); err != nil {
				return nil, fmt.Errorf("gotemplate: variable %q: read TypeInstance %q: %w", name, v.TypeInstanceID, err)
			}
		}
		var val any
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &val); err != nil {
				return nil, fmt.Errorf("gotemplate: variable %q: value of %q: %w", name, v.TypeInstanceID, err)
			}
		}
		data[name] = val
	}
	var out bytes.Buffer
	if err := t.Execute(&out, data); err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "gotemplate: render: %w", err)
	}
	js, err := yaml.YAMLToJSON(out.Bytes())
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "gotemplate: the rendered template is not a YAML or JSON document: %w", err)
	}
	return js, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// withoutBatchValues returns the context document the hub stores: the one
// given minus batchValues, every other field kept.
func withoutBatchValues(doc json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	if _, ok := m[BatchValuesField]; !ok {
		return doc, nil
	}
	m = maps.Clone(m)
	delete(m, BatchValuesField)
	return json.Marshal(m)
}

func (b *Backend) renderDoc(ctx context.Context, doc json.RawMessage) (json.RawMessage, error) {
	c, err := ParseContext(doc)
	if err != nil {
		return nil, err
	}
	return b.Render(ctx, c)
}

// GetPreCreateValue renders the template: the hub calls it at create with
// resolved ids and batchValues, so a template that does not render refuses
// the create, and the rendered value is validated against the Type.
func (b *Backend) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return b.renderDoc(ctx, req.Context)
}

// OnCreate stores nothing: it checks that every variable has an id and
// returns the context without batchValues (the hub has already resolved
// aliases and rendered the template through GetPreCreateValue).
func (b *Backend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	return checkResolved(req.Context)
}

// OnUpdate accepts a new resource version; the value stays derived.
func (b *Backend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	return checkResolved(req.Context)
}

func checkResolved(doc json.RawMessage) (json.RawMessage, error) {
	c, err := ParseContext(doc)
	if err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(c.Variables) {
		if c.Variables[name].TypeInstanceID == "" {
			return nil, cairn.Errorf(cairn.CodeInvalid, "gotemplate: variable %q has no typeInstanceID", name)
		}
	}
	if _, err := Parse(c.Template); err != nil {
		return nil, err
	}
	return withoutBatchValues(doc)
}

// OnDelete has nothing to delete.
func (b *Backend) OnDelete(context.Context, cairn.OnDeleteRequest) error { return nil }

// OnDeleteRevision has nothing to delete.
func (b *Backend) OnDeleteRevision(context.Context, cairn.OnDeleteRevisionRequest) error { return nil }

// GetValue renders the template with the referenced instances' current
// latest values, whatever resource version is asked: a projection shows
// its sources as they are now (seed 000).
func (b *Backend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	return b.renderDoc(ctx, req.Context)
}

// GetLockedBy reports no lock: the hub's store holds locks, and a
// stateless backend keeps no copy.
func (b *Backend) GetLockedBy(context.Context, cairn.GetLockedByRequest) (string, error) {
	return "", nil
}

// OnLock accepts the lock (the hub records it).
func (b *Backend) OnLock(context.Context, cairn.OnLockRequest) error { return nil }

// OnUnlock accepts the unlock.
func (b *Backend) OnUnlock(context.Context, cairn.OnUnlockRequest) error { return nil }

var _ cairn.Backend = (*Backend)(nil)
