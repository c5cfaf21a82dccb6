package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The hand-written encoding is json.Marshal's, byte for byte.
func TestAppendJSONIsMarshal(t *testing.T) {
	at := time.Date(2026, 11, 23, 16, 0, 0, 123456789, time.UTC)
	odd := "a\"b\\c<d>e&f\x00\x01\b\f\n\r\t\x1fg\u2028h\u2029i\xffj é 😀"
	full := NewEvent(LevelRequest, "id-1", at)
	full.RequestURI = "/apis/x?labelSelector=a%3Db&" + odd
	full.Verb = "create"
	full.User = UserInfo{Username: "jane" + odd, UID: "u1", Groups: []string{"g1", odd}}
	full.ImpersonatedUser = &UserInfo{Username: "bob"}
	full.SourceIPs = []string{"127.0.0.1", "::1"}
	full.UserAgent = odd
	full.ObjectRef = &ObjectRef{Resource: "flags", Namespace: "default", Name: odd, APIGroup: "flipt.io", APIVersion: "v1", Subresource: "status"}
	full.ResponseStatus = &Status{Code: 409, Status: "Failure", Reason: "Conflict", Message: odd}
	full.RequestObject = json.RawMessage(`{ "kind" : "Flag", "metadata": {"name":"a<b"} }`)
	full.StageTimestamp = at.Add(time.Millisecond)
	full.Annotations = map[string]string{"z": "1", "a": odd, "authorization.k8s.io/decision": "allow"}

	sparse := NewEvent(LevelMetadata, "id-2", at.Truncate(time.Second))
	sparse.ObjectRef = &ObjectRef{Name: "only-name"}
	sparse.ResponseStatus = &Status{Code: 200}

	for name, ev := range map[string]*Event{"full": full, "sparse": sparse, "empty": {}} {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func BenchmarkEncodeEvent(b *testing.B) {
	ev := NewEvent(LevelMetadata, "0f8fad5b-d9cb-469f-a165-70867728950e", time.Now())
	ev.RequestURI, ev.Verb = "/apis/flipt.io/v1alpha1/namespaces/default/flags/f042", "get"
	ev.User = UserInfo{Username: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	ev.SourceIPs, ev.UserAgent = []string{"127.0.0.1"}, "wrk"
	ev.ObjectRef = &ObjectRef{Resource: "flags", Namespace: "default", Name: "f042", APIGroup: "flipt.io", APIVersion: "v1alpha1"}
	ev.ResponseStatus = &Status{Code: 200}
	ev.StageTimestamp = time.Now()
	ev.Annotations = map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": "RBAC: allowed by ClusterRoleBinding"}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = ev.appendJSON(buf[:0])
		}
	})
}
