package graphql_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestErrorTexts pins every error text of Local Hub that clients match.
func TestErrorTexts(t *testing.T) {
	e := newEnv(t)
	f := &faults{}
	files := e.fileBackend(f)
	const providerSchema = `{"type":"object","required":["provider"],"properties":{"provider":{"type":"string"}}}`
	ctxOnly := e.registerBackend("helm", `{"url":"grpc://127.0.0.1:1","acceptValue":false,"contextSchema":`+providerSchema+`}`)
	// Instances whose values break the storage schema, used as backends.
	noFields := e.create([]map[string]any{ti("nf", "cap.type.not.a.backend", "0.1.0", map[string]any{"foo": 1})})["nf"]
	badSchema := e.create([]map[string]any{ti("bs", "cap.type.not.a.backend", "0.1.0",
		map[string]any{"url": "grpc://x", "acceptValue": true, "contextSchema": "text"})})["bs"]
	got := e.create([]map[string]any{ti("a", "cap.type.a", "0.1.0", 1), ti("b", "cap.type.b", "0.1.0", 2), ti("user", "cap.type.u", "0.1.0", 3)},
		[2]string{"user", "a"})
	a, b, user := got["a"], got["b"], got["user"]
	e.ok(`mutation { lockTypeInstances(in: {ids: ["`+b+`"], ownerID: "other"}) }`, nil, nil)
	const builtinID = "a36ed738-dfe7-45ec-acd1-8e44e8db893b" // cairn.BuiltinBackendID, as clients know it
	const missing, missing2 = "6f0f0e47-0000-4000-8000-000000000001", "6f0f0e47-0000-4000-8000-000000000002"

	withBackend := func(alias, id string, value any, ctx any) map[string]any {
		in := ti(alias, "cap.type.x", "0.1.0", value)
		be := map[string]any{"id": id}
		if ctx != nil {
			be["context"] = ctx
		}
		in["backend"] = be
		return in
	}
	create := func(tis ...map[string]any) (string, map[string]any) {
		return createMany, map[string]any{"in": map[string]any{"typeInstances": tis, "usesRelations": []any{}}}
	}
	createOne := func(in map[string]any) (string, map[string]any) {
		return `mutation($in: CreateTypeInstanceInput!) { createTypeInstance(in: $in) }`, map[string]any{"in": in}
	}
	update := func(ups ...map[string]any) (string, map[string]any) {
		return `mutation($in: [UpdateTypeInstancesInput]!) { updateTypeInstances(in: $in) { id } }`, map[string]any{"in": ups}
	}
	up := func(id string) map[string]any {
		return map[string]any{"id": id, "typeInstance": map[string]any{"value": 5}}
	}
	lock := func(op, owner string, ids ...string) (string, map[string]any) {
		return fmt.Sprintf(`mutation($ids: [ID!]!, $o: LockOwnerID!) { %s(in: {ids: $ids, ownerID: $o}) }`, op), map[string]any{"ids": ids, "o": owner}
	}
	del := func(id string) (string, map[string]any) {
		return `mutation($id: ID!) { deleteTypeInstance(id: $id) }`, map[string]any{"id": id}
	}

	tests := []struct {
		name  string
		setup func()
		req   func() (string, map[string]any)
		want  string
	}{
		{"create: value not allowed", nil, func() (string, map[string]any) {
			return create(withBackend("v", ctxOnly, 1, map[string]any{"provider": "aws"}))
		}, twice(`External backend "` + ctxOnly + `": input value not allowed`)},
		{"create: context not allowed", nil, func() (string, map[string]any) {
			return create(withBackend("c", files, 1, map[string]any{"k": "v"}))
		}, twice("External backend \"" + files + "\": input context not allowed")},
		{"create: invalid context", nil, func() (string, map[string]any) {
			return create(withBackend("i", ctxOnly, nil, map[string]any{"provider": 7}))
		}, twice("External backend \"" + ctxOnly + "\": invalid input: context/provider must be string")},
		{"create: missing context property", nil, func() (string, map[string]any) {
			return create(withBackend("m", ctxOnly, nil, nil))
		}, twice("External backend \"" + ctxOnly + "\": invalid input: context must have required property 'provider'")},
		{"create: backend value breaks the storage schema", nil, func() (string, map[string]any) {
			return create(withBackend("n", noFields, 1, nil))
		}, twice("failed to resolve the TypeInstance's backend \"" + noFields +
			"\": spec/value must have required property 'url', spec/value must have required property 'acceptValue'")},
		{"create: backend contextSchema not an object", nil, func() (string, map[string]any) {
			return create(withBackend("s", badSchema, 1, nil))
		}, twice("failed to resolve the TypeInstance's backend \"" + badSchema + "\": spec/value/contextSchema must be object")},
		{"create: the built-in backend's refusal has no rollback line", nil, func() (string, map[string]any) {
			return create(withBackend("b", builtinID, 1, map[string]any{"k": "v"}))
		}, "failed to create the TypeInstances: 1 error occurred:\n\t* Error: External backend \"" + builtinID + "\": input context not allowed"},
		{"create: two errors in one batch", nil, func() (string, map[string]any) {
			return create(withBackend("v", ctxOnly, 1, map[string]any{"provider": "aws"}), withBackend("c", files, 1, map[string]any{"k": "v"}))
		}, "failed to create the TypeInstances: 3 error occurred:\n\t* Error: External backend \"" + ctxOnly + "\": input value not allowed\n\t* Error: External backend \"" + files + "\": input context not allowed" +
			"\n\t* Error: rollback externally stored values: External backend \"" + ctxOnly + "\": input value not allowed"},
		{"create: rollback line", func() { f.failCreate.Store(true); f.failDelete.Store(true) }, func() (string, map[string]any) {
			return create(withBackend("ok", files, map[string]any{"fine": true}, nil), withBackend("bad", files, map[string]any{"fail": true}, nil))
		}, "failed to create the TypeInstances: 2 error occurred:\n\t* Error: External backend \"" + files + "\": create TypeInstance \"<id>\": refusing value of <id> (gRPC InvalidArgument)\n\t* Error: rollback externally stored values: External backend \"" + files + "\": delete TypeInstance \"<id>\": disk on fire (gRPC Internal)"},
		{"createTypeInstance prefix", func() { f.failCreate.Store(false); f.failDelete.Store(false) }, func() (string, map[string]any) {
			return createOne(withBackend("v", ctxOnly, 1, map[string]any{"provider": "aws"}))
		}, "failed to create TypeInstance: " + twice("External backend \""+ctxOnly+"\": input value not allowed")},
		{"update: not found", nil, func() (string, map[string]any) { return update(up(missing), up(a), up(missing2)) },
			"failed to update TypeInstances: 1 error occurred:\n\t* Error: " + `TypeInstances with IDs "` + missing + `", "` + missing2 + `" were not found`},
		{"update: locked", nil, func() (string, map[string]any) { return update(up(a), up(b)) },
			"failed to update TypeInstances: 1 error occurred:\n\t* Error: " + `TypeInstances with IDs "` + b + `" are locked by different owner`},
		{"update: not found before locked", nil, func() (string, map[string]any) { return update(up(b), up(missing)) },
			"failed to update TypeInstances: 1 error occurred:\n\t* Error: " + `TypeInstances with IDs "` + missing + `" were not found`},
		{"lock: one error", nil, func() (string, map[string]any) { return lock("lockTypeInstances", "me", a, missing) },
			`failed to lock TypeInstances: 1 error occurred: TypeInstances with IDs "` + missing + `" were not found`},
		{"lock: two errors", nil, func() (string, map[string]any) { return lock("lockTypeInstances", "me", b, missing) },
			`failed to lock TypeInstances: 2 errors occurred: [TypeInstances with IDs "` + missing + `" were not found, TypeInstances with IDs "` + b + `" are locked by different owner]`},
		{"unlock: locked by another", nil, func() (string, map[string]any) { return lock("unlockTypeInstances", "me", b) },
			`failed to unlock TypeInstances: 1 error occurred: TypeInstances with IDs "` + b + `" are locked by different owner`},
		{"delete: not found", nil, func() (string, map[string]any) { return del(missing) },
			`failed to delete TypeInstance with ID "` + missing + `": TypeInstance was not found`},
		{"delete: locked", nil, func() (string, map[string]any) { return del(b) },
			`failed to delete TypeInstance with ID "` + b + `": TypeInstance is locked by different owner`},
		{"delete: used", nil, func() (string, map[string]any) { return del(a) },
			`failed to delete TypeInstance with ID "` + a + `": TypeInstance is used by other TypeInstances, you must first remove ` + user},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup()
			}
			msg := e.fails(tc.req())
			want := tc.want
			if strings.Contains(want, "<id>") {
				// The rollback case names instance ids generated by the hub.
				want = maskIDs(want)
				msg = maskIDs(msg)
			}
			if msg != want {
				t.Errorf("got\n%q\nwant\n%q", msg, want)
			}
		})
	}
}

// twice is Local Hub's answer to a create refused by an external backend's
// rules: the refusal, then the same refusal from its rollback.
func twice(refusal string) string {
	return "failed to create the TypeInstances: 2 error occurred:\n\t* Error: " + refusal +
		"\n\t* Error: rollback externally stored values: " + refusal
}

// maskIDs replaces instance UUIDs other than backend ids by <id>.
func maskIDs(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if i+36 <= len(s) && isUUID(s[i:i+36]) && !strings.Contains(s[max(0, i-20):i], "backend \"") {
			b.WriteString("<id>")
			i += 36
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

func isUUID(s string) bool {
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !strings.ContainsRune("0123456789abcdef", c):
			return false
		}
	}
	return true
}
