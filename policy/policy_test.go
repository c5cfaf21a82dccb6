package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
)

// seedRules are seed 000's example plus rules for every match kind.
var seedRules = []Rule{
	{TypeRef: TypeRef{Path: "cap.type.aws.auth.credentials", Revision: "0.1.0"}, Backend: BackendRef{ID: "vault"}},
	{TypeRef: TypeRef{Path: "cap.type.aws.*"}, Backend: BackendRef{ID: "aws-secrets"}},
	{TypeRef: TypeRef{Path: "cap.*"}, Backend: BackendRef{ID: "default"}},
	{TypeRef: TypeRef{Path: "cap.type.aws.auth.credentials"}, Backend: BackendRef{ID: "aws-any-rev"}},
	{TypeRef: TypeRef{Path: "cap.type.aws.rds.*"}, Backend: BackendRef{ID: "rds"}},
	{TypeRef: TypeRef{Path: "io.flipt.*"}, Backend: BackendRef{ID: "flipt"}},
}

func TestSelect(t *testing.T) {
	withStar := append(append([]Rule{}, seedRules...), Rule{TypeRef: TypeRef{Path: "*"}, Backend: BackendRef{ID: "star"}})
	tests := []struct {
		name      string
		rules     []Rule
		path, rev string
		want      string // backend id, "" for no match
		kind      string
	}{
		{"exact path and revision", seedRules, "cap.type.aws.auth.credentials", "0.1.0", "vault", MatchExactRevision},
		{"exact path, other revision", seedRules, "cap.type.aws.auth.credentials", "0.2.0", "aws-any-rev", MatchExactPath},
		{"exact path, no revision asked", seedRules, "cap.type.aws.auth.credentials", "", "aws-any-rev", MatchExactPath},
		{"wildcard one level", seedRules, "cap.type.aws.s3", "0.1.0", "aws-secrets", MatchWildcard},
		{"wildcard several levels", seedRules, "cap.type.aws.auth.token", "0.1.0", "aws-secrets", MatchWildcard},
		{"longest wildcard wins", seedRules, "cap.type.aws.rds.instance", "0.1.0", "rds", MatchWildcard},
		{"deeper under longest wildcard", seedRules, "cap.type.aws.rds.instance.replica", "1.0.0", "rds", MatchWildcard},
		{"wildcard does not match its own prefix", seedRules, "cap.type.aws", "0.1.0", "default", MatchCatchAll},
		{"cap.* catches the rest", seedRules, "cap.type.gcp.sql", "0.1.0", "default", MatchCatchAll},
		{"other root, own wildcard", seedRules, "io.flipt.flag", "1.0.0", "flipt", MatchWildcard},
		{"no match", seedRules, "org.example.thing", "0.1.0", "", ""},
		{"prefix of a segment is not a match", seedRules, "cap.type.awsx.s3", "0.1.0", "default", MatchCatchAll},
		{"star last", withStar, "org.example.thing", "0.1.0", "star", MatchCatchAll},
		{"star after cap.*", withStar, "cap.type.x", "0.1.0", "default", MatchCatchAll},
		{"no rules", nil, "cap.type.x", "0.1.0", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewIndex(tt.rules).Select(tt.path, tt.rev)
			if tt.want == "" {
				if got.Matched {
					t.Fatalf("Select(%s, %s) = rule %d (%s), want no match", tt.path, tt.rev, got.Index, got.Rule.Backend.ID)
				}
				return
			}
			if !got.Matched || got.Rule.Backend.ID != tt.want || got.Kind != tt.kind {
				t.Fatalf("Select(%s, %s) = %+v, want backend %s by %s", tt.path, tt.rev, got, tt.want, tt.kind)
			}
			if tt.rules[got.Index].Backend.ID != tt.want {
				t.Fatalf("Index %d does not point at the matched rule", got.Index)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	p := Policy{TypeInstance: TypeInstancePolicy{Rules: []Rule{
		{TypeRef: TypeRef{Path: "cap.type.ok"}, Backend: BackendRef{ID: "b"}},
		{TypeRef: TypeRef{Path: "Cap.Bad"}, Backend: BackendRef{ID: "b"}},
		{TypeRef: TypeRef{Path: "cap.type.*", Revision: "0.1.0"}, Backend: BackendRef{ID: "b"}},
		{TypeRef: TypeRef{Path: "cap.type.x", Revision: "one"}, Backend: BackendRef{ID: "b"}},
		{TypeRef: TypeRef{Path: "cap.type.ok"}, Backend: BackendRef{ID: "c"}},
		{TypeRef: TypeRef{Path: "cap.type.y"}},
		{TypeRef: TypeRef{}, Backend: BackendRef{ID: "b"}},
	}}, Interface: InterfacePolicy{Default: &Defaults{Inject: &Inject{RequiredTypeInstances: []RequiredTypeInstance{{Description: "no id"}}}}}}
	want := []string{
		"typeInstance/rules/1/typeRef/path",
		"typeInstance/rules/2/typeRef/revision",
		"typeInstance/rules/3/typeRef/revision",
		"typeInstance/rules/4/typeRef",
		"typeInstance/rules/5/backend/id",
		"typeInstance/rules/6/typeRef/path",
		"interface/default/inject/requiredTypeInstances/0/id",
	}
	causes := p.Check()
	var got []string
	for _, c := range causes {
		got = append(got, c.Field)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Check fields:\n%s\nwant:\n%s\n(causes %v)", strings.Join(got, "\n"), strings.Join(want, "\n"), causes)
	}
	if len(Policy{TypeInstance: TypeInstancePolicy{Rules: seedRules[:3]}}.Check()) != 0 {
		t.Fatal("the seed's example policy must pass Check")
	}
}

func TestParseRefusesUnknownFields(t *testing.T) {
	tests := []struct {
		doc string
		ok  bool
	}{
		{`{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"x","description":"d"}}]}}`, true},
		{`{"typeInstance":{"rulez":[]}}`, false},
		{`{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*","rev":"1"},"backend":{"id":"x"}}]}}`, false},
		{`[]`, false},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.doc))
		if (err == nil) != tt.ok {
			t.Errorf("Parse(%s) error = %v, want ok=%v", tt.doc, err, tt.ok)
		}
	}
}

// A malformed document is refused with every mistake named by its field
// (as Check names them), never with Go's type names, and an empty document
// is refused rather than read as a policy without rules.
func TestParseNamesTheField(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // "field message" of each cause, in order
	}{
		{"unknown field in a rule", `{"typeInstance":{"rules":[{"typeRef":{"path":"cap.*"},"backend":{"id":"x"}},{"typeRef":{"path":"cap.a"},"backnd":{"id":"x"},"extra":1}]}}`,
			[]string{`typeInstance/rules/1/backnd is not a known field (known: typeRef, backend)`, `typeInstance/rules/1/extra is not a known field (known: typeRef, backend)`}},
		{"unknown top-level field", `{"typeInstanc":{"rules":[]}}`,
			[]string{`typeInstanc is not a known field (known: interface, typeInstance)`}},
		{"rules not a list", `{"typeInstance":{"rules":5}}`,
			[]string{`typeInstance/rules must be a list, not a number`}},
		{"path not a string", `{"typeInstance":{"rules":[{"typeRef":{"path":["cap.*"]},"backend":{"id":"x"}}]}}`,
			[]string{`typeInstance/rules/0/typeRef/path must be a string, not a list`}},
		{"a rule not an object", `{"typeInstance":{"rules":["cap.*"]}}`,
			[]string{`typeInstance/rules/0 must be an object, not a string`}},
		{"injection", `{"interface":{"default":{"inject":{"requiredTypeInstances":[{"id":"a","name":"b"}]}}}}`,
			[]string{`interface/default/inject/requiredTypeInstances/0/name is not a known field (known: id, description)`}},
		{"empty", ``, []string{`the document is empty; a policy without rules is written {"typeInstance": {"rules": []}}`}},
		{"null", `null`, []string{`the document is empty; a policy without rules is written {"typeInstance": {"rules": []}}`}},
		{"two documents", `{}{}`, []string{`there is more than one document; a policy is one object`}},
		{"not an object", `[]`, []string{`the document must be an object, not a list`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if !cairn.HasCode(err, cairn.CodeInvalid) {
				t.Fatalf("Parse(%s) = %v, want Invalid", tt.doc, err)
			}
			var got []string
			for _, c := range cairn.Causes(err) {
				got = append(got, strings.TrimSpace(c.Field+" "+c.Message))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Parse(%s) causes:\n%s\nwant:\n%s", tt.doc, strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if strings.Contains(err.Error(), "Go struct") || strings.Contains(err.Error(), "policy.") {
				t.Errorf("the error speaks Go: %v", err)
			}
		})
	}
	// The implementation constraints are kept verbatim, whatever they hold.
	if _, err := Parse([]byte(`{"interface":{"rules":[{"interface":{"path":"cap.interface.x"},"oneOf":[{"implementationConstraints":{"anything":[1]}}]}]}}`)); err != nil {
		t.Errorf("implementationConstraints: %v", err)
	}
}

func TestRequiredTypeInstances(t *testing.T) {
	p := Policy{Interface: InterfacePolicy{
		Rules: []InterfaceRule{{Interface: TypeRef{Path: "cap.interface.database.postgresql.install"}, OneOf: []ImplementationRule{
			{Inject: &Inject{RequiredTypeInstances: []RequiredTypeInstance{{ID: "override"}}}},
			{},
		}}},
		Default: &Defaults{Inject: &Inject{RequiredTypeInstances: []RequiredTypeInstance{{ID: "default"}}}},
	}}
	tests := []struct {
		iface string
		oneOf int
		want  string
	}{
		{"cap.interface.database.postgresql.install", 0, "override"},
		{"cap.interface.database.postgresql.install", 1, "default"},
		{"cap.interface.other", 0, "default"},
	}
	for _, tt := range tests {
		got := p.RequiredTypeInstances(tt.iface, tt.oneOf)
		if len(got) != 1 || got[0].ID != tt.want {
			t.Errorf("RequiredTypeInstances(%s, %d) = %v, want [%s]", tt.iface, tt.oneOf, got, tt.want)
		}
	}
	if n := len(p.Injections()); n != 2 {
		t.Errorf("Injections() has %d entries, want 2", n)
	}
}

// BenchmarkSelect10000 selects among 10,000 rules: exact paths, exact
// revisions and wildcards at several depths, the shape of a large policy.
func BenchmarkSelect10000(b *testing.B) {
	rules := make([]Rule, 0, 10_000)
	for i := range 10_000 {
		var ref TypeRef
		switch i % 4 {
		case 0:
			ref = TypeRef{Path: fmt.Sprintf("cap.type.team%d.service%d.config", i%97, i)}
		case 1:
			ref = TypeRef{Path: fmt.Sprintf("cap.type.team%d.service%d.config", i%97, i), Revision: "0.1.0"}
		case 2:
			ref = TypeRef{Path: fmt.Sprintf("cap.type.team%d.service%d.*", i%97, i)}
		default:
			ref = TypeRef{Path: fmt.Sprintf("cap.type.team%d.*", i)}
		}
		rules = append(rules, Rule{TypeRef: ref, Backend: BackendRef{ID: fmt.Sprint(i)}})
	}
	rules = append(rules, Rule{TypeRef: TypeRef{Path: "cap.*"}, Backend: BackendRef{ID: "default"}})
	queries := []TypeRef{
		{Path: "cap.type.team1.service1.config", Revision: "0.1.0"},         // exact revision
		{Path: "cap.type.team0.service4.config", Revision: "0.2.0"},         // exact path
		{Path: "cap.type.team2.service2.db.credentials", Revision: "0.1.0"}, // deep wildcard
		{Path: "cap.type.team3.anything.else", Revision: "0.1.0"},           // shallow wildcard
		{Path: "cap.type.nobody.x", Revision: "0.1.0"},                      // cap.*
	}
	ix := NewIndex(rules)
	for _, q := range queries {
		if !ix.Select(q.Path, q.Revision).Matched {
			b.Fatalf("%s matched nothing", q)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := queries[i%len(queries)]
		ix.Select(q.Path, q.Revision)
	}
}

// BenchmarkNewIndex10000 is what the hub pays once per policy version.
func BenchmarkNewIndex10000(b *testing.B) {
	rules := make([]Rule, 10_000)
	for i := range rules {
		rules[i] = Rule{TypeRef: TypeRef{Path: fmt.Sprintf("cap.type.team%d.service%d.*", i%97, i)}, Backend: BackendRef{ID: "x"}}
	}
	b.ReportAllocs()
	for b.Loop() {
		NewIndex(rules)
	}
}
