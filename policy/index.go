package policy

import (
	"fmt"
	"strings"
)

// Match kinds, in the order selection tries them.
const (
	MatchExactRevision = "exact path and revision"
	MatchExactPath     = "exact path, any revision"
	MatchWildcard      = "wildcard prefix"
	MatchCatchAll      = "catch-all"
)

// Selection is the outcome of matching a Type against the rules.
type Selection struct {
	// Rule is the rule that matched; meaningful only when Matched.
	Rule Rule
	// Index is the rule's position in typeInstance.rules.
	Index   int
	Matched bool
	// Kind says how it matched (Match* constants).
	Kind string
}

// Index answers "which rule picks the backend of this Type" in a few map
// lookups, whatever the number of rules: the hub builds one per policy
// version and consults it on every create that names no backend, so a
// linear scan of the rules per create is avoided.
type Index struct {
	exact    map[TypeRef]int // path and revision
	anyRev   map[string]int  // path, rule without revision
	prefix   map[string]int  // "cap.type.aws" for the rule "cap.type.aws.*"
	star     int             // index of "*", -1 when absent
	rules    []Rule
	maxDepth int // segments of the longest prefix, to bound the walk
}

// NewIndex indexes the rules. When two rules have the same typeRef (Check
// refuses that) the first wins.
func NewIndex(rules []Rule) *Index {
	ix := &Index{
		exact:  map[TypeRef]int{},
		anyRev: map[string]int{},
		prefix: map[string]int{},
		star:   -1,
		rules:  rules,
	}
	for i, r := range rules {
		p := r.TypeRef.Path
		switch {
		case p == "*":
			if ix.star < 0 {
				ix.star = i
			}
		case strings.HasSuffix(p, ".*"):
			pre := strings.TrimSuffix(p, ".*")
			if _, ok := ix.prefix[pre]; !ok {
				ix.prefix[pre] = i
			}
			ix.maxDepth = max(ix.maxDepth, strings.Count(pre, ".")+1)
		case r.TypeRef.Revision != "":
			if _, ok := ix.exact[r.TypeRef]; !ok {
				ix.exact[r.TypeRef] = i
			}
		default:
			if _, ok := ix.anyRev[p]; !ok {
				ix.anyRev[p] = i
			}
		}
	}
	return ix
}

// Len is the number of rules indexed.
func (ix *Index) Len() int { return len(ix.rules) }

// Select finds the rule for a Type: exact path and revision, then exact path
// with any revision, then the longest wildcard prefix ("a.b.*" matches
// a.b.c and a.b.c.d, never a.b itself), "cap.*" being the shortest, and
// "*" last. Matched is false when no rule applies: the hub then uses its
// built-in backend.
func (ix *Index) Select(path, revision string) Selection {
	if ix == nil {
		return Selection{Index: -1}
	}
	if revision != "" {
		if i, ok := ix.exact[TypeRef{Path: path, Revision: revision}]; ok {
			return ix.sel(i, MatchExactRevision)
		}
	}
	if i, ok := ix.anyRev[path]; ok {
		return ix.sel(i, MatchExactPath)
	}
	// Walk the proper prefixes of path from the longest, skipping those
	// deeper than any wildcard rule.
	end := len(path)
	depth := strings.Count(path, ".") + 1
	for {
		dot := strings.LastIndexByte(path[:end], '.')
		if dot < 0 {
			break
		}
		end = dot
		depth--
		if depth > ix.maxDepth {
			continue
		}
		if i, ok := ix.prefix[path[:end]]; ok {
			kind := MatchWildcard
			if IsCatchAll(ix.rules[i].TypeRef.Path) {
				kind = MatchCatchAll
			}
			return ix.sel(i, kind)
		}
	}
	if ix.star >= 0 {
		return ix.sel(ix.star, MatchCatchAll)
	}
	return Selection{Index: -1}
}

func (ix *Index) sel(i int, kind string) Selection {
	return Selection{Rule: ix.rules[i], Index: i, Matched: true, Kind: kind}
}

// Explain says in one sentence what Select decided.
func (s Selection) Explain(path, revision string) string {
	ref := TypeRef{Path: path, Revision: revision}
	if !s.Matched {
		return fmt.Sprintf("no rule matches %s: no exact rule for the path, no wildcard prefix of it and no catch-all (* or cap.*); the built-in backend stores it", ref)
	}
	return fmt.Sprintf("rule %d (typeRef %s) matches %s by %s", s.Index, s.Rule.TypeRef, ref, s.Kind)
}
