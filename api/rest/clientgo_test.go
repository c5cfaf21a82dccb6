package rest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
)

// clientGo returns client-go's discovery and dynamic clients for e.
func clientGo(t *testing.T, e *restEnv) (*discovery.DiscoveryClient, *dynamic.DynamicClient) {
	t.Helper()
	// No client-side throttling: the default 5 QPS would only slow the test.
	cfg := &restclient.Config{Host: e.url, Timeout: 30 * time.Second, QPS: 1000, Burst: 1000}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc, dyn
}

func newFlag(name string, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flipt.io/v1alpha1",
		"kind":       "Flag",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	u.SetLabels(labels)
	return u
}

// TestClientGoDynamic drives the server with client-go's discovery client,
// RESTMapper and dynamic client, as a controller would.
func TestClientGoDynamic(t *testing.T) {
	e := newFlagsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dc, dyn := clientGo(t, e)

	// Discovery.
	v, err := dc.ServerVersion()
	if err != nil || v.GitVersion != "v1.32.0-cairn-test" {
		t.Fatalf("ServerVersion = %+v, %v", v, err)
	}
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	gi := slices.IndexFunc(groups, func(g *metav1.APIGroup) bool { return g.Name == "flipt.io" })
	if gi < 0 || groups[gi].PreferredVersion.Version != "v1" || len(groups[gi].Versions) != 2 {
		t.Errorf("flipt.io group = %+v", groups)
	}
	var flags *metav1.APIResource
	for _, l := range lists {
		if l.GroupVersion != "flipt.io/v1alpha1" {
			continue
		}
		for i := range l.APIResources {
			if l.APIResources[i].Name == "flags" {
				flags = &l.APIResources[i]
			}
		}
	}
	if flags == nil || !flags.Namespaced || flags.Kind != "Flag" || flags.SingularName != "flag" || !slices.Equal(flags.ShortNames, []string{"fl"}) ||
		!slices.Contains(flags.Verbs, "watch") || !slices.Contains(flags.Verbs, "patch") {
		t.Fatalf("flags resource = %+v", flags)
	}

	// RESTMapper: kind to resource, and the short name.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "flipt.io", Kind: "Flag"}, "v1alpha1")
	if err != nil {
		t.Fatalf("RESTMapping: %v", err)
	}
	gvr := schema.GroupVersionResource{Group: "flipt.io", Version: "v1alpha1", Resource: "flags"}
	if m.Resource != gvr || m.Scope.Name() != "namespace" {
		t.Fatalf("mapping = %+v scope %s", m.Resource, m.Scope.Name())
	}
	if pref, err := mapper.RESTMapping(schema.GroupKind{Group: "flipt.io", Kind: "Flag"}); err != nil || pref.Resource.Version != "v1" {
		t.Errorf("preferred mapping = %+v, %v; want v1", pref, err)
	}
	expander := restmapper.NewShortcutExpander(mapper, dc, nil)
	if got, err := expander.ResourceFor(schema.GroupVersionResource{Resource: "fl"}); err != nil || got.Group != "flipt.io" || got.Resource != "flags" {
		t.Errorf("short name fl = %+v, %v", got, err)
	}
	if gvk, err := mapper.KindFor(schema.GroupVersionResource{Group: "hub.cairn.dev", Resource: "typeinstances"}); err != nil || gvk.Kind != "TypeInstance" {
		t.Errorf("KindFor typeinstances = %v, %v", gvk, err)
	}
	res := dyn.Resource(m.Resource).Namespace("default")

	// Create, and the errors of create.
	created, err := res.Create(ctx, newFlag("one", map[string]string{"team": "a"}, map[string]any{"key": "one", "port": int64(80)}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || created.GetGeneration() != 1 || created.GetNamespace() != "default" {
		t.Errorf("created = %v", created.Object)
	}
	if _, err := res.Create(ctx, newFlag("two", map[string]string{"team": "b"}, map[string]any{"key": "two"}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create two: %v", err)
	}
	_, err = res.Create(ctx, newFlag("one", nil, map[string]any{"key": "one"}), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create = %v, want AlreadyExists", err)
	}
	_, err = res.Create(ctx, newFlag("bad", nil, map[string]any{"key": "bad", "port": int64(0)}), metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("invalid Create = %v, want Invalid", err)
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Details == nil || len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Field != "spec.port" {
		t.Errorf("Invalid details = %+v", se)
	}

	// Get and list.
	got, err := res.Get(ctx, "one", metav1.GetOptions{})
	if err != nil || got.GetUID() != created.GetUID() {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if port, _, _ := unstructured.NestedInt64(got.Object, "spec", "port"); port != 80 {
		t.Errorf("spec.port = %d", port)
	}
	if _, err := res.Get(ctx, "nobody", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get missing = %v, want NotFound", err)
	}
	list, err := res.List(ctx, metav1.ListOptions{LabelSelector: "team in (a)"})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "one" || list.GetResourceVersion() == "" {
		t.Fatalf("List team in (a) = %v, %v", list, err)
	}
	all, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil || len(all.Items) != 1 || all.GetContinue() == "" {
		t.Fatalf("List limit 1 = %v, %v", all, err)
	}
	page2, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1, Continue: all.GetContinue()})
	if err != nil || len(page2.Items) != 1 || page2.Items[0].GetName() == all.Items[0].GetName() {
		t.Fatalf("second page = %v, %v", page2, err)
	}

	// Update with resourceVersion: current, then stale.
	upd := got.DeepCopy()
	if err := unstructured.SetNestedField(upd.Object, int64(81), "spec", "port"); err != nil {
		t.Fatal(err)
	}
	updated, err := res.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil || updated.GetGeneration() != 2 || updated.GetResourceVersion() == got.GetResourceVersion() {
		t.Fatalf("Update = %v, %v", updated, err)
	}
	if _, err := res.Update(ctx, upd, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion = %v, want Conflict", err)
	}

	// Patches.
	patched, err := res.Patch(ctx, "one", types.MergePatchType, []byte(`{"spec":{"enabled":true}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge Patch: %v", err)
	}
	if on, _, _ := unstructured.NestedBool(patched.Object, "spec", "enabled"); !on {
		t.Errorf("merge patched = %v", patched.Object)
	}
	patched, err = res.Patch(ctx, "one", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/port","value":82}]`), metav1.PatchOptions{})
	if port, _, _ := unstructured.NestedInt64(patched.Object, "spec", "port"); err != nil || port != 82 {
		t.Errorf("JSON Patch = %v, %v", patched, err)
	}
	if _, err := res.Patch(ctx, "one", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge Patch = %v, want UnsupportedMediaType", err)
	}

	// Watch one event from the current resourceVersion.
	w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: patched.GetResourceVersion(), LabelSelector: "team=a"})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	relabeled, err := res.Patch(ctx, "one", types.MergePatchType, []byte(`{"metadata":{"labels":{"extra":"x"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Modified || !ok || u.GetName() != "one" || u.GetResourceVersion() != relabeled.GetResourceVersion() || u.GetLabels()["extra"] != "x" {
			t.Errorf("event = %s %v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	w.Stop()

	// Delete: with a stale precondition, then for real.
	stale := got.GetResourceVersion()
	if err := res.Delete(ctx, "one", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &stale}}); !apierrors.IsConflict(err) {
		t.Errorf("Delete with a stale precondition = %v, want Conflict", err)
	}
	uid := created.GetUID()
	if err := res.Delete(ctx, "one", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := res.Get(ctx, "one", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete = %v, want NotFound", err)
	}
	if err := res.Delete(ctx, "one", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second Delete = %v, want NotFound", err)
	}

	// DeleteCollection by label: the matching ones go, the other stays.
	for _, n := range []string{"dc-1", "dc-2", "dc-keep"} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "flipt.io/v1alpha1", "kind": "Flag",
			"metadata": map[string]any{"name": n, "labels": map[string]any{"batch": strconv.FormatBool(n != "dc-keep")}}, "spec": map[string]any{"key": n}}}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Create %s: %v", n, err)
		}
	}
	if err := res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=true"}); err != nil {
		t.Fatalf("DeleteCollection: %v", err)
	}
	if l, err := res.List(ctx, metav1.ListOptions{LabelSelector: "batch"}); err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "dc-keep" {
		t.Errorf("after DeleteCollection: %v, %v; want dc-keep alone", l, err)
	}

	// A pruned resourceVersion: the reflector's cue to list again.
	if err := e.h.PruneChanges(e.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: created.GetResourceVersion()}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("Watch from a pruned resourceVersion = %v, want Expired", err)
	}

	// OpenAPI v3 through client-go.
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		t.Fatalf("OpenAPIV3 Paths: %v", err)
	}
	gv, ok := paths["apis/flipt.io/v1alpha1"]
	if !ok {
		t.Fatalf("OpenAPI v3 paths = %v", keys(paths))
	}
	raw, err := gv.Schema("application/json")
	if err != nil || !strings.Contains(string(raw), `"io.flipt.v1alpha1.Flag"`) {
		t.Errorf("OpenAPI v3 document: %v", err)
	}
}

// TestClientGoInformer runs a dynamic shared informer, the way controllers
// consume the API: its reflector lists (or streams the initial objects),
// watches, and its handlers see objects come, change and go.
func TestClientGoInformer(t *testing.T) {
	e := newFlagsEnv(t)
	e.createFlag("default", "existing", nil, `{"key":"e"}`)
	_, dyn := clientGo(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	gvr := schema.GroupVersionResource{Group: "flipt.io", Version: "v1alpha1", Resource: "flags"}
	// The informer dynamicinformer's factory builds, built here: the
	// factory's package links client-go's typed informers for every
	// built-in group (238 packages, a quarter of a cold CI compile) that
	// this test never uses.
	flags := dyn.Resource(gvr).Namespace("default")
	inf := cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return flags.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return flags.Watch(ctx, o)
			},
		}, dyn),
		&unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{
			Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			ObjectDescription: gvr.String(),
		},
	)
	var mu sync.Mutex
	var seen []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	name := func(obj any) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, _ := obj.(*unstructured.Unstructured)
		return u.GetName()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { note("add " + name(obj)) },
		UpdateFunc: func(_, obj any) { note("update " + name(obj)) },
		DeleteFunc: func(obj any) { note("delete " + name(obj)) },
	}); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-stopped }()
	synced := make(chan bool, 1)
	go func() { synced <- cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) }()
	select {
	case ok := <-synced:
		if !ok {
			t.Fatal("the informer's cache never synced")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the informer's cache did not sync within 20s")
	}

	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(eventTimeout)
		for time.Now().Before(deadline) {
			mu.Lock()
			ok := slices.Contains(seen, want)
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(10 * time.Millisecond) // polling with a deadline
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("informer saw %v, never %q", seen, want)
	}
	waitFor("add existing")
	e.createFlag("default", "fresh", nil, `{"key":"f"}`)
	waitFor("add fresh")
	e.mustDo("PATCH", flagPath("default", "fresh"), "application/merge-patch+json", `{"spec":{"port":5}}`, http.StatusOK)
	waitFor("update fresh")
	e.mustDo("DELETE", flagPath("default", "existing"), "", nil, http.StatusOK)
	waitFor("delete existing")
	obj, ok, err := inf.GetStore().GetByKey("default/fresh")
	if err != nil || !ok {
		t.Fatalf("store has no default/fresh: %v", err)
	}
	if port, _, _ := unstructured.NestedInt64(obj.(*unstructured.Unstructured).Object, "spec", "port"); port != 5 {
		t.Errorf("cached fresh = %v", obj)
	}
	if keys := inf.GetStore().ListKeys(); len(keys) != 1 {
		t.Errorf("store keys = %v, want only default/fresh", keys)
	}
}
