package deps

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestIndex(t *testing.T) {
	redis := &Stack{Name: "redis", Version: "1.0.0", Outputs: []Output{{Name: "host"}, {Name: "conn", ID: "urn:redis-conn"}},
		Dependencies: &Dependencies{Provides: &Provides{Interface: ProvidedInterface{ID: "urn:if:redis"}}}}
	keydb := &Stack{Name: "keydb", Version: "2.0.0", Outputs: []Output{{Name: "url", ID: "urn:redis-conn"}}}
	idx := NewIndex()
	idx.Put(existing(redis, "dev", "a", InstallationSharing{}))
	idx.Put(existing(redis, "dev", "b", InstallationSharing{Mode: SharingGroupMode, Group: "g"}))
	idx.Put(existing(redis, "dev", "c", InstallationSharing{Mode: SharingNone}))
	idx.Put(existing(keydb, "dev", "d", InstallationSharing{}))
	idx.Put(existing(redis, "prod", "e", InstallationSharing{}))
	ctx := context.Background()
	names := func(q Query) []string {
		t.Helper()
		got, err := idx.Candidates(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range got {
			out = append(out, in.Name)
		}
		return out
	}
	for _, tc := range []struct {
		q    Query
		want []string
	}{
		{Query{Namespace: "dev", Stack: "redis"}, []string{"a"}},                             // not b (group), not c (none), not e (namespace)
		{Query{Namespace: "dev", Group: "g", Stack: "redis"}, []string{"b"}},                 // the group's
		{Query{Namespace: "dev", OutputIDs: []string{"urn:redis-conn"}}, []string{"a", "d"}}, // any stack with the $id
		{Query{Namespace: "dev", InterfaceID: "urn:if:redis"}, []string{"a"}},
		{Query{Namespace: "dev", OutputNames: []string{"host"}, OutputIDs: []string{"urn:redis-conn"}}, []string{"a"}},
		{Query{Namespace: "dev", Stack: "keydb", InterfaceID: "urn:if:redis"}, nil},
		{Query{Namespace: "dev", Name: "d", Stack: "keydb"}, []string{"d"}},
		{Query{Namespace: "dev", Name: "c", Stack: "redis"}, nil}, // sharing none, even by name
		{Query{Namespace: "nowhere", Stack: "redis"}, nil},
	} {
		if got := names(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if _, err := idx.Candidates(ctx, Query{Namespace: "dev"}); err == nil {
		t.Error("a query without criteria was answered")
	}
	// Put replaces (the user edits sharing to none: it leaves the query);
	// Delete removes.
	idx.Put(existing(redis, "dev", "a", InstallationSharing{Mode: SharingNone}))
	if got := names(Query{Namespace: "dev", Stack: "redis"}); got != nil {
		t.Errorf("after edit: %v", got)
	}
	idx.Delete("dev", "d")
	if got := names(Query{Namespace: "dev", OutputIDs: []string{"urn:redis-conn"}}); got != nil {
		t.Errorf("after delete: %v", got)
	}
	if idx.Len() != 4 {
		t.Errorf("len %d", idx.Len())
	}
	in, err := idx.Installation(ctx, InstallationRef{Kind: "Redis", Namespace: "dev", Name: "c"})
	if err != nil || in.Name != "c" {
		t.Errorf("by kind: %+v %v", in, err)
	}
	if _, err := idx.Installation(ctx, InstallationRef{Kind: "Redis", Namespace: "dev", Name: "d"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted: %v", err)
	}
}

func TestInterfaceDigest(t *testing.T) {
	a := &Stack{Name: "x", Outputs: []Output{{Name: "b", ID: "i"}, {Name: "a"}}}
	b := &Stack{Name: "y", Outputs: []Output{{Name: "a"}, {Name: "b", ID: "i"}}}
	if a.InstallationInterface().Digest() != b.InstallationInterface().Digest() {
		t.Error("the digest depends on output order or the stack's name")
	}
	c := &Stack{Name: "x", Outputs: []Output{{Name: "a"}, {Name: "b", ID: "j"}}}
	d := &Stack{Name: "x", Outputs: a.Outputs, Dependencies: &Dependencies{Provides: &Provides{Interface: ProvidedInterface{ID: "p"}}}}
	for _, o := range []*Stack{c, d} {
		if o.InstallationInterface().Digest() == a.InstallationInterface().Digest() {
			t.Errorf("%+v has a's digest", o)
		}
	}
}
