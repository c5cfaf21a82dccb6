package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn"
)

func watchTestInstance() cairn.Instance {
	return cairn.Instance{ID: "id-1", Name: "f1", Namespace: "default", Seq: 7, Backend: cairn.BackendRef{ID: cairn.BuiltinBackendID, Abstract: true},
		Labels: map[string]string{"a": "<b>"}, Latest: cairn.ResourceVersion{ResourceVersion: 1, Value: json.RawMessage(`{"enabled":true, "description":"flag number 1"}`)}}
}

// TestWatchEventLine: a kept line is what json.Encoder writes for the
// event, and it is reused only for the same resource, event type, secrets
// setting, change number and users; an external backend's object, or a
// failed render, is never kept.
func TestWatchEventLine(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	var c watchEvents
	renders := 0
	line := func(r *resource, typ string, secrets bool, inst cairn.Instance) []byte {
		t.Helper()
		b, err := c.line(r, typ, secrets, inst, func() (any, error) { renders++; return toObject(r, inst), nil })
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(WatchEvent{Type: typ, Object: toObject(r, inst)}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("line\n%s\nwant\n%s", b, want.Bytes())
		}
		return b
	}
	inst := watchTestInstance()
	line(res, "MODIFIED", false, inst)
	line(res, "MODIFIED", false, inst)
	if renders != 1 {
		t.Fatalf("%d renders for one event to two watchers, want 1", renders)
	}
	changed := inst
	changed.UsedBy = []string{"user-1"}
	line(res, "MODIFIED", false, changed)
	changed.Seq = 8
	line(res, "MODIFIED", false, changed)
	line(res, "DELETED", false, changed)
	line(res, "DELETED", true, changed)
	line(&resource{group: "flipt.io", version: "v1", kind: "Flag"}, "DELETED", true, changed)
	if renders != 6 {
		t.Fatalf("%d renders, want 6 (each change of what the line shows renders again)", renders)
	}
	external := changed
	external.Backend.Abstract = false
	line(res, "MODIFIED", false, external)
	line(res, "MODIFIED", false, external)
	if renders != 8 {
		t.Fatalf("an external backend's object was reused (%d renders, want 8)", renders)
	}
	failed := errors.New("redaction failed")
	later := changed
	later.Seq = 9
	if _, err := c.line(res, "MODIFIED", false, later, func() (any, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Fatalf("a failed render gave %v", err)
	}
	if b := line(res, "MODIFIED", false, later); strings.Contains(string(b), "null") {
		t.Fatalf("a failed render was kept: %s", b)
	}
}

// BenchmarkWatchFanout100: one event to 100 watchers, each encoding it as
// before (each), against one encoding shared through watchEvents (shared):
// compare the two in one run.
func BenchmarkWatchFanout100(b *testing.B) {
	res := &resource{group: "flipt.io", version: "v1alpha1", kind: "Flag"}
	inst := watchTestInstance()
	var sink bytes.Buffer
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			inst.Seq = int64(i)
			for range 100 {
				sink.Reset()
				if err := json.NewEncoder(&sink).Encode(WatchEvent{Type: "MODIFIED", Object: toObject(res, inst)}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		var c watchEvents
		for i := 0; b.Loop(); i++ {
			inst.Seq = int64(i)
			for range 100 {
				sink.Reset()
				line, err := c.line(res, "MODIFIED", false, inst, func() (any, error) { return toObject(res, inst), nil })
				if err != nil {
					b.Fatal(err)
				}
				sink.Write(line)
			}
		}
	})
}
