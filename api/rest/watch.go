package rest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/store"
)

// WatchEvent is one event of a watch stream.
type WatchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// watch streams ADDED, MODIFIED and DELETED events as newline-separated
// JSON, the Kubernetes watch protocol. Without a resourceVersion (or with
// "0") it first sends the current objects as ADDED; with one it resumes
// after it, and a position already pruned gets 410 Gone.
func (s *Server) watch(w http.ResponseWriter, r *http.Request, req request) error {
	o, err := parseListOptions(r, req.res)
	if err != nil {
		return err
	}
	o.limit, o.after = 0, nil
	if req.res.hubKind == "typeinstances" {
		if err := s.resolveSelectedID(r, &o); err != nil {
			return err
		}
	}
	q := query(r)
	if q.Has("sendInitialEvents") {
		// Refused as by a Kubernetes API server without the WatchList
		// feature: client-go's reflector then lists and watches instead.
		const msg = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
		st := newStatus(http.StatusUnprocessableEntity, "Invalid", `ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: `+msg)
		st.Details = &StatusDetails{Group: "meta.k8s.io", Kind: "ListOptions", Causes: []StatusCause{{Type: "FieldValueForbidden", Message: "Forbidden: " + msg, Field: "sendInitialEvents"}}}
		return errStatus{st}
	}
	start, err := parseSeq(q.Get("resourceVersion"))
	if err != nil {
		return err
	}
	tr, cols, values, err := s.listShape(r, req, o)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	go func(done <-chan struct{}) { // not ctx: it is reassigned below
		select {
		case <-s.stopping:
			stop()
		case <-done:
		}
	}(ctx.Done())
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return errStatus{badRequest("timeoutSeconds %q must be a non-negative integer", t)}
		}
		if n > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
			defer cancel()
		}
	}

	var initial []cairn.Instance
	listed := start == 0 // then every instance not listed did not match
	if start == 0 {
		if start, err = s.hub.LastSeq(ctx); err != nil {
			return err
		}
		var unread unreadable
		lo := hub.ListOptions{Values: values, Secrets: o.values, Unreadable: unread.collect(&tr)}
		if initial, _, err = s.hub.ListInstancesWith(ctx, o.filter(req), lo); err != nil {
			return listErr(err, req.res, tr)
		}
		if !values {
			withoutValues(initial)
		}
		unread.warn(w)
	} else if _, err := s.hub.Changes(ctx, start, 1); err != nil {
		if cairn.HasCode(err, cairn.CodeGone) {
			return errStatus{newStatus(http.StatusGone, "Expired", "too old resource version: "+strconv.FormatInt(start, 10))}
		}
		return err
	}

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	headers := true
	send := func(typ string, obj any) error {
		if cols != nil && typ != "ERROR" {
			// A Table of one row per event, as the API server sends to
			// kubectl get -w; the column definitions come with the first.
			t := tableOf(tr, cols, ListMeta{}, []any{obj})
			if !headers {
				t.ColumnDefinitions = nil
			}
			headers = false
			obj = t
		}
		if err := enc.Encode(WatchEvent{Type: typ, Object: obj}); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	if flusher != nil {
		flusher.Flush()
	}
	// sendInstance sends an event showing inst. Plain JSON events are
	// encoded once for every watch of the collection (s.events); secrets
	// are redacted (unless asked for) only when the line is encoded.
	sendInstance := func(typ string, inst cairn.Instance) error {
		render := func() (any, error) {
			if !o.values {
				one := []cairn.Instance{inst}
				if err := s.hub.RedactSecrets(ctx, one); err != nil {
					return nil, err
				}
				inst = one[0]
			}
			return req.res.render(inst), nil
		}
		if cols != nil || !values {
			// Tables, and objects without values, are not the lines kept
			// for every watch.
			obj, err := render()
			if err != nil {
				return err
			}
			return send(typ, obj)
		}
		line, err := s.events.line(req.res, typ, o.values, inst, render)
		if err != nil {
			return err
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}

	// matching remembers, per id, whether the object's last event showed it
	// matching the selectors, so an object that starts or stops matching
	// is reported ADDED or DELETED as Kubernetes does. An id not in it is
	// unknown to this stream (a resumed watch): its events keep their kind.
	selective := len(o.labels) > 0 || o.hasFields()
	matching := map[string]bool{}
	// A resumed watch with a label selector (kubectl get -w and client-go's
	// informers list, then watch from the list's resourceVersion) looks at
	// what matches now: labels are not versioned, but an object not changed
	// since start matched at start as it matches now. An object changed
	// up to settled (the look's position) has its first event here decided
	// without knowing how it was at start. (Field selectors name the
	// immutable name and namespace: what matches them always did.)
	var settled int64
	snapshot := len(o.labels) > 0 && !listed
	if snapshot {
		now, _, err := s.hub.ListInstancesWith(ctx, o.filter(req), hub.ListOptions{})
		if err != nil {
			return err
		}
		if settled, err = s.hub.LastSeq(ctx); err != nil {
			return err
		}
		for _, inst := range now {
			if o.matches(&inst) {
				matching[inst.ID] = true
			}
		}
	}
	for _, inst := range initial {
		if o.matches(&inst) {
			matching[inst.ID] = true
			if err := send("ADDED", req.res.render(inst)); err != nil {
				return nil
			}
		}
	}
	added := map[string]bool{} // ADDED changes passed over for a later change
	// passed: objects whose last change was passed over (gone or changed
	// again by the time it was read), so whether they matched is not
	// known; their deletion is always reported.
	passed := map[string]bool{}
	err = s.hub.Watch(ctx, start, func(c store.Change) error {
		if (req.res.typ != nil && c.TypeRef.Path != req.res.typ.Path) || (req.namespace != "" && c.Namespace != req.namespace) {
			return nil
		}
		was, known := matching[c.InstanceID]
		if snapshot && c.Seq <= settled {
			was, known = false, false
		}
		known = known || listed || snapshot && c.Seq > settled
		if c.Kind == store.Deleted {
			unsure := passed[c.InstanceID]
			delete(matching, c.InstanceID)
			delete(added, c.InstanceID)
			delete(passed, c.InstanceID)
			if selective && known && !was && !unsure || !o.matchesFields(c.InstanceID, c.Name, c.Namespace) {
				return nil
			}
			return send("DELETED", req.res.renderDeleted(c))
		}
		inst, err := s.hub.GetInstanceNotOlderThan(ctx, c.InstanceID, c.Seq, values)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			passed[c.InstanceID] = true
			return nil // deleted since; its DELETED change follows
		}
		if err != nil {
			return err
		}
		if !values {
			inst.Latest.Value = nil
		}
		if inst.Seq > c.Seq {
			// Changed again since: that later change reports the instance as
			// it is now, so resourceVersions only grow and none repeats.
			added[c.InstanceID] = added[c.InstanceID] || c.Kind == store.Added
			passed[c.InstanceID] = true
			return nil
		}
		delete(passed, c.InstanceID)
		if added[c.InstanceID] {
			delete(added, c.InstanceID)
			c.Kind = store.Added
		}
		match := o.labels.Matches(inst.Labels) && o.matches(&inst)
		matching[inst.ID] = match
		switch {
		case match && known && !was:
			return sendInstance("ADDED", inst)
		case match:
			return sendInstance(string(c.Kind), inst)
		case was || !known && len(o.labels) > 0 && o.matchesFields(inst.ID, inst.Name, inst.Namespace):
			// It stopped matching, or may have: a client holding it from
			// its list must drop it (a DELETED of an object it does not
			// hold is harmless to a cache).
			return sendInstance("DELETED", inst)
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		st := errorStatus(err, req.res.target(""))
		_ = send("ERROR", st)
	}
	return nil
}

// renderDeleted is the last known identity of a deleted instance.
func (r *resource) renderDeleted(c store.Change) any {
	if r.hubKind == "typeinstances" {
		// Its id, and the name and Type a table row shows (kubectl get
		// ti -w prints spec.name, which an id alone left empty).
		// No status: the change log keeps no resource version or lock.
		return struct {
			APIVersion string           `json:"apiVersion"`
			Kind       string           `json:"kind"`
			Metadata   ObjectMeta       `json:"metadata"`
			Spec       TypeInstanceSpec `json:"spec"`
		}{r.apiVersion(), r.kind,
			ObjectMeta{Name: c.InstanceID, UID: c.InstanceID, ResourceVersion: strconv.FormatInt(c.Seq, 10)},
			TypeInstanceSpec{TypeRef: c.TypeRef, Namespace: c.Namespace, Name: c.Name}}
	}
	o := Object{
		APIVersion: r.apiVersion(),
		Kind:       r.kind,
		Metadata: ObjectMeta{
			Name:            c.Name,
			Namespace:       c.Namespace,
			UID:             c.InstanceID,
			ResourceVersion: strconv.FormatInt(c.Seq, 10),
		},
	}
	return o
}

// render shows an instance as an object of r.
func (r *resource) render(inst cairn.Instance) any {
	if r.hubKind == "typeinstances" {
		return toTypeInstance(inst)
	}
	return toObject(r, inst)
}

const suffixChars = "bcdfghjklmnpqrstvwxz2456789"

// randomSuffix is what generateName appends, as Kubernetes does: five
// characters that cannot spell words.
func randomSuffix() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = suffixChars[int(b[i])%len(suffixChars)]
	}
	return string(b)
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
