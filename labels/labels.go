// Package labels parses and evaluates Kubernetes-style label selectors
// ("env=prod,tier!=db,app in (a,b),!legacy") and validates label maps.
package labels

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Operator is a label selector operator.
type Operator string

const (
	Equals       Operator = "="
	NotEquals    Operator = "!="
	In           Operator = "in"
	NotIn        Operator = "notin"
	Exists       Operator = "exists"
	DoesNotExist Operator = "!"
)

// Requirement is one clause of a selector.
type Requirement struct {
	Key      string
	Operator Operator
	Values   []string
}

// Matches reports whether the label set satisfies r.
func (r Requirement) Matches(set map[string]string) bool {
	v, ok := set[r.Key]
	switch r.Operator {
	case Equals:
		return ok && v == r.Values[0]
	case NotEquals:
		// As in Kubernetes, a missing key satisfies "!=".
		return !ok || v != r.Values[0]
	case In:
		return ok && slices.Contains(r.Values, v)
	case NotIn:
		return !ok || !slices.Contains(r.Values, v)
	case Exists:
		return ok
	case DoesNotExist:
		return !ok
	}
	return false
}

func (r Requirement) String() string {
	switch r.Operator {
	case Exists:
		return r.Key
	case DoesNotExist:
		return "!" + r.Key
	case In, NotIn:
		return r.Key + " " + string(r.Operator) + " (" + strings.Join(r.Values, ",") + ")"
	default:
		return r.Key + string(r.Operator) + r.Values[0]
	}
}

// Selector is a conjunction of requirements; the empty selector matches all.
type Selector []Requirement

// Matches reports whether set satisfies every requirement.
func (s Selector) Matches(set map[string]string) bool {
	for _, r := range s {
		if !r.Matches(set) {
			return false
		}
	}
	return true
}

func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// Parse parses a selector in the Kubernetes grammar: comma-separated clauses
// of "k=v", "k==v", "k!=v", "k in (v1,v2)", "k notin (v1,v2)", "k", "!k".
func Parse(sel string) (Selector, error) {
	p := parser{in: sel}
	var out Selector
	p.space()
	if p.eof() {
		return nil, nil
	}
	for {
		r, err := p.requirement()
		if err != nil {
			return nil, fmt.Errorf("label selector %q: %w", sel, err)
		}
		out = append(out, r)
		p.space()
		if p.eof() {
			return out, nil
		}
		if !p.take(",") {
			return nil, fmt.Errorf("label selector %q: expected ',' at offset %d", sel, p.pos)
		}
		p.space()
	}
}

type parser struct {
	in  string
	pos int
}

func (p *parser) eof() bool { return p.pos >= len(p.in) }

func (p *parser) space() {
	for !p.eof() && (p.in[p.pos] == ' ' || p.in[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) take(s string) bool {
	if strings.HasPrefix(p.in[p.pos:], s) {
		p.pos += len(s)
		return true
	}
	return false
}

// word reads a key or value: everything up to a delimiter.
func (p *parser) word() string {
	start := p.pos
	for !p.eof() && !strings.ContainsRune(" \t,=!()", rune(p.in[p.pos])) {
		p.pos++
	}
	return p.in[start:p.pos]
}

func (p *parser) requirement() (Requirement, error) {
	if p.take("!") {
		p.space()
		key := p.word()
		if err := ValidateKey(key); err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: key, Operator: DoesNotExist}, nil
	}
	key := p.word()
	if err := ValidateKey(key); err != nil {
		return Requirement{}, err
	}
	p.space()
	switch {
	case p.eof() || p.in[p.pos] == ',':
		return Requirement{Key: key, Operator: Exists}, nil
	case p.take("!="):
		return p.single(key, NotEquals)
	case p.take("=="), p.take("="):
		return p.single(key, Equals)
	}
	op := Operator(p.word())
	if op != In && op != NotIn {
		return Requirement{}, fmt.Errorf("unknown operator %q after key %q (want =, ==, !=, in, notin)", op, key)
	}
	p.space()
	if !p.take("(") {
		return Requirement{}, fmt.Errorf("expected '(' after %q at offset %d", op, p.pos)
	}
	var values []string
	for {
		p.space()
		v := p.word()
		if err := ValidateValue(v); err != nil {
			return Requirement{}, err
		}
		values = append(values, v)
		p.space()
		if p.take(")") {
			break
		}
		if !p.take(",") {
			return Requirement{}, fmt.Errorf("expected ',' or ')' at offset %d", p.pos)
		}
	}
	return Requirement{Key: key, Operator: op, Values: values}, nil
}

func (p *parser) single(key string, op Operator) (Requirement, error) {
	p.space()
	v := p.word()
	if err := ValidateValue(v); err != nil {
		return Requirement{}, err
	}
	return Requirement{Key: key, Operator: op, Values: []string{v}}, nil
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	prefixRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// ValidateKey checks a label key: an optional DNS subdomain prefix and "/",
// then a name of at most 63 characters.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty label key")
	}
	name := key
	if prefix, rest, ok := strings.Cut(key, "/"); ok {
		if len(prefix) > 253 || !prefixRE.MatchString(prefix) {
			return fmt.Errorf("label key %q: prefix must be a DNS subdomain", key)
		}
		name = rest
	}
	if len(name) > 63 || !nameRE.MatchString(name) {
		return fmt.Errorf("label key %q: name must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric", key)
	}
	return nil
}

// ValidateValue checks a label value: empty, or at most 63 characters of
// [A-Za-z0-9-_.] starting and ending alphanumeric.
func ValidateValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 || !nameRE.MatchString(v) {
		return fmt.Errorf("label value %q: must be at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric", v)
	}
	return nil
}

// Validate checks every key and value of a label map.
func Validate(set map[string]string) error {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return err
		}
		if err := ValidateValue(set[k]); err != nil {
			return fmt.Errorf("label %q: %w", k, err)
		}
	}
	return nil
}
