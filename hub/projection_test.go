package hub_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/backend/gotemplate"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

var (
	mmConfigType = cairn.TypeRef{Path: "cap.type.productivity.mattermost.helm-values", Revision: "0.1.0"}
	mmOutType    = cairn.TypeRef{Path: "cap.type.productivity.mattermost.config", Revision: "0.1.0"}
)

const mmValue = `{"values":{"ingress":{"hosts":["mattermost.capact.local"]},"image":{"tag":"6.2.0"}}}`

// mmTemplate is seed 000's example.
const mmTemplate = "host: \"{{ index .mattermost.values.ingress.hosts 0 }}\"\nversion: \"{{ .mattermost.values.image.tag }}\""

func projection(alias string, template string, vars map[string]gotemplate.Variable) hub.NewInstance {
	ctx, err := json.Marshal(gotemplate.Context{Template: template, Variables: vars})
	if err != nil {
		panic(err)
	}
	return hub.NewInstance{Alias: alias, TypeRef: mmOutType, Backend: &hub.BackendInput{ID: gotemplate.BackendID, Context: ctx}}
}

func byAlias(a string) map[string]gotemplate.Variable {
	return map[string]gotemplate.Variable{"mattermost": {RelatedTypeInstanceAlias: a}}
}

func byID(id string) map[string]gotemplate.Variable {
	return map[string]gotemplate.Variable{"mattermost": {TypeInstanceID: id}}
}

func TestProjectionFollowsItsSource(t *testing.T) {
	e := newEnv(t)
	e.registerType(mmOutType.Path, mmOutType.Revision, `{"type":"object","required":["host","version"]}`)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			{Alias: "mattermost-config", TypeRef: mmConfigType, Value: json.RawMessage(mmValue)},
			projection("mattermost", mmTemplate, byAlias("mattermost-config")),
		},
		UsesRelations: []hub.UsesRelation{{From: "mattermost", To: "mattermost-config"}},
	})
	if err != nil {
		t.Fatalf("create source and projection in one batch: %v", err)
	}
	src, proj := out[0].ID, out[1].ID
	p := e.get(proj)
	jsonEq(t, p.Latest.Value, `{"host":"mattermost.capact.local","version":"6.2.0"}`)
	if p.Backend.ID != gotemplate.BackendID || !slices.Contains(p.Uses, src) {
		t.Errorf("projection backend %s uses %v; want gotemplate and the source %s", p.Backend.ID, p.Uses, src)
	}
	// The stored context keeps the alias and adds the id.
	var c gotemplate.Context
	if err := json.Unmarshal(p.Latest.Context, &c); err != nil {
		t.Fatal(err)
	}
	if v := c.Variables["mattermost"]; v.RelatedTypeInstanceAlias != "mattermost-config" || v.TypeInstanceID != src || c.BatchValues != nil {
		t.Errorf("stored context = %s", p.Latest.Context)
	}

	// The projection follows the source's latest value.
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: src,
		Value: json.RawMessage(`{"values":{"ingress":{"hosts":["chat.example.com"]},"image":{"tag":"7.0.1"}}}`)}}); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(proj).Latest.Value, `{"host":"chat.example.com","version":"7.0.1"}`)

	// A projection of the projection, created later, by id, in JSON.
	pp := e.create(hub.NewInstance{Alias: "summary", TypeRef: cairn.TypeRef{Path: "cap.type.summary", Revision: "0.1.0"},
		Backend: &hub.BackendInput{ID: gotemplate.BackendID, Context: mustJSON(gotemplate.Context{
			Template:  `{"url": "https://{{ .mm.host }}", "tag": {{ .mm.version | quote }}}`,
			Variables: map[string]gotemplate.Variable{"mm": {TypeInstanceID: proj}}})}})
	jsonEq(t, e.get(pp).Latest.Value, `{"url":"https://chat.example.com","tag":"7.0.1"}`)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: src,
		Value: json.RawMessage(`{"values":{"ingress":{"hosts":["mm.internal"]},"image":{"tag":"8.0.0"}}}`)}}); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(pp).Latest.Value, `{"url":"https://mm.internal","tag":"8.0.0"}`)

	// A source's owner may change it so that the template no longer
	// renders (the projection's owner may be someone else, in a namespace
	// the writer cannot read): the update stands, and reads of the
	// projection fail as the server's fault (500), naming the template's
	// error; a list with values names the projection.
	broken := json.RawMessage(`{"values":{"image":{"tag":"9"}}}`)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: src, Value: broken}}); err != nil {
		t.Fatalf("an update of the source that the projection cannot render with: %v", err)
	}
	_, err = e.h.GetInstance(e.ctx, proj, true)
	wantCode(t, err, cairn.CodeInternal)
	wantContains(t, err, proj, `map has no entry for key "ingress"`)
	_, err = e.h.ListInstances(e.ctx, store.InstanceFilter{TypePath: mmOutType.Path}, true)
	wantCode(t, err, cairn.CodeInternal)
	wantContains(t, err, "default/mattermost", `map has no entry for key "ingress"`)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: src, Value: json.RawMessage(mmValue)}}); err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(proj).Latest.Value, `{"host":"mattermost.capact.local","version":"6.2.0"}`)

	// Sources cannot be deleted while a projection uses them.
	wantCode(t, e.h.DeleteInstance(e.ctx, src, ""), cairn.CodeUsedBy)
	wantCode(t, e.h.DeleteInstance(e.ctx, proj, ""), cairn.CodeUsedBy)
	if err := e.h.DeleteInstance(e.ctx, pp, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, proj, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DeleteInstance(e.ctx, src, ""); err != nil {
		t.Fatalf("delete the source once no projection uses it: %v", err)
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Projections of projections in one batch, by alias through the uses tree
// (two levels deep), rendered sources first.
func TestProjectionOfProjectionInOneBatch(t *testing.T) {
	e := newEnv(t)
	out, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances: []hub.NewInstance{
			projection("top", "v: '{{ .mid.version }}-final'", map[string]gotemplate.Variable{"mid": {RelatedTypeInstanceAlias: "mid"}}),
			projection("mid", mmTemplate, byAlias("mattermost-config")),
			{Alias: "mattermost-config", TypeRef: mmConfigType, Value: json.RawMessage(mmValue)},
		},
		UsesRelations: []hub.UsesRelation{{From: "top", To: "mid"}, {From: "mid", To: "mattermost-config"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, e.get(out[0].ID).Latest.Value, `{"v":"6.2.0-final"}`)
	// Later, an alias two levels down the stored uses tree (deep -> top ->
	// mid -> mattermost-config) resolves as well.
	later, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{projection("deep", "h: {{ index .mattermost.values.ingress.hosts 0 }}", byAlias("mattermost-config"))},
		UsesRelations: []hub.UsesRelation{{From: "deep", To: out[0].ID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	deep := e.get(later[0].ID)
	jsonEq(t, deep.Latest.Value, `{"h":"mattermost.capact.local"}`)
	if !slices.Contains(deep.Uses, out[2].ID) {
		t.Errorf("deep uses %v, want the source %s it references", deep.Uses, out[2].ID)
	}
}

func TestProjectionRefusals(t *testing.T) {
	e := newEnv(t)
	src := e.create(hub.NewInstance{Alias: "mattermost-config", TypeRef: mmConfigType, Value: json.RawMessage(mmValue)})
	twin := e.create(hub.NewInstance{Alias: "mattermost-config", TypeRef: mmConfigType, Value: json.RawMessage(mmValue)})
	holder := e.create(hub.NewInstance{Alias: "holder", TypeRef: mmConfigType, Value: json.RawMessage(`{}`)})
	if _, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{{Alias: "both", TypeRef: mmConfigType, Value: json.RawMessage(`{}`)}},
		UsesRelations: []hub.UsesRelation{{From: "both", To: src}, {From: "both", To: twin}}}); err != nil {
		t.Fatal(err)
	}
	both, _ := e.h.ListInstances(e.ctx, store.InstanceFilter{Name: ""}, false)
	var bothID string
	for _, i := range both {
		if i.Alias == "both" {
			bothID = i.ID
		}
	}
	e.registerType(mmOutType.Path, mmOutType.Revision, `{"type":"object","required":["host"]}`)
	tests := []struct {
		name string
		in   hub.NewInstance
		uses []string
		code cairn.Code
		msg  string
	}{
		{"template parse error", projection("p", "host: {{ .mattermost.values", byAlias("mattermost-config")), []string{src}, cairn.CodeInvalid, "parse the template"},
		{"missing key", projection("p", "host: {{ .mattermost.values.nope.deeper }}", byAlias("mattermost-config")), []string{src}, cairn.CodeInvalid, "render"},
		{"missing variable", projection("p", "host: {{ .other.host }}", byAlias("mattermost-config")), []string{src}, cairn.CodeInvalid, "render"},
		{"alias not in the uses tree", projection("p", mmTemplate, byAlias("mattermost-config")), []string{holder}, cairn.CodeInvalid, "matches no TypeInstance"},
		{"alias matches two", projection("p", mmTemplate, byAlias("mattermost-config")), []string{bothID}, cairn.CodeInvalid, "matches several"},
		{"unknown id", projection("p", mmTemplate, byID("00000000-0000-4000-8000-000000000000")), nil, cairn.CodeNotFound, "was not found"},
		{"no reference", projection("p", mmTemplate, map[string]gotemplate.Variable{"mattermost": {}}), nil, cairn.CodeInvalid, "names no TypeInstance"},
		{"not YAML", projection("p", "host: [unclosed", byID(src)), nil, cairn.CodeInvalid, "not a YAML or JSON document"},
		{"output breaks the Type", projection("p", "version: x", byID(src)), nil, cairn.CodeInvalid, "must have required property 'host'"},
		{"no context", hub.NewInstance{TypeRef: mmOutType, Backend: &hub.BackendInput{ID: gotemplate.BackendID}}, nil, cairn.CodeInvalid, "template"},
		{"a value", hub.NewInstance{TypeRef: mmOutType, Value: json.RawMessage(`{"host":"x"}`), Backend: &hub.BackendInput{ID: gotemplate.BackendID,
			Context: mustJSON(gotemplate.Context{Template: "a: b", Variables: byID(src)})}}, nil, cairn.CodeInvalid, "input value not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.count()
			var rels []hub.UsesRelation
			for _, u := range tt.uses {
				rels = append(rels, hub.UsesRelation{From: tt.in.Alias, To: u})
			}
			_, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{Instances: []hub.NewInstance{tt.in}, UsesRelations: rels})
			wantCode(t, err, tt.code)
			wantContains(t, err, tt.msg)
			if n := e.count(); n != before {
				t.Errorf("a refused projection stored something: %d instances, was %d", n, before)
			}
		})
	}

	// An update may change the template, not point at instances the
	// projection does not use; a broken template is refused.
	p := e.create(projection("ok", mmTemplate, byID(src)))
	upd := func(tmpl string, vars map[string]gotemplate.Variable) error {
		_, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: p, Context: mustJSON(gotemplate.Context{Template: tmpl, Variables: vars})}})
		return err
	}
	if err := upd("host: '{{ .mattermost.values.image.tag }}'", byID(src)); err != nil {
		t.Fatalf("update the template: %v", err)
	}
	jsonEq(t, e.get(p).Latest.Value, `{"host":"6.2.0"}`)
	wantCode(t, upd(mmTemplate, byID(twin)), cairn.CodeInvalid)
	wantCode(t, upd("host: {{ .nope }}", byID(src)), cairn.CodeInvalid)
}

// BenchmarkProjectionGetValue10 reads a projection with 10 variables, each
// a built-in instance: 10 instance reads through the hub and one render.
func BenchmarkProjectionGetValue10(b *testing.B) {
	st := openStore(b, "bench.db")
	ctx := cairn.WithActor(b.Context(), "bench")
	h, err := hub.New(ctx, hub.Config{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	vars := map[string]gotemplate.Variable{}
	var tmpl strings.Builder
	for i := range 10 {
		out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{{TypeRef: mmConfigType,
			Value: json.RawMessage(fmt.Sprintf(`{"host":"db%d.internal","port":%d,"user":"svc%d"}`, i, 5432+i, i))}}})
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("v%d", i)
		vars[name] = gotemplate.Variable{TypeInstanceID: out[0].ID}
		fmt.Fprintf(&tmpl, "%s: \"{{ .%s.user }}@{{ .%s.host }}:{{ .%s.port }}\"\n", name, name, name, name)
	}
	out, err := h.CreateInstances(ctx, hub.CreateRequest{Instances: []hub.NewInstance{projection("p", tmpl.String(), vars)}})
	if err != nil {
		b.Fatal(err)
	}
	id := out[0].ID
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		inst, err := h.GetInstance(ctx, id, true)
		if err != nil || len(inst.Latest.Value) == 0 {
			b.Fatal(err)
		}
	}
}

// A projection renders its sources with the hub's rights, so creating one
// (or changing its template) must need the right to read each source: an
// editor of namespace team-a who may not read team-b's credentials must not
// get them rendered into an instance of team-a, named by id or reached by
// alias through a team-a instance that uses them.
func TestProjectionNeedsReadOnItsSources(t *testing.T) {
	e := newEnv(t)
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ed", Namespace: "team-a"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.EditorRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "ed"}}}
	if _, err := e.h.CreateRBAC(e.ctx, bind); err != nil {
		t.Fatal(err)
	}
	ed := cairn.WithUser(e.ctx, cairn.User{Name: "ed", Groups: []string{cairn.Authenticated}})
	secret := e.create(hub.NewInstance{Alias: "creds", Namespace: "team-b", TypeRef: mmConfigType, Value: json.RawMessage(mmValue)})
	own := e.create(hub.NewInstance{Alias: "own", Namespace: "team-a", TypeRef: mmConfigType, Value: json.RawMessage(mmValue)})
	// An admin made a team-a instance that uses team-b's.
	bridge, err := e.h.CreateInstances(e.ctx, hub.CreateRequest{
		Instances:     []hub.NewInstance{{Alias: "bridge", Namespace: "team-a", TypeRef: mmConfigType, Value: json.RawMessage(`{}`)}},
		UsesRelations: []hub.UsesRelation{{From: "bridge", To: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	inA := func(in hub.NewInstance) hub.NewInstance { in.Namespace = "team-a"; return in }
	tests := []struct {
		name string
		in   hub.NewInstance
		uses []string
	}{
		{"by id", inA(projection("p", mmTemplate, byID(secret))), nil},
		{"by alias through a stored instance", inA(projection("p", mmTemplate, byAlias("creds"))), []string{bridge[0].ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.count()
			var rels []hub.UsesRelation
			for _, u := range tt.uses {
				rels = append(rels, hub.UsesRelation{From: tt.in.Alias, To: u})
			}
			_, err := e.h.CreateInstances(ed, hub.CreateRequest{Instances: []hub.NewInstance{tt.in}, UsesRelations: rels})
			wantCode(t, err, cairn.CodeForbidden)
			wantContains(t, err, `User "ed" cannot get resource "typeinstances" in API group "hub.cairn.dev" in the namespace "team-b"`)
			if strings.Contains(err.Error(), "6.2.0") {
				t.Errorf("the refusal shows the source's value: %v", err)
			}
			if n := e.count(); n != before {
				t.Errorf("a refused projection stored something: %d instances, was %d", n, before)
			}
		})
	}

	// A source the editor may read is fine, and so is the admin's
	// projection of team-b's instance, which the editor may then not
	// point at more of the source than its template shows.
	if _, err := e.h.CreateInstances(ed, hub.CreateRequest{Instances: []hub.NewInstance{inA(projection("mine", mmTemplate, byID(own)))}}); err != nil {
		t.Fatalf("a projection of an instance the editor may read: %v", err)
	}
	adminsTemplate := "host: \"{{ index .mattermost.values.ingress.hosts 0 }}\""
	p := e.create(inA(projection("admins", adminsTemplate, byID(secret))))
	_, err = e.h.UpdateInstances(ed, []hub.UpdateInstance{{ID: p, Context: mustJSON(gotemplate.Context{Template: mmTemplate, Variables: byID(secret)})}})
	wantCode(t, err, cairn.CodeForbidden)
	jsonEq(t, e.get(p).Latest.Value, `{"host":"mattermost.capact.local"}`)
	if _, err := e.h.UpdateInstances(e.ctx, []hub.UpdateInstance{{ID: p, Context: mustJSON(gotemplate.Context{Template: mmTemplate, Variables: byID(secret)})}}); err != nil {
		t.Fatalf("the admin changes the template: %v", err)
	}
}

// A source whose Type marks secrets needs reveal too: a role that may get
// it shows its secrets redacted, and must not have them rendered into a
// projection in the clear.
func TestProjectionOfSecretsNeedsReveal(t *testing.T) {
	e := newEnv(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "getter"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbac.HubGroup}, Resources: []string{"typeinstances"}, Verbs: []string{"get", "list", "create"}}}}
	bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "getter"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "gus"}}}
	for _, o := range []hub.RBACObject{role, bind} {
		if _, err := e.h.CreateRBAC(e.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	typ, err := e.h.CreateType(e.ctx, cairn.Type{Path: "cap.type.db.credentials", Revision: "0.1.0",
		JSONSchema: json.RawMessage(`{"type":"object","properties":{"mattermost":{"type":"object","x-cairn-secret":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	creds := e.create(hub.NewInstance{Alias: "creds", TypeRef: typ.Ref(), Value: json.RawMessage(`{"mattermost":{"values":{"ingress":{"hosts":["s3cret.host"]},"image":{"tag":"1"}}}}`)})
	gus := cairn.WithUser(e.ctx, cairn.User{Name: "gus", Groups: []string{cairn.Authenticated}})
	_, err = e.h.CreateInstances(gus, hub.CreateRequest{Instances: []hub.NewInstance{projection("p", mmTemplate, byID(creds))}})
	wantCode(t, err, cairn.CodeForbidden)
	wantContains(t, err, `User "gus" cannot reveal resource "typeinstances"`)
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the refusal shows the source's value: %v", err)
	}
}
