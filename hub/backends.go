package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/auth/rbac"
	"github.com/cairn-dev/cairn/schema"
	"github.com/cairn-dev/cairn/store"
)

// resolvedBackend is a storage backend instance with its client.
type resolvedBackend struct {
	cairn.StorageBackend
	client        cairn.Backend
	contextSchema *schema.Schema // nil when the backend takes no context
}

// backendSet resolves each backend id once per operation, as of one
// change-log position: the one the operation's consistent read reached,
// or the store's when the operation made none.
type backendSet struct {
	h    *Hub
	at   int64 // 0 until known
	byID map[string]*resolvedBackend
}

func (h *Hub) newBackendSet() *backendSet {
	return &backendSet{h: h, byID: map[string]*resolvedBackend{}}
}

// newBackendSetAt is newBackendSet for an operation that read consistently
// at change-log position at (the cache synced to at least the store's
// position when the operation began): resolving needs no position read.
func (h *Hub) newBackendSetAt(at int64) *backendSet {
	return &backendSet{h: h, at: at, byID: map[string]*resolvedBackend{}}
}

// get resolves a backend id: the instance must exist and its latest value
// must satisfy the storage schema.
func (s *backendSet) get(ctx context.Context, id string) (*resolvedBackend, error) {
	if b, ok := s.byID[id]; ok {
		return b, nil
	}
	if s.at == 0 {
		at, err := s.h.LastSeq(ctx)
		if err != nil {
			return nil, fmt.Errorf("resolve backend %q: %w", id, err)
		}
		s.at = at
	}
	b, err := s.h.resolveBackend(ctx, id, s.at, true)
	if err != nil {
		return nil, err
	}
	s.byID[id] = b
	return b, nil
}

func resolveErr(id string, code cairn.Code, causes []cairn.Cause, msg string) *cairn.Error {
	e := &cairn.Error{
		Code:   code,
		Msg:    fmt.Sprintf("failed to resolve the TypeInstance's backend %q: %s", id, msg),
		IDs:    []string{id},
		Causes: causes,
	}
	if code == cairn.CodeInvalid {
		// The backend's own value makes it unusable: found before any
		// backend call, like an input refusal.
		e.Err = cairn.ErrBackendRefused
	}
	return e
}

// resolveBackend returns a backend instance, checked, as it was at
// change-log position at or later (0: the store's position now); with
// connect it also opens the backend's client.
func (h *Hub) resolveBackend(ctx context.Context, id string, at int64, connect bool) (*resolvedBackend, error) {
	if at == 0 {
		var err error
		if at, err = h.LastSeq(ctx); err != nil {
			return nil, fmt.Errorf("resolve backend %q: %w", id, err)
		}
	}
	b, err := h.kept.get(ctx, h, id, at)
	if err != nil {
		return nil, err
	}
	sb := b.StorageBackend
	if sb.Abstract {
		b.client = h.builtin
		return b, nil
	}
	if c := h.inProcessBackend(sb); c != nil {
		b.client = c
		return b, nil
	}
	if !connect {
		return b, nil
	}
	if h.opener == nil {
		// The url is the backend's: withheld as its own words are.
		return nil, h.withheld(ctx, &cairn.Error{Code: cairn.CodeUnavailable, IDs: []string{id},
			Msg: fmt.Sprintf("External backend %q: no client is configured for url %q", id, sb.URL)}, id, "connect")
	}
	client, err := h.opener.OpenBackend(ctx, sb)
	if err != nil {
		// The backend's rules are known without reaching it: the caller
		// checks them first and refuses bad input in their words, as
		// Capact's Local Hub does (it dials on the first call); the first
		// call then reports why the backend was not reached.
		b.client = unreachable{externalErr(id, "connect", err)}
		return b, nil
	}
	b.client = client
	return b, nil
}

// unreachable is the client of a backend that could not be opened: every
// call fails with the reason.
type unreachable struct{ err error }

func (u unreachable) GetPreCreateValue(context.Context, cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return nil, u.err
}
func (u unreachable) OnCreate(context.Context, cairn.OnCreateRequest) (json.RawMessage, error) {
	return nil, u.err
}
func (u unreachable) OnUpdate(context.Context, cairn.OnUpdateRequest) (json.RawMessage, error) {
	return nil, u.err
}
func (u unreachable) OnDelete(context.Context, cairn.OnDeleteRequest) error { return u.err }
func (u unreachable) OnDeleteRevision(context.Context, cairn.OnDeleteRevisionRequest) error {
	return u.err
}
func (u unreachable) GetValue(context.Context, cairn.GetValueRequest) (json.RawMessage, error) {
	return nil, u.err
}
func (u unreachable) GetLockedBy(context.Context, cairn.GetLockedByRequest) (string, error) {
	return "", u.err
}
func (u unreachable) OnLock(context.Context, cairn.OnLockRequest) error     { return u.err }
func (u unreachable) OnUnlock(context.Context, cairn.OnUnlockRequest) error { return u.err }

// readBackend reads a backend instance from the store and checks it; what
// is decoded is kept by resource version (h.backends).
func (h *Hub) readBackend(ctx context.Context, id string) (*resolvedBackend, error) {
	found, err := h.st.GetInstancesBrief(ctx, []string{id})
	if err != nil {
		return nil, fmt.Errorf("resolve backend %q: %w", id, err)
	}
	if len(found) == 0 {
		return nil, resolveErr(id, cairn.CodeNotFound, nil, fmt.Sprintf("TypeInstance %q was not found", id))
	}
	inst := found[0]
	b, err := h.backends.decoded(inst.ID, inst.Latest.ResourceVersion, func() (*resolvedBackend, error) {
		return h.decodeBackend(ctx, inst)
	})
	if err != nil {
		return nil, err
	}
	b.Alias = inst.Alias
	b.TypeRef = inst.TypeRef
	return b, nil
}

// keptBackends keeps the backend instances resolved lately so that an
// operation resolves a backend without reading it from the store. Every
// kept backend is current as of change-log position scanned: the changes
// up to it were read (from the read cache's kept changes when it has them,
// else from the store's change log, change rows only) and each dropped the
// backend it names. An operation resolves as of a position at it knows
// the store had reached when it began; when at is past scanned, the
// changes in between are read first. So an update or delete of a backend,
// through this hub or any other on the store, committed before the
// operation began, is seen by it: the change is at or before at, and
// scanning past it dropped the kept backend.
//
// Nothing here reads the read cache's instances or syncs it: resolving
// inside a write (between its backend calls and its transaction, or in
// it) reads only committed change rows and, on a miss, the backend's row,
// both through the store and not the transaction, as before the cache.
type keptBackends struct {
	mu      sync.Mutex
	scanned int64
	m       map[string]*resolvedBackend
	// policy is the compiled policy (nil: none applied) when policyKnown,
	// kept the same way: a change of the policy instance drops it.
	policy      *compiledPolicy
	policyKnown bool
	// policySeen is the position of the last change of the policy
	// instance a scan passed, goneAt where a scan last skipped changes
	// unread: a policy read current as of position p stays current as of
	// scanned when neither is past p.
	policySeen, goneAt int64
	// own names the instance of changes this hub's writes committed, by
	// change number (committed): a scan passes those next in the log
	// without reading it. Entries at or before scanned are spent.
	own map[int64]string
}

// maxKeptBackends bounds keptBackends; when full it starts again.
const maxKeptBackends = 1024

// scanBatch is how many changes a scan reads at once; past maxScan
// changes, the kept backends are forgotten rather than scanned (reading
// each again costs less).
const (
	scanBatch = 500
	maxScan   = 4 * scanBatch
)

// get returns a copy of backend id as of position at or later; the
// caller sets its client. No lock is held while the store is read, so a
// resolution waiting for a store connection never holds up another.
func (k *keptBackends) get(ctx context.Context, h *Hub, id string, at int64) (*resolvedBackend, error) {
	if err := k.advance(ctx, h, at); err != nil {
		return nil, fmt.Errorf("resolve backend %q: %w", id, err)
	}
	if b, ok := k.m[id]; ok {
		k.mu.Unlock()
		c := *b
		return &c, nil
	}
	from := k.scanned
	k.mu.Unlock()

	// The read began after position from was visible, so it is current
	// as of from; kept only when no scan moved on meanwhile (one may have
	// passed over a change of id that the read predates).
	b, err := h.readBackend(ctx, id)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.scanned == from {
		if k.m == nil || len(k.m) >= maxKeptBackends {
			k.m = map[string]*resolvedBackend{}
		}
		k.m[id] = b
	}
	k.mu.Unlock()
	c := *b
	return &c, nil
}

// committed notes changes this hub's write committed: for each instance
// its Seq is the number of a change of it, the only change the write
// logged of it, and the write logged no others. Nothing else may be
// passed: a scan takes the entry for the change at that number.
func (k *keptBackends) committed(insts []cairn.Instance) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, inst := range insts {
		if inst.Seq <= k.scanned {
			continue
		}
		if len(k.own) >= maxKeptBackends {
			for seq := range k.own {
				if seq <= k.scanned {
					delete(k.own, seq)
				}
			}
			if len(k.own) >= maxKeptBackends {
				return // the scans read the log for the rest
			}
		}
		if k.own == nil {
			k.own = map[int64]string{}
		}
		k.own[inst.Seq] = inst.ID
	}
}

// passOwn passes the changes next in the log that this hub's writes
// committed (committed). k.mu is held.
func (k *keptBackends) passOwn() {
	for {
		id, ok := k.own[k.scanned+1]
		if !ok {
			return
		}
		delete(k.own, k.scanned+1)
		k.scanned++
		k.pass(k.scanned, id)
	}
}

// pass drops what a change of instance id at position seq makes stale.
// k.mu is held.
func (k *keptBackends) pass(seq int64, id string) {
	delete(k.m, id)
	if id == PolicyID {
		k.policy, k.policyKnown = nil, false
		k.policySeen = max(k.policySeen, seq)
	}
}

// advance scans the change log up to position at, dropping what each
// change makes stale, and returns with k.mu held; on an error, without.
func (k *keptBackends) advance(ctx context.Context, h *Hub, at int64) error {
	k.mu.Lock()
	for at > k.scanned {
		if k.passOwn(); at <= k.scanned {
			break
		}
		if len(k.m) == 0 && !k.policyKnown {
			k.scanned = at // nothing kept that a change could make stale
			k.goneAt = at  // but a policy being read may be: not read
			break
		}
		from := k.scanned
		k.mu.Unlock()
		cs, through, gone, err := h.changesAfter(ctx, from, at)
		if err != nil {
			return err
		}
		k.mu.Lock()
		if k.scanned != from {
			continue // another resolution moved on meanwhile: see where to
		}
		if gone {
			// Pruned past what was scanned, or too far behind to be worth
			// reading: forget everything kept, each read again once.
			k.m = nil
			k.policy, k.policyKnown = nil, false
			k.goneAt = through
		}
		for _, c := range cs {
			k.pass(c.Seq, c.InstanceID)
		}
		k.scanned = through
	}
	return nil
}

// policyAt returns the compiled policy (nil when none was applied) as of
// change-log position at or later (0: the store's position now), kept as
// the backends are: the policy instance's changes drop it.
func (h *Hub) policyAt(ctx context.Context, at int64) (*compiledPolicy, error) {
	if at == 0 {
		var err error
		if at, err = h.LastSeq(ctx); err != nil {
			return nil, fmt.Errorf("read the policy: %w", err)
		}
	}
	k := &h.kept
	if err := k.advance(ctx, h, at); err != nil {
		return nil, fmt.Errorf("read the policy: %w", err)
	}
	if k.policyKnown {
		cp := k.policy
		k.mu.Unlock()
		return cp, nil
	}
	from := k.scanned
	k.mu.Unlock()
	// As for a backend: the read began after from was visible, so it is
	// current as of from; kept when the scans since (under write load there
	// are always some) passed no change of the policy and skipped nothing.
	cp, err := h.currentPolicy(ctx)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.scanned >= from && k.policySeen <= from && k.goneAt <= from {
		k.policy, k.policyKnown = cp, true
	}
	k.mu.Unlock()
	return cp, nil
}

// changesAfter reads changes after position from, to position to at
// least, and returns them with the position they reach: from the read
// cache's kept changes as far as it has applied them (no store read),
// then from the store's change log (change rows only). gone says that
// they cannot be had, through being to: the log was pruned past from, or
// more than maxScan changes would be read.
func (h *Hub) changesAfter(ctx context.Context, from, to int64) (cs []store.Change, through int64, gone bool, err error) {
	if to-from > maxScan {
		return nil, to, true, nil
	}
	through = from
	for through < to {
		if h.cache != nil {
			if kept, t, ok := h.cache.Kept(through, scanBatch); ok && t > through {
				cs, through = append(cs, kept...), t
				continue
			}
		}
		more, err := h.st.Changes(ctx, through, scanBatch)
		if cairn.HasCode(err, cairn.CodeGone) {
			return nil, to, true, nil
		}
		if err != nil {
			return nil, 0, false, fmt.Errorf("read the change log after %d: %w", through, err)
		}
		if len(more) == 0 {
			// Nothing after through, read after to was: to is a pruned
			// point with nothing after it.
			return cs, to, false, nil
		}
		cs, through = append(cs, more...), more[len(more)-1].Seq
	}
	return cs, through, false, nil
}

// decodeBackend reads a backend instance's value and checks it against the
// storage schema; the result depends on the resource version alone.
func (h *Hub) decodeBackend(ctx context.Context, inst cairn.Instance) (*resolvedBackend, error) {
	id := inst.ID
	raw := inst.Latest.Value
	if raw == nil || !inst.Backend.Abstract {
		var err error
		if raw, err = h.readValue(ctx, nil, inst, inst.Latest); err != nil {
			return nil, fmt.Errorf("resolve backend %q: read its value: %w", id, err)
		}
	}
	builtinID := inst.ID == cairn.BuiltinBackendID
	sb, causes := decodeStorageValue(raw, !builtinID)
	if len(causes) > 0 {
		if builtinID {
			// Not reachable unless the store was edited by hand; say so.
			return nil, resolveErr(id, cairn.CodeInternal, causes, joinCauses(causes))
		}
		return nil, resolveErr(id, cairn.CodeInvalid, causes, joinCauses(causes))
	}
	sb.ID = inst.ID
	sb.ResourceVersion = inst.Latest.ResourceVersion
	sb.Value = raw
	sb.Abstract = builtinID
	b := &resolvedBackend{StorageBackend: sb}
	if sb.ContextSchema != nil {
		key := fmt.Sprintf("backend:%s:%d", sb.ID, sb.ResourceVersion)
		// Context schemas are Capact's idea and Capact compiles them with
		// AJV, whose default is draft-07: one without "$schema" is draft-07.
		cs, err := h.schemas.GetDraft(key, sb.ContextSchema, schema.Draft07)
		if err != nil {
			causes := []cairn.Cause{{Field: "spec/value/contextSchema", Message: "must be a valid JSON Schema: " + err.Error()}}
			return nil, resolveErr(id, cairn.CodeInvalid, causes, joinCauses(causes))
		}
		b.contextSchema = cs
	}
	return b, nil
}

// decodedBackends keeps decoded backends by instance id and resource
// version: a resource version's value never changes, so neither does what
// is decoded from it. Bounded: when full it starts again.
type decodedBackends struct {
	mu sync.Mutex
	m  map[decodedKey]*resolvedBackend
}

type decodedKey struct {
	id string
	rv int
}

const maxDecodedBackends = 1024

// decoded returns a copy of the decoded backend (id, rv), decoding it with
// decode on a miss; failures are not kept.
func (d *decodedBackends) decoded(id string, rv int, decode func() (*resolvedBackend, error)) (*resolvedBackend, error) {
	key := decodedKey{id, rv}
	d.mu.Lock()
	b, ok := d.m[key]
	d.mu.Unlock()
	if !ok {
		var err error
		if b, err = decode(); err != nil {
			return nil, err
		}
		d.mu.Lock()
		if d.m == nil || len(d.m) >= maxDecodedBackends {
			d.m = map[decodedKey]*resolvedBackend{}
		}
		d.m[key] = b
		d.mu.Unlock()
	}
	c := *b // the caller sets its client, alias and Type
	return &c, nil
}

// decodeStorageValue checks a backend instance's value against the storage
// schema {url: string, acceptValue: boolean, contextSchema?: object|null, or
// a string holding the object's JSON} and
// reports every failing property in the form clients match.
// The built-in backend has no url (the hub is its own storage), so requireURL
// is false for it alone.
func decodeStorageValue(raw json.RawMessage, requireURL bool) (cairn.StorageBackend, []cairn.Cause) {
	var sb cairn.StorageBackend
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return sb, []cairn.Cause{{Field: "spec/value", Message: "must be object"}}
	}
	var causes []cairn.Cause
	// In the storage schema's declared order (url, acceptValue), as AJV
	// reports them. contextSchema is optional: absent, like null, means the
	// backend takes no context.
	for _, p := range []string{"url", "acceptValue"} {
		if _, ok := m[p]; !ok && (p != "url" || requireURL) {
			causes = append(causes, cairn.Cause{Field: "spec/value", Message: fmt.Sprintf("must have required property '%s'", p)})
		}
	}
	if v, ok := m["url"]; ok {
		if err := json.Unmarshal(v, &sb.URL); err != nil || isNull(v) {
			causes = append(causes, cairn.Cause{Field: "spec/value/url", Message: "must be string"})
		}
	}
	if v, ok := m["acceptValue"]; ok {
		if err := json.Unmarshal(v, &sb.AcceptValue); err != nil || isNull(v) {
			causes = append(causes, cairn.Cause{Field: "spec/value/acceptValue", Message: "must be boolean"})
		}
	}
	if v, ok := m["contextSchema"]; ok && !isNull(v) {
		// Capact's Local Hub keeps the schema as a string holding its JSON
		// (its storage schema declares a string, and Capact's backends are
		// registered so); cairn's own registrations give the object. Both
		// mean the same schema.
		var text string
		if json.Unmarshal(v, &text) == nil && json.Valid([]byte(text)) {
			v = json.RawMessage(text)
		}
		if !isObject(v) {
			causes = append(causes, cairn.Cause{Field: "spec/value/contextSchema", Message: "must be object"})
		} else {
			sb.ContextSchema = v
		}
	}
	return sb, causes
}

// checkStorageValue refuses a value that breaks the storage schema for an
// instance marked as a storage backend (the storage attribute), so a
// backend cannot be created or updated into a state that makes every
// instance stored in it unusable.
func checkStorageValue(subject string, attrs []cairn.AttributeRef, value json.RawMessage) error {
	marked := false
	for _, a := range attrs {
		marked = marked || a.Path == cairn.StorageAttributePath
	}
	if !marked || value == nil {
		return nil
	}
	if _, causes := decodeStorageValue(value, true); len(causes) > 0 {
		return &cairn.Error{Code: cairn.CodeInvalid, Subject: subject, Causes: causes,
			Msg: "a storage backend's value must satisfy the storage schema: " + joinCauses(causes)}
	}
	return nil
}

// isStorage reports whether attrs mark a storage backend.
func isStorage(attrs []cairn.AttributeRef) bool {
	return slices.ContainsFunc(attrs, func(a cairn.AttributeRef) bool { return a.Path == cairn.StorageAttributePath })
}

// mayWriteBackend refuses a write that registers, changes or unmarks a
// storage backend unless the caller of ctx may verb backends (named id, ""
// for a new one) at the cluster scope, as REST serves them. A backend's url
// is where the hub connects, for every instance stored in it, from the
// hub's network: creating typeinstances in one namespace must not let an
// editor of that namespace point the hub at any address it reaches.
// In-process callers are allowed.
func (h *Hub) mayWriteBackend(ctx context.Context, verb, subject, id string) error {
	u, ok := cairn.UserFrom(ctx)
	if !ok {
		return nil
	}
	if h.Authorize(ctx, rbac.Attributes{Verb: verb, ResourceRequest: true, APIGroup: rbac.HubGroup, Resource: "backends", Name: id}).Allowed {
		return nil
	}
	qual := "backends." + rbac.HubGroup
	if id != "" {
		qual += fmt.Sprintf(" %q", id)
	}
	return &cairn.Error{Code: cairn.CodeForbidden, Subject: subject, Msg: fmt.Sprintf(
		"%s is forbidden: User %q cannot %s resource \"backends\" in API group %q at the cluster scope: a TypeInstance with the attribute %s is a storage backend the hub connects to, and registering or changing one is a cluster-wide act",
		qual, u.Name, verb, rbac.HubGroup, cairn.StorageAttributePath)}
}

// checkBackendConfig asks the backend opener whether a storage backend
// instance's value holds settings the backend can work with (see
// BackendConfigChecker). Only instances marked as storage backends are
// checked, after checkStorageValue.
func (h *Hub) checkBackendConfig(ctx context.Context, subject string, ref cairn.TypeRef, attrs []cairn.AttributeRef, value json.RawMessage) error {
	c, ok := h.opener.(BackendConfigChecker)
	if !ok || value == nil || !slices.ContainsFunc(attrs, func(a cairn.AttributeRef) bool { return a.Path == cairn.StorageAttributePath }) {
		return nil
	}
	if err := c.CheckBackendConfig(ctx, cairn.StorageBackend{TypeRef: ref, Value: value}); err != nil {
		return withSubject(err, subject)
	}
	return nil
}

func joinCauses(causes []cairn.Cause) string {
	s := make([]string, len(causes))
	for i, c := range causes {
		s[i] = c.String()
	}
	return strings.Join(s, ", ")
}

func isNull(v json.RawMessage) bool { return strings.TrimSpace(string(v)) == "null" }

func isObject(v json.RawMessage) bool {
	t := strings.TrimSpace(string(v))
	return strings.HasPrefix(t, "{")
}

// externalErr names the backend in an error from its client, keeping the
// client's code (not found, locked, ...) and defaulting to Unavailable; as
// every caller sees it (Hub.externalErr words it for the caller).
func externalErr(id, op string, err error) *cairn.Error {
	code := cairn.ErrorCode(err)
	if code == cairn.CodeInternal {
		code = cairn.CodeUnavailable
	}
	msg := fmt.Sprintf("External backend %q: %s: %v", id, op, err)
	if strings.HasPrefix(err.Error(), fmt.Sprintf("External backend %q: ", id)) {
		// The client already names the backend, the operation and the
		// instance (the gRPC adapter does): say it once.
		msg = err.Error()
	}
	return &cairn.Error{
		Code: code,
		IDs:  []string{id},
		// Every backend bounds what a remote service wrote; this bounds
		// what a backend itself might not (a WASM controller, an SDK one
		// in-process), the hub's words around it included.
		Msg: cairn.BoundText(msg, 2*cairn.MaxErrorText),
		Err: err,
	}
}

// readValue returns the value of one resource version of inst from its
// backend. bs may be nil.
func (h *Hub) readValue(ctx context.Context, bs *backendSet, inst cairn.Instance, rv cairn.ResourceVersion) (json.RawMessage, error) {
	if inst.Backend.Abstract {
		v, err := h.st.Value(ctx, inst.ID, rv.ResourceVersion)
		if err != nil {
			return nil, fmt.Errorf("read value of %q version %d: %w", inst.ID, rv.ResourceVersion, err)
		}
		return v, nil
	}
	if bs == nil {
		bs = h.newBackendSet()
	}
	b, err := bs.get(ctx, inst.Backend.ID)
	if err != nil {
		return nil, err
	}
	v, err := b.client.GetValue(ctx, cairn.GetValueRequest{InstanceID: inst.ID, ResourceVersion: rv.ResourceVersion, Context: rv.Context})
	if err != nil {
		e := h.externalErr(ctx, b.ID, fmt.Sprintf("get value of %q version %d", inst.ID, rv.ResourceVersion), err)
		if e.Code == cairn.CodeInvalid {
			// A backend that cannot produce a stored value (a projection
			// whose template no longer renders with its sources' values)
			// is no fault of the reader's request: the server cannot
			// produce the object, as the API server answers for a stored
			// object it cannot decode (500, not 422).
			e.Code = cairn.CodeInternal
		}
		return nil, e
	}
	if err := h.checkReadBack(ctx, b.ID, inst, rv.ResourceVersion, v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkInput applies the backend rules to a value and a context given for a
// new instance (seed 000 "Workflow syntax - Create"): a value only when the
// backend accepts values, a context only when it has a context schema, and
// the context valid against that schema. An absent context is checked as {}
// so a backend with required context properties says which are missing.
func (b *resolvedBackend) checkInput(value, ctxDoc json.RawMessage) error {
	if value != nil {
		if err := b.checkValueAllowed(); err != nil {
			return err
		}
	}
	if ctxDoc != nil && !isNull(ctxDoc) {
		return b.checkContext(ctxDoc)
	}
	if b.contextSchema == nil {
		return nil
	}
	return b.validateContext(json.RawMessage(`{}`))
}

func (b *resolvedBackend) checkValueAllowed() error {
	if b.AcceptValue {
		return nil
	}
	return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{b.ID}, Err: cairn.ErrBackendRefused,
		Msg: fmt.Sprintf("External backend %q: input value not allowed", b.ID)}
}

// checkContext checks a context the caller gave.
func (b *resolvedBackend) checkContext(ctxDoc json.RawMessage) error {
	if b.contextSchema == nil {
		if isNull(ctxDoc) {
			return nil
		}
		return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{b.ID}, Err: cairn.ErrBackendRefused,
			Msg: fmt.Sprintf("External backend %q: input context not allowed", b.ID)}
	}
	return b.validateContext(ctxDoc)
}

func (b *resolvedBackend) validateContext(doc json.RawMessage) error {
	if causes := b.contextSchema.Validate("context", doc); len(causes) > 0 {
		return &cairn.Error{Code: cairn.CodeInvalid, IDs: []string{b.ID}, Causes: causes, Err: cairn.ErrBackendRefused,
			Msg: fmt.Sprintf("External backend %q: invalid input: %s", b.ID, joinCauses(causes))}
	}
	return nil
}

// withResourceMeta returns ctx carrying inst's identity (cairn.ResourceMeta)
// when b's client names what it stores after the instance; ctx unchanged
// otherwise. A Type that cannot be read leaves the REST names empty: the
// backend then says what it misses.
func (h *Hub) withResourceMeta(ctx context.Context, b *resolvedBackend, inst cairn.Instance) context.Context {
	n, ok := b.client.(cairn.ResourceNamer)
	if !ok || !n.NamesResources() {
		return ctx
	}
	m := cairn.ResourceMeta{TypeRef: inst.TypeRef, Namespace: inst.Namespace, Name: inst.Name, Labels: inst.Labels}
	if t, err := h.st.GetType(ctx, inst.TypeRef); err == nil && t.Names != nil {
		m.Group, m.Version, m.Kind = t.Group, t.Version, t.Names.Kind
	}
	return cairn.WithResourceMeta(ctx, m)
}
