package deps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// sharedName is the name of a new shareable installation: the stack's
// name and a hash of the stack, the group and the dependency's definition
// (its mappings), so every installer needing the same one computes the
// same name and the database's uniqueness makes a race create it once.
func sharedName(stack, group string, def map[string]any) string {
	b, _ := json.Marshal(map[string]any{"stack": stack, "group": group, "definition": def})
	sum := sha256.Sum256(b)
	return dnsName(base(stack) + "-" + hex.EncodeToString(sum[:])[:10])
}

// definition is the dependency's parameter and credential mappings as
// they decide its identity: values known now, else the template and the
// nodes it reads.
func (res *resolution) definition(b *binding, siblings map[string]*binding) (map[string]any, error) {
	params, creds := map[string]Value{}, map[string]Value{}
	for _, k := range sortedKeys(b.c.req.Parameters) {
		if t := b.c.params[k]; t != nil {
			v, err := res.planValue(t, b.parent, siblings, b)
			if err != nil {
				return nil, fmt.Errorf("parameters.%s: %w", k, err)
			}
			params[k] = v
		} else {
			params[k] = Value{Value: b.c.req.Parameters[k], known: true}
		}
	}
	for _, k := range sortedKeys(b.c.req.Credentials) {
		v, err := res.planValue(b.c.creds[k], b.parent, siblings, b)
		if err != nil {
			return nil, fmt.Errorf("credentials.%s: %w", k, err)
		}
		creds[k] = v
	}
	// The criteria count too: a dependency asking for another range or
	// stack is another definition, so a shared installation under this
	// name always satisfies whoever computes the name.
	// The reference's version counts only when no range replaces it.
	crit := b.c.req.Bundle.Version
	ref, _ := ParseReference(b.c.req.Bundle.Reference)
	if crit == "" {
		crit = "=" + ref.Version
	}
	return map[string]any{"stack": ref.Name, "version": crit, "parameters": canon(params), "credentials": canon(creds)}, nil
}

// canon is a Value map as it enters the shared name: values known now,
// otherwise the template and the nodes it reads.
func canon(vs map[string]Value) map[string]any {
	out := map[string]any{}
	for k, v := range vs {
		switch {
		case v.Credential != "":
			out[k] = map[string]any{"credential": v.Credential}
		case v.known:
			out[k] = map[string]any{"value": v.Value}
		default:
			out[k] = map[string]any{"template": v.Template, "needs": v.Needs}
		}
	}
	return out
}

func base(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 {
		return name[i+1:]
	}
	return name
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsName makes a valid installation name (a DNS label): lower case,
// other characters as '-', at most 63 characters (a long name keeps a
// hash of the whole so it stays unique).
func dnsName(s string) string {
	n := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > 63 {
		sum := sha256.Sum256([]byte(s))
		n = strings.TrimRight(n[:52], "-") + "-" + hex.EncodeToString(sum[:])[:10]
	}
	return n
}
