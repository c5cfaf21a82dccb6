package labels

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Selector
	}{
		{"", nil},
		{"  \t ", nil},
		{"env=prod", Selector{{"env", Equals, []string{"prod"}}}},
		{"env==prod", Selector{{"env", Equals, []string{"prod"}}}},
		{"env!=prod", Selector{{"env", NotEquals, []string{"prod"}}}},
		{"env=", Selector{{"env", Equals, []string{""}}}},
		{"env in (a,b)", Selector{{"env", In, []string{"a", "b"}}}},
		{"env notin (a)", Selector{{"env", NotIn, []string{"a"}}}},
		{"env", Selector{{"env", Exists, nil}}},
		{"!env", Selector{{"env", DoesNotExist, nil}}},
		{"example.com/app=web", Selector{{"example.com/app", Equals, []string{"web"}}}},
		{
			"env=prod,tier!=db,app in (a,b),!legacy,team",
			Selector{
				{"env", Equals, []string{"prod"}},
				{"tier", NotEquals, []string{"db"}},
				{"app", In, []string{"a", "b"}},
				{"legacy", DoesNotExist, nil},
				{"team", Exists, nil},
			},
		},
		{
			" env = prod ,\ttier != db , app in ( a , b ) , ! legacy , team ",
			Selector{
				{"env", Equals, []string{"prod"}},
				{"tier", NotEquals, []string{"db"}},
				{"app", In, []string{"a", "b"}},
				{"legacy", DoesNotExist, nil},
				{"team", Exists, nil},
			},
		},
		{"a in(x),b notin(y)", Selector{{"a", In, []string{"x"}}, {"b", NotIn, []string{"y"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the error
	}{
		{"-env=prod", []string{`label selector "-env=prod"`, `label key "-env"`, "starting and ending alphanumeric"}},
		{"Bad_Prefix.com/x=y", []string{`label key "Bad_Prefix.com/x"`, "prefix must be a DNS subdomain"}},
		{strings.Repeat("k", 64) + "=v", []string{"at most 63 characters"}},
		{"=prod", []string{"empty label key"}},
		{"!", []string{"empty label key"}},
		{"a=b,", []string{"empty label key"}},
		{"env=-prod", []string{`label value "-prod"`}},
		{"env in (a,-b)", []string{`label value "-b"`}},
		{"env is prod", []string{`unknown operator "is" after key "env"`, "want =, ==, !=, in, notin"}},
		{"env < 3", []string{`unknown operator "<" after key "env"`}},
		{"env !x", []string{`unknown operator "" after key "env"`}},
		{"env in a", []string{`expected '(' after "in"`}},
		{"env notin", []string{`expected '(' after "notin"`}},
		{"env in (a,b", []string{"expected ',' or ')'"}},
		{"env in (a b)", []string{"expected ',' or ')'"}},
		{"env in (", []string{"expected ',' or ')'"}},
		{"a=b c=d", []string{"expected ',' at offset 4"}},
		{"a=(b)", []string{"expected ','"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tt.in, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) error %q does not contain %q", tt.in, err, w)
				}
			}
		})
	}
}

func TestMatches(t *testing.T) {
	set := map[string]string{"env": "prod", "tier": "web", "empty": ""}
	tests := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"env=prod", true},
		{"env=dev", false},
		{"missing=x", false},
		{"empty=", true},
		{"env!=dev", true},
		{"env!=prod", false},
		{"missing!=x", true}, // a missing key satisfies !=
		{"env in (dev,prod)", true},
		{"env in (dev)", false},
		{"missing in (x)", false},
		{"env notin (dev)", true},
		{"env notin (prod,dev)", false},
		{"missing notin (x)", true}, // and notin
		{"env", true},
		{"missing", false},
		{"empty", true},
		{"!missing", true},
		{"!env", false},
		{"env=prod,tier=web", true},
		{"env=prod,tier=db", false},
		{"env=prod,!tier", false},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			s, err := Parse(tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Matches(set); got != tt.want {
				t.Errorf("%q.Matches(%v) = %v, want %v", tt.sel, set, got, tt.want)
			}
		})
	}
}

func TestRequirementUnknownOperator(t *testing.T) {
	r := Requirement{Key: "k", Operator: "~", Values: []string{"v"}}
	if r.Matches(map[string]string{"k": "v"}) {
		t.Error("a requirement with an unknown operator matched")
	}
}

func TestSelectorString(t *testing.T) {
	for _, in := range []string{
		"env=prod",
		"env!=prod",
		"env in (a,b)",
		"env notin (a)",
		"env",
		"!env",
		"env=prod,tier!=db,app in (a,b),!legacy,team",
	} {
		s, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.String(); got != in {
			t.Errorf("Parse(%q).String() = %q", in, got)
		}
		again, err := Parse(s.String())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("Parse(String()) of %q = %v, %v; want %v", in, again, err, s)
		}
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name string
		set  map[string]string
		want string // substring of the error; "" for valid
	}{
		{"nil", nil, ""},
		{"simple", map[string]string{"env": "prod", "app.kubernetes.io/name": "web"}, ""},
		{"empty value", map[string]string{"env": ""}, ""},
		{"63 characters", map[string]string{long: long}, ""},
		{"dots dashes underscores", map[string]string{"a-b_c.d": "x.y-z_1"}, ""},
		{"empty key", map[string]string{"": "x"}, "empty label key"},
		{"key too long", map[string]string{long + "a": "x"}, "at most 63 characters"},
		{"key starts badly", map[string]string{"_env": "x"}, `label key "_env"`},
		{"key ends badly", map[string]string{"env-": "x"}, `label key "env-"`},
		{"key with space", map[string]string{"my env": "x"}, `label key "my env"`},
		{"uppercase prefix", map[string]string{"Example.com/app": "x"}, "prefix must be a DNS subdomain"},
		{"empty prefix", map[string]string{"/app": "x"}, "prefix must be a DNS subdomain"},
		{"empty name after prefix", map[string]string{"example.com/": "x"}, `label key "example.com/"`},
		{"value too long", map[string]string{"env": long + "a"}, `label "env": label value`},
		{"value with slash", map[string]string{"env": "a/b"}, `label value "a/b"`},
		{"first bad key in order", map[string]string{"b!": "x", "a!": "x"}, `label key "a!"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.set)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate(%v): %v", tt.set, err)
			case tt.want != "" && err == nil:
				t.Errorf("Validate(%v) succeeded, want an error containing %q", tt.set, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("Validate(%v) error %q does not contain %q", tt.set, err, tt.want)
			}
		})
	}
}
