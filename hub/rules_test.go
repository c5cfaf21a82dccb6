package hub_test

// Tests for rules of the hub that no other test demonstrated: each one fails
// when the rule it names is broken (found by mutating package hub).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// idsOf returns the IDs of the first error with code in err's tree.
func idsOf(err error, code cairn.Code) []string {
	for _, e := range cairn.Errors(err) {
		if e.Code == code {
			return e.IDs
		}
	}
	return nil
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func causeStrings(err error) []string {
	var out []string
	for _, c := range cairn.Causes(err) {
		out = append(out, c.String())
	}
	return out
}

// rvOf returns the latest resource version of id.
func (e *env) rvOf(id string) int {
	e.t.Helper()
	return e.get(id).Latest.ResourceVersion
}

// preCreate makes a backend derive its initial value from the context, as a
// context-only backend (a Helm release, say) does.
type preCreate struct {
	cairn.Backend
	value json.RawMessage
}

func (p preCreate) GetPreCreateValue(context.Context, cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return p.value, nil
}

var storageType = cairn.TypeRef{Path: "cap.type.test.storage", Revision: "0.1.0"}

// Backend resolution: the backend's latest value must satisfy the storage
// schema; the error names the backend and every failing property.
func TestRuleBackendStorageSchemaCauses(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		causes []string
	}{
		{"url not a string", `{"url":5,"acceptValue":true,"contextSchema":null}`,
			[]string{"spec/value/url must be string"}},
		{"url null", `{"url":null,"acceptValue":true,"contextSchema":null}`,
			[]string{"spec/value/url must be string"}},
		{"acceptValue missing, contextSchema optional", `{"url":"test://x"}`,
			[]string{"spec/value must have required property 'acceptValue'"}},
		{"url and acceptValue missing, in declared order", `{"other-data":true}`,
			[]string{"spec/value must have required property 'url'", "spec/value must have required property 'acceptValue'"}},
		{"acceptValue null", `{"url":"test://x","acceptValue":null,"contextSchema":null}`,
			[]string{"spec/value/acceptValue must be boolean"}},
		{"contextSchema an array", `{"url":"test://x","acceptValue":true,"contextSchema":[]}`,
			[]string{"spec/value/contextSchema must be object"}},
		{"not an object", `[1]`, []string{"spec/value must be object"}},
		{"every failing property at once", `{"url":1,"acceptValue":"yes","contextSchema":"text"}`,
			[]string{"spec/value/url must be string", "spec/value/acceptValue must be boolean", "spec/value/contextSchema must be object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bad := e.create(hub.NewInstance{TypeRef: storageType, Value: json.RawMessage(tc.value)})
			before := e.count()
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bad}}}})
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, fmt.Sprintf("failed to resolve the TypeInstance's backend %q", bad))
			wantContains(t, err, strings.Join(tc.causes, ", "))
			if !errors.Is(err, cairn.ErrBackendRefused) {
				t.Errorf("error %v is not marked cairn.ErrBackendRefused", err)
			}
			if got := causeStrings(err); !slices.Equal(sorted(got), sorted(tc.causes)) {
				t.Errorf("causes = %q, want %q", got, tc.causes)
			}
			if ids := idsOf(err, cairn.CodeInvalid); !slices.Equal(ids, []string{bad}) {
				t.Errorf("error IDs = %v, want the backend %s", ids, bad)
			}
			if n := e.count(); n != before {
				t.Errorf("instances = %d, want %d", n, before)
			}
			// Describing the backend applies the same check.
			_, err = e.h.StorageBackend(e.ctx, bad)
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, tc.causes...)
		})
	}
}

// Capact's Local Hub keeps a backend's contextSchema as a string holding
// the schema's JSON (its storage schema says string, and Capact's own
// backends are registered so): such a backend is usable, its schema the
// parsed document. A string that does not hold a JSON object stays refused.
func TestRuleBackendContextSchemaAsJSONString(t *testing.T) {
	e := newEnv(t)
	schemaText := `{"$id":"#/properties/contextSchema","type":"object","properties":{"provider":{"$id":"#/properties/contextSchema/properties/name","type":"string"}}}`
	quoted, _ := json.Marshal(schemaText)
	bid, _ := e.addBackend("ext", true, string(quoted))

	e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`1`),
		Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"provider":"dotenv"}`)}})
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"provider":true}`)}}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, fmt.Sprintf("External backend %q: invalid input: context/provider must be string", bid))

	sb, err := e.h.StorageBackend(e.ctx, bid)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(sb.ContextSchema, &got); err != nil {
		t.Fatalf("contextSchema %s: %v", sb.ContextSchema, err)
	}
	_ = json.Unmarshal([]byte(schemaText), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("contextSchema = %s, want the parsed document %s", sb.ContextSchema, schemaText)
	}

	for _, bad := range []string{`"yaml: true"`, `"[1]"`} {
		t.Run(bad, func(t *testing.T) {
			bad := e.create(hub.NewInstance{TypeRef: storageType, Value: json.RawMessage(`{"url":"test://ext","acceptValue":true,"contextSchema":` + bad + `}`)})
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bad}}}})
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, "spec/value/contextSchema must be object")
		})
	}
}

// A backend's rules (acceptValue, its context schema) are known without
// reaching it, so a create they refuse is refused in their words even when
// the backend cannot be reached, as Capact's Local Hub does (it dials on
// the first call). A create the rules allow reports why the backend was
// not reached, and stores nothing.
func TestRuleBackendRulesBeforeConnect(t *testing.T) {
	e := newEnv(t)
	unreachable := func(acceptValue bool, contextSchema string) string {
		return e.create(hub.NewInstance{TypeRef: storageType, Value: json.RawMessage(fmt.Sprintf(
			`{"url":"test://nowhere","acceptValue":%t,"contextSchema":%s}`, acceptValue, contextSchema))})
	}
	noValues := unreachable(false, "null")
	typed := unreachable(true, `{"type":"object","properties":{"provider":{"type":"string"}}}`)
	tests := []struct {
		name    string
		backend string
		value   string
		context string
		want    string
	}{
		{"value refused", noValues, `{"name":"Luke"}`, "", "input value not allowed"},
		{"context refused", noValues, "", `{"name":"Luke"}`, "input context not allowed"},
		{"context invalid", typed, `1`, `{"provider":true}`, "invalid input: context/provider must be string"},
		{"allowed: not reached", typed, `1`, `{"provider":"dotenv"}`, `no backend listens on "test://nowhere"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count()
			in := hub.NewInstance{TypeRef: cfgType, Backend: &hub.BackendInput{ID: tc.backend}}
			if tc.value != "" {
				in.Value = json.RawMessage(tc.value)
			}
			if tc.context != "" {
				in.Backend.Context = json.RawMessage(tc.context)
			}
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{in}})
			wantContains(t, err, fmt.Sprintf("External backend %q: ", tc.backend), tc.want)
			if n := e.count(); n != before {
				t.Errorf("instances = %d, want %d", n, before)
			}
		})
	}
}

// A contextSchema that is not a JSON Schema makes the backend unusable.
func TestRuleBackendContextSchemaMustCompile(t *testing.T) {
	e := newEnv(t)
	bid, _ := e.addBackend("ext", true, `{"type":5}`)
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{}`)}}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, bid, "spec/value/contextSchema must be a valid JSON Schema")
}

// Backend resolution reads the backend instance's latest value: a backend
// updated to refuse values, or to take another context, is obeyed at once.
func TestRuleBackendLatestValue(t *testing.T) {
	e := newEnv(t)
	bid, _ := e.addBackend("ext", true, `{"type":"object","required":["path"]}`)
	e.create(hub.NewInstance{TypeRef: cfgType, Name: "v1", Value: json.RawMessage(`1`),
		Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"path":"a"}`)}})
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: bid,
		Value: json.RawMessage(`{"url":"test://ext","acceptValue":false,"contextSchema":{"type":"object","required":["name"]}}`)}}); err != nil {
		t.Fatal(err)
	}
	sb, err := e.h.StorageBackend(e.ctx, bid)
	if err != nil || sb.AcceptValue || sb.ResourceVersion != 2 {
		t.Fatalf("StorageBackend = %+v, %v; want acceptValue false at resource version 2", sb, err)
	}
	steps := []struct {
		name  string
		value string
		ctx   string
		msg   string // "" when the create must succeed
	}{
		{"a value is refused by the latest version", `1`, `{"name":"n"}`, "input value not allowed"},
		{"the context is checked against the latest context schema", "", `{"path":"a"}`, "context must have required property 'name'"},
		{"what the latest version asks for is accepted", "", `{"name":"n"}`, ""},
	}
	for i, s := range steps {
		in := hub.NewInstance{TypeRef: cfgType, Name: fmt.Sprintf("v2-%d", i),
			Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(s.ctx)}}
		if s.value != "" {
			in.Value = json.RawMessage(s.value)
		}
		_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{in}})
		if s.msg == "" {
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			continue
		}
		wantCode(t, err, cairn.CodeInvalid)
		wantContains(t, err, s.msg)
	}
}

// Batch create: each usesRelations end is an alias of the batch or an
// existing id; every unknown end is listed; nothing uses itself.
func TestRuleUsesRelationRefusals(t *testing.T) {
	const m1, m2 = "6f1f2c3e-0000-4000-8000-00000000000a", "6f1f2c3e-0000-4000-8000-00000000000b"
	tests := []struct {
		name string
		rels func(existing string) []hub.UsesRelation
		code cairn.Code
		msg  []string
		ids  []string
	}{
		{
			name: "every unknown end listed",
			rels: func(string) []hub.UsesRelation {
				return []hub.UsesRelation{{From: "a", To: m1}, {From: m2, To: "a"}, {From: "a", To: m1}}
			},
			code: cairn.CodeNotFound, ids: []string{m1, m2},
			msg: []string{fmt.Sprintf(`usesRelations: "%s", "%s" are neither aliases of the batch nor ids of existing TypeInstances`, m1, m2)},
		},
		{
			name: "an alias using itself",
			rels: func(string) []hub.UsesRelation { return []hub.UsesRelation{{From: "a", To: "a"}} },
			code: cairn.CodeInvalid, msg: []string{`usesRelations[0]: "a" cannot use itself`},
		},
		{
			name: "an existing id using itself",
			rels: func(id string) []hub.UsesRelation {
				return []hub.UsesRelation{{From: "a", To: id}, {From: id, To: id}}
			},
			code: cairn.CodeInvalid, msg: []string{"usesRelations[1]", "cannot use itself"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			existing := e.create(hub.NewInstance{TypeRef: cfgType, Name: "existing"})
			before := e.count()
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
				Instances:     []hub.NewInstance{{Alias: "a", TypeRef: cfgType, Name: "a"}},
				UsesRelations: tc.rels(existing),
			})
			wantCode(t, err, tc.code)
			wantContains(t, err, tc.msg...)
			if tc.ids != nil {
				if got := idsOf(err, tc.code); !slices.Equal(got, tc.ids) {
					t.Errorf("error IDs = %v, want %v", got, tc.ids)
				}
			}
			if n := e.count(); n != before {
				t.Errorf("instances = %d, want %d", n, before)
			}
			if got := e.get(existing).Uses; !slices.Equal(got, []string{cairn.BuiltinBackendID}) {
				t.Errorf("existing uses %v, want only its backend", got)
			}
		})
	}
}

// Batch create reports every refused instance of the batch, not the first.
func TestRuleCreateReportsEveryRefusedInstance(t *testing.T) {
	tests := []struct {
		name      string
		instances func(e *env) []hub.NewInstance
		msg       []string
	}{
		{
			name: "two invalid instances",
			instances: func(*env) []hub.NewInstance {
				return []hub.NewInstance{{Alias: "one"}, {Alias: "two", TypeRef: cfgType, Name: "Bad_Name"}}
			},
			msg: []string{`TypeInstance "one"`, "typeRef/path is required", `TypeInstance "two"`, "metadata/name"},
		},
		{
			name: "an invalid value and an unknown backend",
			instances: func(e *env) []hub.NewInstance {
				e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
				return []hub.NewInstance{
					{Alias: "fine", TypeRef: cfgType, Value: json.RawMessage(`{"host":"x"}`)},
					{Alias: "value", TypeRef: cfgType, Value: json.RawMessage(`{"port":1}`)},
					{Alias: "backend", TypeRef: cfgType, Backend: &hub.BackendInput{ID: "6f1f2c3e-0000-4000-8000-00000000000c"}},
				}
			},
			msg: []string{`TypeInstance "value"`, "spec/value must have required property 'host'",
				`TypeInstance "backend"`, `"6f1f2c3e-0000-4000-8000-00000000000c" was not found`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ins := tc.instances(e)
			before := e.count()
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: ins})
			wantContains(t, err, tc.msg...)
			if n := e.count(); n != before {
				t.Errorf("instances = %d, want %d", n, before)
			}
		})
	}
}

// The value a context-only backend derives from the context is validated
// against the Type's JSON Schema like a given value.
func TestRulePreCreateValueValidated(t *testing.T) {
	tests := []struct {
		name  string
		value string
		msg   string // "" when the create must succeed
	}{
		{"derived value matches the Type", `{"host":"release"}`, ""},
		{"derived value breaks the Type", `{"port":"x"}`, "spec/value must have required property 'host'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
			bid, f := e.addBackend("helm", false, `{"type":"object"}`)
			f.Backend = preCreate{Backend: f.Backend, value: json.RawMessage(tc.value)}
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
				TypeRef: cfgType, Backend: &hub.BackendInput{ID: bid, Context: json.RawMessage(`{"name":"r"}`)}}}})
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, tc.msg)
			if got := f.called("OnCreate"); len(got) != 0 {
				t.Errorf("OnCreate calls = %v, want none for a refused instance", got)
			}
		})
	}
}

// Update: what an update leaves out (value, attributes, labels, annotations)
// is carried over from the previous version; what it gives replaces it. In
// the built-in backend and in an external one alike.
func TestRuleUpdateCarriesOver(t *testing.T) {
	attrX := []cairn.AttributeRef{{Path: "cap.attribute.x", Revision: "0.1.0"}}
	attrY := []cairn.AttributeRef{{Path: "cap.attribute.y", Revision: "0.2.0"}}
	type state struct {
		value       string
		attrs       []cairn.AttributeRef
		labels      map[string]string
		annotations map[string]string
	}
	steps := []struct {
		name string
		up   hub.UpdateInstance
		want state
	}{
		{"only attributes", hub.UpdateInstance{Attributes: &attrY},
			state{`{"host":"a"}`, attrY, map[string]string{"env": "prod"}, map[string]string{"note": "one"}}},
		{"only labels", hub.UpdateInstance{Labels: map[string]string{"env": "dev"}},
			state{`{"host":"a"}`, attrY, map[string]string{"env": "dev"}, map[string]string{"note": "one"}}},
		{"only annotations", hub.UpdateInstance{Annotations: map[string]string{"note": "two"}},
			state{`{"host":"a"}`, attrY, map[string]string{"env": "dev"}, map[string]string{"note": "two"}}},
		{"only a value", hub.UpdateInstance{Value: json.RawMessage(`{"host":"b"}`)},
			state{`{"host":"b"}`, attrY, map[string]string{"env": "dev"}, map[string]string{"note": "two"}}},
		{"nothing", hub.UpdateInstance{},
			state{`{"host":"b"}`, attrY, map[string]string{"env": "dev"}, map[string]string{"note": "two"}}},
	}
	for _, external := range []bool{false, true} {
		t.Run(map[bool]string{false: "built-in backend", true: "external backend"}[external], func(t *testing.T) {
			e := newEnv(t)
			in := hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"host":"a"}`), Attributes: attrX,
				Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"note": "one"}}
			if external {
				bid, _ := e.addBackend("ext", true, "")
				in.Backend = &hub.BackendInput{ID: bid}
			}
			id := e.create(in)
			for i, s := range steps {
				up := s.up
				up.ID = id
				if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{up}); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				got := e.get(id)
				if got.Latest.ResourceVersion != i+2 {
					t.Errorf("%s: resource version = %d, want %d", s.name, got.Latest.ResourceVersion, i+2)
				}
				if !cairn.JSONEqual(got.Latest.Value, json.RawMessage(s.want.value)) {
					t.Errorf("%s: value = %s, want %s", s.name, got.Latest.Value, s.want.value)
				}
				if !slices.Equal(got.Latest.Attributes, s.want.attrs) {
					t.Errorf("%s: attributes = %v, want %v", s.name, got.Latest.Attributes, s.want.attrs)
				}
				if !maps.Equal(got.Labels, s.want.labels) || !maps.Equal(got.Annotations, s.want.annotations) {
					t.Errorf("%s: labels %v annotations %v, want %v %v", s.name, got.Labels, got.Annotations, s.want.labels, s.want.annotations)
				}
			}
			// Earlier versions keep their own value.
			rvs, err := e.h.ResourceVersions(e.ctx, id, true)
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, rvs[0].Value, `{"host":"a"}`)
			if !slices.Equal(rvs[0].Attributes, attrX) {
				t.Errorf("version 1 attributes = %v, want %v", rvs[0].Attributes, attrX)
			}
		})
	}
}

// Update refusals list every missing and every locked id, and are given
// before any backend is asked to store anything.
func TestRuleUpdateRefusalListsEveryID(t *testing.T) {
	const m1, m2 = "6f1f2c3e-0000-4000-8000-0000000000a1", "6f1f2c3e-0000-4000-8000-0000000000a2"
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	a := e.create(hub.NewInstance{TypeRef: cfgType, Name: "a", Value: json.RawMessage(`1`)})
	x := e.create(hub.NewInstance{TypeRef: cfgType, Name: "x", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	y := e.create(hub.NewInstance{TypeRef: cfgType, Name: "y", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	if err := e.h.LockInstances(e.ctx, []string{x, y}, "owner-1"); err != nil {
		t.Fatal(err)
	}
	up := func(id, owner string) hub.UpdateInstance {
		return hub.UpdateInstance{ID: id, OwnerID: owner, Value: json.RawMessage(`2`)}
	}
	tests := []struct {
		name    string
		ups     []hub.UpdateInstance
		missing []string
		locked  []string
	}{
		{"every missing id", []hub.UpdateInstance{up(a, ""), up(m1, ""), up(m2, "")}, []string{m1, m2}, nil},
		{"every locked id", []hub.UpdateInstance{up(a, ""), up(x, ""), up(y, "")}, nil, []string{x, y}},
		{"another owner", []hub.UpdateInstance{up(x, "owner-2"), up(y, "owner-1")}, nil, []string{x}},
		{"missing and locked", []hub.UpdateInstance{up(y, ""), up(m2, ""), up(x, "owner-2"), up(m1, "")}, []string{m2, m1}, []string{y, x}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.UpdateInstances(e.ctx, tc.ups)
			if err == nil {
				t.Fatal("update succeeded, want a refusal")
			}
			if tc.missing != nil {
				wantContains(t, err, fmt.Sprintf("TypeInstances with IDs %s were not found", cairn.QuoteIDs(tc.missing)))
				if got := idsOf(err, cairn.CodeNotFound); !slices.Equal(got, tc.missing) {
					t.Errorf("NotFound IDs = %v, want %v", got, tc.missing)
				}
			}
			if tc.locked != nil {
				wantContains(t, err, fmt.Sprintf("TypeInstances with IDs %s are locked by different owner", cairn.QuoteIDs(tc.locked)))
				if got := idsOf(err, cairn.CodeLocked); !slices.Equal(got, tc.locked) {
					t.Errorf("Locked IDs = %v, want %v", got, tc.locked)
				}
			}
			if got := f.called("OnUpdate"); len(got) != 0 {
				t.Errorf("backend calls %v for a refused update, want none", got)
			}
			for _, id := range []string{a, x, y} {
				if rv := e.rvOf(id); rv != 1 {
					t.Errorf("%s resource version = %d, want 1", id, rv)
				}
			}
		})
	}
}

// Update validates every instance of the batch and reports each refusal.
func TestRuleUpdateReportsEveryInvalidInstance(t *testing.T) {
	e := newEnv(t)
	e.registerType(cfgType.Path, cfgType.Revision, cfgSchema)
	a := e.create(hub.NewInstance{TypeRef: cfgType, Name: "a", Value: json.RawMessage(`{"host":"a"}`)})
	b := e.create(hub.NewInstance{TypeRef: cfgType, Name: "b", Value: json.RawMessage(`{"host":"b"}`)})
	tests := []struct {
		name string
		ups  []hub.UpdateInstance
		msg  []string
	}{
		{"two invalid values", []hub.UpdateInstance{{ID: a, Value: json.RawMessage(`{"host":1}`)}, {ID: b, Value: json.RawMessage(`{"port":"x"}`)}},
			[]string{fmt.Sprintf("TypeInstance %q", a), "spec/value/host must be string", fmt.Sprintf("TypeInstance %q", b), "spec/value/port must be integer"}},
		{"an id twice", []hub.UpdateInstance{{ID: a, Value: json.RawMessage(`{"host":"x"}`)}, {ID: a, Value: json.RawMessage(`{"host":"y"}`)}},
			[]string{"[1]/id appears more than once in the batch"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.h.UpdateInstances(e.ctx, tc.ups)
			wantCode(t, err, cairn.CodeInvalid)
			wantContains(t, err, tc.msg...)
			for _, id := range []string{a, b} {
				if rv := e.rvOf(id); rv != 1 {
					t.Errorf("%s resource version = %d, want 1", id, rv)
				}
			}
		})
	}
}

// The lock owner the caller gives reaches the external backend, which keeps a
// copy of the lock: the owner can update and delete, nobody else can.
func TestRuleLockOwnerReachesExternalBackend(t *testing.T) {
	tests := []struct {
		name string
		op   func(e *env, id, owner string) error
	}{
		{"update", func(e *env, id, owner string) error {
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, OwnerID: owner, Value: json.RawMessage(`2`)}})
			return err
		}},
		{"delete", func(e *env, id, owner string) error { return e.h.DeleteInstance(e.ctx, id, owner) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bid, _ := e.addBackend("ext", true, "")
			id := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			if err := e.h.LockInstances(e.ctx, []string{id}, "alice"); err != nil {
				t.Fatal(err)
			}
			err := tc.op(e, id, "bob")
			wantCode(t, err, cairn.CodeLocked)
			wantContains(t, err, "locked by different owner")
			if err := tc.op(e, id, "alice"); err != nil {
				t.Fatalf("%s by the lock owner: %v", tc.name, err)
			}
		})
	}
}

// Delete: the UsedBy refusal names every user, in the message and in IDs.
func TestRuleDeleteUsedByListsEveryUser(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env) (target string, users []string)
	}{
		{"an instance", func(e *env) (string, []string) {
			target := e.create(hub.NewInstance{TypeRef: cfgType, Name: "target"})
			out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
				Instances:     []hub.NewInstance{{Alias: "u1", TypeRef: cfgType, Name: "u1"}, {Alias: "u2", TypeRef: cfgType, Name: "u2"}},
				UsesRelations: []hub.UsesRelation{{From: "u1", To: target}, {From: "u2", To: target}},
			})
			if err != nil {
				e.t.Fatal(err)
			}
			return target, []string{out[0].ID, out[1].ID}
		}},
		{"a backend", func(e *env) (string, []string) {
			bid, _ := e.addBackend("ext", true, "")
			u1 := e.create(hub.NewInstance{TypeRef: cfgType, Name: "u1", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			u2 := e.create(hub.NewInstance{TypeRef: cfgType, Name: "u2", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			return bid, []string{u1, u2}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			target, users := tc.setup(e)
			err := e.h.DeleteInstance(e.ctx, target, "")
			wantCode(t, err, cairn.CodeUsedBy)
			wantContains(t, err, `"`+users[0]+`"`, `"`+users[1]+`"`)
			if got := idsOf(err, cairn.CodeUsedBy); !slices.Equal(sorted(got), sorted(users)) {
				t.Errorf("UsedBy IDs = %v, want %v", got, users)
			}
			e.get(target)
		})
	}
}

// Delete: a backend that already forgot the instance (NotFound) counts as
// done, so a delete that failed halfway can be retried.
func TestRuleDeleteRetryAfterBackendForgot(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	id := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
	if err := f.Backend.OnDelete(e.ctx, cairn.OnDeleteRequest{InstanceID: id}); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, id, ""); err != nil {
		t.Fatalf("delete after the backend forgot the instance: %v", err)
	}
	_, err := e.h.GetInstance(e.ctx, id, false)
	wantCode(t, err, cairn.CodeNotFound)
}

// Lock / unlock: when an external backend refuses, the store goes back to
// what it was and backends already told are put back.
func TestRuleLockBackendRefusalRestores(t *testing.T) {
	refuse := func(string) error { return cairn.Errorf(cairn.CodeUnavailable, "backend is read-only") }
	tests := []struct {
		name string
		// setup runs before the backend starts refusing.
		setup    func(e *env, local, x, y string)
		failOn   string
		failID   func(x, y string) string
		op       func(e *env, local, x, y string) error
		wantHub  map[string]string // by name: local, x, y
		wantCopy map[string]string // the backend's copy: x, y
	}{
		{
			name:   "lock refused for the second external instance",
			failOn: "OnLock", failID: func(_, y string) string { return y },
			op: func(e *env, local, x, y string) error {
				return e.h.LockInstances(e.ctx, []string{local, x, y}, "alice")
			},
			wantHub:  map[string]string{"local": "", "x": "", "y": ""},
			wantCopy: map[string]string{"x": "", "y": ""},
		},
		{
			name: "unlock refused",
			setup: func(e *env, local, x, y string) {
				if err := e.h.LockInstances(e.ctx, []string{local, x, y}, "alice"); err != nil {
					e.t.Fatal(err)
				}
			},
			failOn: "OnUnlock", failID: func(_, y string) string { return y },
			op: func(e *env, local, x, y string) error {
				return e.h.UnlockInstances(e.ctx, []string{local, x, y}, "alice")
			},
			wantHub:  map[string]string{"local": "alice", "x": "alice", "y": "alice"},
			wantCopy: map[string]string{"x": "alice", "y": "alice"},
		},
		{
			name: "relock refused keeps the earlier locks",
			setup: func(e *env, local, x, y string) {
				if err := e.h.LockInstances(e.ctx, []string{x}, "alice"); err != nil {
					e.t.Fatal(err)
				}
			},
			failOn: "OnLock", failID: func(_, y string) string { return y },
			op: func(e *env, local, x, y string) error {
				return e.h.LockInstances(e.ctx, []string{x, local, y}, "alice")
			},
			wantHub:  map[string]string{"local": "", "x": "alice", "y": ""},
			wantCopy: map[string]string{"x": "alice", "y": ""},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bid, f := e.addBackend("ext", true, "")
			local := e.create(hub.NewInstance{TypeRef: cfgType, Name: "local"})
			x := e.create(hub.NewInstance{TypeRef: cfgType, Name: "x", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			y := e.create(hub.NewInstance{TypeRef: cfgType, Name: "y", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			if tc.setup != nil {
				tc.setup(e, local, x, y)
			}
			failID := tc.failID(x, y)
			f.failOn(tc.failOn, func(id string) error {
				if id == failID {
					return refuse(id)
				}
				return nil
			})
			err := tc.op(e, local, x, y)
			wantCode(t, err, cairn.CodeUnavailable)
			wantContains(t, err, "backend is read-only", bid)
			ids := map[string]string{"local": local, "x": x, "y": y}
			for name, want := range tc.wantHub {
				if got := e.get(ids[name]).LockedBy; got != want {
					t.Errorf("%s locked by %q in the hub, want %q", name, got, want)
				}
			}
			for name, want := range tc.wantCopy {
				got, err := f.Backend.GetLockedBy(e.ctx, cairn.GetLockedByRequest{InstanceID: ids[name]})
				if err != nil || got != want {
					t.Errorf("%s locked by %q, %v in the backend, want %q", name, got, err, want)
				}
			}
		})
	}
}

// List: within one Type revision, instances come newest first.
func TestRuleListCreatedAtDescending(t *testing.T) {
	var mu sync.Mutex
	clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	e := newEnv(t, func(c *hub.Config) {
		c.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(time.Second)
			return clock
		}
	})
	r1 := cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.1.0"}
	r2 := cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.2.0"}
	mk := func(ref cairn.TypeRef, name, ns string) string {
		return e.create(hub.NewInstance{TypeRef: ref, Name: name, Namespace: ns, Value: json.RawMessage(`"` + name + `"`)})
	}
	a1 := mk(r1, "a1", "default")
	b1 := mk(r2, "b1", "team-a")
	a2 := mk(r1, "a2", "team-a")
	b2 := mk(r2, "b2", "default")
	a3 := mk(r1, "a3", "default")
	tests := []struct {
		name string
		f    store.InstanceFilter
		want []string
	}{
		{"one Type revision", store.InstanceFilter{TypePath: r1.Path, TypeRevision: r1.Revision}, []string{a3, a2, a1}},
		{"a Type path", store.InstanceFilter{TypePath: r1.Path}, []string{b2, b1, a3, a2, a1}},
		{"a namespace", store.InstanceFilter{Namespace: "default"}, []string{b2, a3, a1}},
		{"a path pattern", store.InstanceFilter{TypePath: "cap.type.*"}, []string{b2, b1, a3, a2, a1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, withValues := range []bool{false, true} {
				list, err := e.h.ListInstances(e.ctx, tc.f, withValues)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, i := range list {
					got = append(got, i.ID)
					if withValues && !cairn.JSONEqual(i.Latest.Value, json.RawMessage(`"`+i.Name+`"`)) {
						t.Errorf("value of %s = %s, want %q", i.Name, i.Latest.Value, i.Name)
					}
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("withValues=%t: got %v, want %v", withValues, got, tc.want)
				}
			}
		})
	}
}

// List: attribute filters include or exclude, at a revision when given.
func TestRuleListAttributeRevisions(t *testing.T) {
	e := newEnv(t)
	x1 := cairn.AttributeRef{Path: "cap.attribute.x", Revision: "0.1.0"}
	x2 := cairn.AttributeRef{Path: "cap.attribute.x", Revision: "0.2.0"}
	p := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.a", Revision: "0.1.0"}, Attributes: []cairn.AttributeRef{x1}})
	q := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.b", Revision: "0.1.0"}, Attributes: []cairn.AttributeRef{x2}})
	r := e.create(hub.NewInstance{TypeRef: cairn.TypeRef{Path: "cap.type.c", Revision: "0.1.0"}})
	tests := []struct {
		name string
		attr store.AttributeFilter
		want []string
	}{
		{"include any revision", store.AttributeFilter{Path: x1.Path}, []string{p, q}},
		{"include one revision", store.AttributeFilter{Path: x1.Path, Revision: "0.1.0"}, []string{p}},
		{"include the other revision", store.AttributeFilter{Path: x1.Path, Revision: "0.2.0"}, []string{q}},
		{"exclude any revision", store.AttributeFilter{Path: x1.Path, Exclude: true}, []string{r}},
		{"exclude one revision", store.AttributeFilter{Path: x1.Path, Revision: "0.1.0", Exclude: true}, []string{q, r}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: "cap.type.*", Attributes: []store.AttributeFilter{tc.attr}}, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range list {
				got = append(got, i.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// Types: each Type revision is validated against its own JSON Schema, and a
// Type deleted and registered again with another schema uses the new one.
func TestRuleTypeSchemaPerRevision(t *testing.T) {
	e := newEnv(t)
	schemaRequiring := func(p string) string {
		return `{"$schema":"http://json-schema.org/draft-07/schema","type":"object","required":["` + p + `"]}`
	}
	r1 := cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.1.0"}
	r2 := cairn.TypeRef{Path: "cap.type.app.config", Revision: "0.2.0"}
	e.registerType(r1.Path, r1.Revision, schemaRequiring("host"))
	e.registerType(r2.Path, r2.Revision, schemaRequiring("port"))
	var inR1 string
	steps := []struct {
		name   string
		before func()
		ref    cairn.TypeRef
		value  string
		msg    string // "" when the create must succeed
	}{
		{name: "first revision", ref: r1, value: `{"host":"x"}`},
		{name: "second revision has its own schema", ref: r2, value: `{"host":"x"}`, msg: "spec/value must have required property 'port'"},
		{name: "second revision", ref: r2, value: `{"port":1}`},
		{
			name: "a Type registered again uses its new schema",
			before: func() {
				if err := e.h.DeleteInstance(e.ctx, inR1, ""); err != nil {
					t.Fatal(err)
				}
				if err := e.h.DeleteType(e.ctx, r1); err != nil {
					t.Fatal(err)
				}
				e.registerType(r1.Path, r1.Revision, schemaRequiring("name"))
			},
			ref: r1, value: `{"host":"x"}`, msg: "spec/value must have required property 'name'",
		},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: s.ref, Value: json.RawMessage(s.value)}}})
		if s.msg == "" {
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if s.ref == r1 {
				inR1 = out[0].ID
			}
			continue
		}
		if cairn.ErrorCode(err) != cairn.CodeInvalid || !strings.Contains(fmt.Sprint(err), s.msg) {
			t.Fatalf("%s: error %v, want Invalid with %q", s.name, err, s.msg)
		}
	}
}

// A write that fails in the store after an external backend stored a new
// revision undoes it (OnDeleteRevision) and reports both errors when the undo
// fails too.
func TestRuleUpdateStoreFailureUndoesBackend(t *testing.T) {
	tests := []struct {
		name       string
		rollbackOK bool
	}{
		{"undo succeeds", true},
		{"undo fails too", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bid, f := e.addBackend("ext", true, "")
			x := e.create(hub.NewInstance{TypeRef: cfgType, Name: "x", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			a := e.create(hub.NewInstance{TypeRef: cfgType, Name: "a", Value: json.RawMessage(`1`)})
			// While the backend stores x, someone else locks a: the store
			// transaction then refuses the batch.
			f.failOn("OnUpdate", func(string) error {
				if err := e.h.LockInstances(e.ctx, []string{a}, "mallory"); err != nil {
					t.Errorf("lock a: %v", err)
				}
				return nil
			})
			if !tc.rollbackOK {
				f.failOn("OnDeleteRevision", func(string) error { return errors.New("backend gone") })
			}
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`2`)}, {ID: a, Value: json.RawMessage(`2`)}})
			wantCode(t, err, cairn.CodeLocked)
			wantContains(t, err, fmt.Sprintf(`TypeInstances with IDs "%s" are locked by different owner`, a))
			if got := f.called("OnDeleteRevision"); !slices.Equal(got, []string{"OnDeleteRevision " + x}) {
				t.Errorf("OnDeleteRevision calls = %v, want the new revision of %s undone", got, x)
			}
			for _, id := range []string{x, a} {
				if rv := e.rvOf(id); rv != 1 {
					t.Errorf("%s resource version = %d, want 1", id, rv)
				}
			}
			_, gerr := f.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: x, ResourceVersion: 2})
			if tc.rollbackOK {
				if !cairn.HasCode(gerr, cairn.CodeNotFound) {
					t.Errorf("backend revision 2 after the undo: %v, want NotFound", gerr)
				}
				if strings.Contains(err.Error(), "rollback") {
					t.Errorf("error %q mentions a rollback that succeeded", err)
				}
				return
			}
			wantContains(t, err, "rollback externally stored values", "backend gone", bid)
			if cs := cairn.Errors(err); !slices.ContainsFunc(cs, func(e *cairn.Error) bool { return e.Code == cairn.CodeUnavailable }) {
				t.Errorf("errors %v: want the failed rollback reported as Unavailable too", cs)
			}
		})
	}
}

// The undo runs even when the caller's context is cancelled mid-write.
func TestRuleRollbackSurvivesCancel(t *testing.T) {
	tests := []struct {
		name string
		// run makes the write, cancelling ctx midway, and returns the
		// instance whose stored version (rv) must have been undone.
		run func(e *env, ctx context.Context, cancel func(), bid string, f *faulty) (undone string)
		rv  int
	}{
		{"create", func(e *env, ctx context.Context, cancel func(), bid string, f *faulty) string {
			calls := 0
			f.failOn("OnCreate", func(string) error {
				if calls++; calls == 2 {
					cancel()
					return errors.New("interrupted")
				}
				return nil
			})
			_, err := e.h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{
				{Alias: "a", TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}},
				{Alias: "b", TypeRef: cfgType, Value: json.RawMessage(`2`), Backend: &hub.BackendInput{ID: bid}},
			}})
			wantContains(e.t, err, "interrupted")
			return strings.TrimPrefix(f.called("OnCreate")[0], "OnCreate ")
		}, 1},
		{"update", func(e *env, ctx context.Context, cancel func(), bid string, f *faulty) string {
			x := e.create(hub.NewInstance{TypeRef: cfgType, Name: "x", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			y := e.create(hub.NewInstance{TypeRef: cfgType, Name: "y", Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}})
			f.failOn("OnUpdate", func(id string) error {
				if id == y {
					cancel()
					return errors.New("interrupted")
				}
				return nil
			})
			_, err := e.h.UpdateInstances(ctx, []hub.UpdateInstance{{ID: x, Value: json.RawMessage(`2`)}, {ID: y, Value: json.RawMessage(`2`)}})
			wantContains(e.t, err, "interrupted")
			return x
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bid, f := e.addBackend("ext", true, "")
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			undone := tc.run(e, ctx, cancel, bid, f)
			if _, err := f.Backend.GetValue(e.ctx, cairn.GetValueRequest{InstanceID: undone, ResourceVersion: tc.rv}); !cairn.HasCode(err, cairn.CodeNotFound) {
				t.Errorf("backend still holds version %d of %s after a cancelled write: %v", tc.rv, undone, err)
			}
		})
	}
}

// Types are found by path prefix and by additionalRefs parent: exactly the
// matching ones, sorted by path ascending, revision descending.
func TestRuleFindTypes(t *testing.T) {
	e := newEnv(t)
	for _, ty := range []cairn.Type{
		{Path: "cap.type.aws.rds", Revision: "0.9.0"},
		{Path: "cap.type.aws.rds", Revision: "0.10.0"},
		{Path: "cap.type.aws.s3", Revision: "0.1.0", AdditionalRefs: []string{"cap.core.type.generic.value"}},
		{Path: "cap.type.awsx.thing", Revision: "0.1.0"},
		{Path: "cap.type.vault.storage", Revision: "0.1.0", AdditionalRefs: []string{cairn.StorageTypePrefix}},
	} {
		if _, err := e.h.CreateType(e.ctx, ty); err != nil {
			t.Fatal(err)
		}
	}
	builtin := e.h.BuiltinTypeRef().String()
	tests := []struct {
		name string
		f    store.TypeFilter
		want []string
	}{
		{"path prefix pattern", store.TypeFilter{PathPrefix: "cap.type.aws.*"}, []string{"cap.type.aws.rds:0.10.0", "cap.type.aws.rds:0.9.0", "cap.type.aws.s3:0.1.0"}},
		{"path prefix", store.TypeFilter{PathPrefix: "cap.type.aws"}, []string{"cap.type.aws.rds:0.10.0", "cap.type.aws.rds:0.9.0", "cap.type.aws.s3:0.1.0"}},
		{"exact path", store.TypeFilter{PathPrefix: "cap.type.aws.rds"}, []string{"cap.type.aws.rds:0.10.0", "cap.type.aws.rds:0.9.0"}},
		{"storage parent", store.TypeFilter{Parent: cairn.StorageTypePrefix}, []string{hub.GotemplateTypeRef().String(), builtin, "cap.type.vault.storage:0.1.0"}},
		{"another parent", store.TypeFilter{Parent: "cap.core.type.generic.value"}, []string{"cap.type.aws.s3:0.1.0"}},
		{"prefix and parent", store.TypeFilter{PathPrefix: "cap.type.*", Parent: cairn.StorageTypePrefix}, []string{"cap.type.vault.storage:0.1.0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := e.h.ListTypes(e.ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ty := range list {
				got = append(got, ty.Ref().String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A backend with users cannot be deleted, not even one deleted while an
// instance is being created in it: the create then fails and leaves nothing.
func TestRuleBackendDeletedDuringCreate(t *testing.T) {
	e := newEnv(t)
	bid, f := e.addBackend("ext", true, "")
	f.failOn("OnCreate", func(string) error {
		if err := e.h.DeleteInstance(e.ctx, bid, ""); err != nil {
			t.Errorf("delete the unused backend: %v", err)
		}
		return nil
	})
	before := e.count()
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType, Value: json.RawMessage(`1`), Backend: &hub.BackendInput{ID: bid}}}})
	wantCode(t, err, cairn.CodeNotFound)
	wantContains(t, err, bid)
	if n := e.count(); n != before-1 {
		t.Errorf("instances = %d, want %d (the backend gone, nothing created)", n, before-1)
	}
	if len(f.called("OnCreate")) != 1 || len(f.called("OnDelete")) != 1 {
		t.Errorf("backend calls = %v, want the stored value deleted again", f.calls)
	}
}

// A backend without contextSchema takes no context (Capact's storage schema
// does not require the property), and says so.
func TestRuleBackendWithoutContextSchema(t *testing.T) {
	e := newEnv(t)
	b, _ := e.addBackend("nocs", false, "")
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: b, Value: json.RawMessage(`{"url":"test://nocs","acceptValue":false}`)}}); err != nil {
		t.Fatalf("drop contextSchema from the backend's value: %v", err)
	}
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType, Backend: &hub.BackendInput{ID: b, Context: json.RawMessage(`{"a":1}`)}}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, fmt.Sprintf("External backend %q: input context not allowed", b))
	if !errors.Is(err, cairn.ErrBackendRefused) {
		t.Errorf("error %v is not marked cairn.ErrBackendRefused", err)
	}
}

// Context schemas written for Capact (no "$schema", JSON-pointer fragments
// in "$id") compile as draft-07 and validate.
func TestRuleContextSchemaDraft07ByDefault(t *testing.T) {
	e := newEnv(t)
	const cs = `{"$id":"#/properties/contextSchema","type":"object","properties":{"provider":{"$id":"#/properties/contextSchema/properties/name","type":"string"}},"additionalProperties":false}`
	id, _ := e.addBackend("dotenv", true, cs)
	_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType, Value: json.RawMessage(`{"host":"db"}`), Backend: &hub.BackendInput{ID: id, Context: json.RawMessage(`{"provider":true}`)}}}})
	wantCode(t, err, cairn.CodeInvalid)
	wantContains(t, err, fmt.Sprintf("External backend %q: invalid input: context/provider must be string", id))
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{
		TypeRef: cfgType, Value: json.RawMessage(`{"host":"db"}`), Backend: &hub.BackendInput{ID: id, Context: json.RawMessage(`{"provider":"dotenv"}`)}}}}); err != nil {
		t.Fatalf("create with a valid context: %v", err)
	}
}

// The built-in backend refuses a context on update, unless the hub follows
// Capact's Local Hub, which keeps it.
func TestRuleBuiltinContextOnUpdate(t *testing.T) {
	for _, compat := range []bool{false, true} {
		t.Run(fmt.Sprintf("capact=%t", compat), func(t *testing.T) {
			e := newEnv(t, func(c *hub.Config) { c.CapactCompat = compat })
			id := e.create(hub.NewInstance{TypeRef: cfgType, Value: json.RawMessage(`{"host":"db"}`)})
			_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: id, Context: json.RawMessage(`{"updated":"context 1"}`)}})
			if !compat {
				wantCode(t, err, cairn.CodeInvalid)
				wantContains(t, err, "input context not allowed")
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			got := e.get(id)
			if string(got.Latest.Context) != `{"updated":"context 1"}` || got.Latest.ResourceVersion != 2 {
				t.Errorf("latest = rv %d context %s, want rv 2 with the context", got.Latest.ResourceVersion, got.Latest.Context)
			}
		})
	}
}

// Under Capact compatibility a Type without REST names and without
// "$schema" is draft-07; otherwise 2020-12, which refuses "$id" fragments.
func TestRuleTypeSchemaDraft(t *testing.T) {
	const doc = `{"$id":"#/properties/value","type":"object"}`
	for _, compat := range []bool{false, true} {
		e := newEnv(t, func(c *hub.Config) { c.CapactCompat = compat })
		_, err := e.h.CreateType(e.ctx, cairn.Type{Path: "cap.type.capact.style", Revision: "0.1.0", JSONSchema: json.RawMessage(doc)})
		if compat && err != nil {
			t.Errorf("capact: CreateType: %v", err)
		}
		if !compat && !cairn.HasCode(err, cairn.CodeInvalid) {
			t.Errorf("default: CreateType error = %v, want Invalid (2020-12 refuses the $id)", err)
		}
	}
}
