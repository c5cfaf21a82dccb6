package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/labels"
	"github.com/cairn-dev/cairn/store"
)

// orderFixture creates instances whose orders all differ: created in
// ascending name order (so the default order, newest first, is the
// reverse), across revisions of one path, in namespaces one of which is
// a prefix of another ("a" sorts before "a-b", as a tuple), with the same
// namespace and name under two paths, and ids that do not follow names.
// The instances are of path, and one of path+".other"; their ids start
// at first.
func orderFixture(t *testing.T, s store.Store, path string, first int) []cairn.Instance {
	t.Helper()
	var ins []cairn.Instance
	n := 0
	for _, ns := range []string{"b", "a-b", "a"} {
		for _, name := range []string{"x", "m", "c", "c-1"} {
			n++
			rev := []string{"0.9.0", "0.10.0"}[n%2]
			// Ids out of name order: they go backwards.
			in := instance(first+100-n, path, rev, ns, name)
			in.CreatedAt = at(n)
			in.Labels = map[string]string{"half": fmt.Sprint(n % 2)}
			ins = append(ins, in)
		}
	}
	other := instance(first+200, path+".other", "0.1.0", "a", "m")
	other.Labels = map[string]string{"half": "1"}
	ins = append(ins, other)
	create(t, s, ins...)
	return ins
}

// sortedBy returns ins matching keep in order o, as the contract says.
func sortedBy(ins []cairn.Instance, o store.InstanceOrder, keep func(cairn.Instance) bool) []string {
	var out []cairn.Instance
	for _, in := range ins {
		if keep(in) {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b cairn.Instance) int {
		if o == store.ByID {
			return strings.Compare(a.ID, b.ID)
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.TypeRef.Path, b.TypeRef.Path))
	})
	return keys(out)
}

// keys names instances by path, namespace, name and id, for messages.
func keys(ins []cairn.Instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.TypeRef.Path + "/" + in.Namespace + "/" + in.Name + "@" + in.ID[len(in.ID)-3:]
	}
	return out
}

// pages lists f page by page, size instances at a time, calling between
// (when set) after each page but the last.
func pages(t *testing.T, r store.Reader, f store.InstanceFilter, size int, between func(page int, last cairn.Instance)) []cairn.Instance {
	t.Helper()
	f.Limit = size
	var out []cairn.Instance
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("limit %d: paging does not end", size)
		}
		got, err := r.ListInstances(t.Context(), f)
		if err != nil {
			t.Fatalf("ListInstances(%+v): %v", f, err)
		}
		if len(got) > size {
			t.Fatalf("limit %d: a page of %d", size, len(got))
		}
		out = append(out, got...)
		if len(got) < size {
			return out
		}
		last := got[len(got)-1]
		f.After = &last
		if between != nil {
			between(page, last)
		}
	}
}

// testListOrders: ByName and ByID sort as they say, whole or paged, with
// every filter; the default order is untouched.
func testListOrders(t *testing.T, s store.Store) {
	ins := orderFixture(t, s, "cap.type.flag", 0)
	all := func(cairn.Instance) bool { return true }
	flag := func(in cairn.Instance) bool { return in.TypeRef.Path == "cap.type.flag" }
	tests := []struct {
		name string
		f    store.InstanceFilter
		keep func(cairn.Instance) bool
	}{
		{"one type path", store.InstanceFilter{TypePath: "cap.type.flag"}, flag},
		{"one type path, one namespace", store.InstanceFilter{TypePath: "cap.type.flag", Namespace: "a"},
			func(in cairn.Instance) bool { return flag(in) && in.Namespace == "a" }},
		{"one type path, labels", store.InstanceFilter{TypePath: "cap.type.flag", Labels: []labels.Requirement{{Key: "half", Operator: labels.Equals, Values: []string{"1"}}}},
			func(in cairn.Instance) bool { return flag(in) && in.Labels["half"] == "1" }},
		{"one revision", store.InstanceFilter{TypePath: "cap.type.flag", TypeRevision: "0.10.0"},
			func(in cairn.Instance) bool { return flag(in) && in.TypeRef.Revision == "0.10.0" }},
		{"every type path", store.InstanceFilter{}, all},
		{"a type path prefix", store.InstanceFilter{TypePath: "cap.type.*"}, all},
		{"a name across type paths", store.InstanceFilter{Name: "m"}, func(in cairn.Instance) bool { return in.Name == "m" }},
		{"an attribute filter", store.InstanceFilter{Attributes: []store.AttributeFilter{{Path: "cap.attr.none", Exclude: true}}}, all},
	}
	for _, o := range []store.InstanceOrder{store.ByName, store.ByID} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("order %d/%s", o, tt.name), func(t *testing.T) {
				f := tt.f
				f.Order = o
				want := sortedBy(ins, o, tt.keep)
				got, err := s.ListInstances(t.Context(), f)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(keys(got), want) {
					t.Fatalf("ListInstances =\n\t%q\nwant\n\t%q", keys(got), want)
				}
				for _, size := range []int{1, 2, 5} {
					if paged := keys(pages(t, s, f, size, nil)); !slices.Equal(paged, want) {
						t.Errorf("pages of %d =\n\t%q\nwant\n\t%q", size, paged, want)
					}
				}
			})
		}
	}
	// The default order is still the store's own (path, revision
	// descending, createdAt descending).
	got, err := s.ListInstances(t.Context(), store.InstanceFilter{TypePath: "cap.type.flag", TypeRevision: "0.10.0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || !got[0].CreatedAt.After(got[1].CreatedAt) {
		t.Errorf("default order = %q, want newest first", keys(got))
	}
}

// testListOrderPagingAcrossWrites: paging in ByName or ByID order, an
// instance that exists throughout is listed exactly once, in order,
// whatever is created and deleted between pages, the instance a page
// ended with included; one created after the end of the page it sorts in
// is listed, one created before it is not.
func testListOrderPagingAcrossWrites(t *testing.T, s store.Store) {
	next, cases := 10000, 0
	for _, o := range []store.InstanceOrder{store.ByName, store.ByID} {
		for _, size := range []int{1, 3} {
			t.Run(fmt.Sprintf("order %d by %d", o, size), func(t *testing.T) {
				cases++
				path := fmt.Sprintf("cap.type.flag%d", cases)
				orderFixture(t, s, path, cases*1000)
				f := store.InstanceFilter{TypePath: path, Order: o}
				before, err := s.ListInstances(t.Context(), f)
				if err != nil {
					t.Fatal(err)
				}
				throughout := map[string]bool{}
				for _, in := range before {
					throughout[in.ID] = true
				}
				listedLater, notListed := map[string]bool{}, map[string]bool{}
				got := pages(t, s, f, size, func(page int, last cairn.Instance) {
					// Delete the page's last instance and the one sorting
					// right after it; every other page, create one sorting
					// right before the end of the page and one right after.
					var following string
					for _, in := range before {
						if throughout[in.ID] && less(o, last, in) {
							following = in.ID
							break
						}
					}
					next++
					early := instance(next, path, "0.1.0", last.Namespace, "0-"+fmt.Sprint(next))
					late := instance(next+1, path, "0.1.0", last.Namespace, last.Name+"-0"+fmt.Sprint(next))
					if o == store.ByID {
						early.ID = "0-" + fmt.Sprint(next)
						late.ID = last.ID + "-" + fmt.Sprint(next)
					}
					next++
					update(t, s, func(ctx context.Context, tx store.Tx) error {
						for _, id := range []string{last.ID, following} {
							if id == "" {
								continue
							}
							if err := tx.DeleteInstance(ctx, id); err != nil {
								return err
							}
							delete(throughout, id)
							notListed[id] = id != last.ID
						}
						if page%2 == 1 {
							return nil // with pages of one, the next page is late
						}
						for _, in := range []cairn.Instance{early, late} {
							if err := tx.CreateInstance(ctx, in); err != nil {
								return err
							}
						}
						listedLater[late.ID], notListed[early.ID] = true, true
						return nil
					})
				})
				seen := map[string]int{}
				for i, in := range got {
					seen[in.ID]++
					if i > 0 && !less(o, got[i-1], in) {
						t.Errorf("%s listed after %s: out of order", keys(got[i:i+1]), keys(got[i-1:i]))
					}
				}
				for id := range throughout {
					if seen[id] != 1 {
						t.Errorf("%s, there throughout, listed %d times", id, seen[id])
					}
				}
				for id := range listedLater {
					if seen[id] != 1 && !notListed[id] {
						t.Errorf("%s, created after the end of the page it sorts in, listed %d times", id, seen[id])
					}
				}
				for id, not := range notListed {
					if not && seen[id] != 0 {
						t.Errorf("%s, created before the end of the page it sorts in or deleted before listed, listed %d times", id, seen[id])
					}
				}
				for id, n := range seen {
					if n > 1 {
						t.Errorf("%s listed %d times", id, n)
					}
				}
			})
		}
	}
}

// less reports whether a sorts before b in order o.
func less(o store.InstanceOrder, a, b cairn.Instance) bool {
	if o == store.ByID {
		return a.ID < b.ID
	}
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.TypeRef.Path, b.TypeRef.Path)) < 0
}
