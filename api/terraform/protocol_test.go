package terraform_test

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api/terraform"
	"github.com/cairn-dev/cairn/tfstate"
)

type call struct {
	method, path, body string
	header             map[string]string
	status             int
	// respBody, when set, must be in the response body.
	respBody string
}

func do(t *testing.T, base string, c call) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

const (
	st1     = `{"version":4,"terraform_version":"1.10.10","serial":1,"lineage":"L1","outputs":{"ip":{"value":"1.1.1.1","type":"string"}},"resources":[]}`
	st2     = `{"version":4,"terraform_version":"1.10.10","serial":2,"lineage":"L1","outputs":{},"resources":[]}`
	lockA   = `{"ID":"A","Operation":"OperationTypeApply","Who":"alice@host","Version":"1.10.10","Created":"2026-11-23T10:00:00Z","Path":"","Info":""}`
	lockB   = `{"ID":"B","Operation":"OperationTypePlan","Who":"bob@host"}`
	statesP = "/terraform/v1/namespaces/default/states/"
)

func md5of(s string) string {
	sum := md5.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// TestProtocol walks one state through the protocol, step by step, as the
// real backends answer.
func TestProtocol(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	p := statesP + "app"
	steps := []call{
		{method: "GET", path: p, status: 404},
		{method: "LOCK", path: p, body: lockA, status: 200},
		{method: "GET", path: p, status: 404}, // locked, still no state
		{method: "LOCK", path: p, body: lockB, status: 423, respBody: `"Who":"alice@host"`},
		{method: "POST", path: p + "?ID=B", body: st1, status: 423, respBody: `"ID":"A"`},
		{method: "POST", path: p, body: st1, status: 423},
		{method: "POST", path: p + "?ID=A", body: st1, header: map[string]string{"Content-MD5": md5of("other")}, status: 400, respBody: "Content-MD5"},
		{method: "POST", path: p + "?ID=A", body: st1, header: map[string]string{"Content-MD5": md5of(st1)}, status: 200},
		{method: "GET", path: p, status: 200, respBody: `"lineage":"L1"`},
		{method: "POST", path: p + "?ID=A", body: strings.Replace(st2, "L1", "L9", 1), status: 409, respBody: "lineage mismatch"},
		{method: "POST", path: p + "?ID=A", body: `{"version":4,"serial":0,"lineage":"L1"}`, status: 409, respBody: "serial 0 is older than the stored serial 1"},
		{method: "POST", path: p + "?ID=A", body: `not json`, status: 400, respBody: "not a valid state document"},
		{method: "UNLOCK", path: p, body: lockB, status: 423, respBody: `"ID":"A"`},
		{method: "UNLOCK", path: p, body: lockA, status: 200},
		{method: "UNLOCK", path: p, body: lockA, status: 200}, // unlocking an unlocked state
		{method: "POST", path: p, body: st2, status: 200},
		{method: "GET", path: p + "/history", status: 200, respBody: `"serial":2`},
		{method: "GET", path: p + "/diff?from=2&to=3", status: 200, respBody: `"outputsRemoved":["ip"]`},
		{method: "GET", path: p + "/diff?from=a&to=3", status: 400, respBody: "from and to"},
		// Never 404, which tofu takes for "no state yet": a mistyped
		// address would plan from an empty state.
		{method: "GET", path: p + "/other", status: 400, respBody: `"app/other" is not a state name`},
		{method: "LOCK", path: statesP + "env/app", status: 400, respBody: `"env/app" is not a state name: a state name is one path segment`},
		{method: "GET", path: statesP + "env/app/x", status: 400, respBody: `"env/app/x" is not a state name`},
		{method: "GET", path: statesP + "My_App", status: 400, respBody: `state name "My_App" must be a DNS subdomain`},
		{method: "GET", path: "/terraform/v1/namespaces/Team_A/states/app", status: 400, respBody: `namespace "Team_A" must be a DNS label`},
		{method: "PATCH", path: p, status: 405},
		{method: "LOCK", path: p, body: `{"Who":"x"}`, status: 400, respBody: "no ID"},
		{method: "GET", path: "/terraform/v1/states/app", status: 400, respBody: "namespaces/<namespace>/states/<name>"},
		{method: "DELETE", path: p, status: 200},
		{method: "GET", path: p, status: 404},
		{method: "GET", path: p + "/history", status: 404, respBody: `state "default/app" was not found`},
	}
	for i, c := range steps {
		code, body, _ := do(t, s.url, c)
		if code != c.status || !strings.Contains(body, c.respBody) {
			t.Fatalf("step %d: %s %s: %d %q; want %d with %q", i+1, c.method, c.path, code, body, c.status, c.respBody)
		}
		if code == 423 {
			var holder tfstate.LockInfo
			if err := json.Unmarshal([]byte(body), &holder); err != nil || holder.ID != "A" {
				t.Errorf("step %d: 423 body is not the holder's lock info: %q", i+1, body)
			}
		}
	}
	// The output instance of the first write was removed with the output.
	if _, err := s.hub.GetInstanceByName(ctxT(t), "cap.type.terraform.output", "default", "app-ip", false); err == nil {
		t.Error("output instance app-ip outlived its state")
	}
}

func TestGetAnswersContentMD5(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	if code, body, _ := do(t, s.url, call{method: "POST", path: statesP + "m", body: st1}); code != 200 {
		t.Fatalf("POST: %d %s", code, body)
	}
	code, body, h := do(t, s.url, call{method: "GET", path: statesP + "m"})
	if code != 200 || h.Get("Content-MD5") != md5of(body) || h.Get("Content-Type") != "application/json" {
		t.Errorf("GET: %d, Content-MD5 %q (body's %q), Content-Type %q", code, h.Get("Content-MD5"), md5of(body), h.Get("Content-Type"))
	}
}

// TestLockedAnswerReadsAsTofus: tofu decodes a 423's body into its
// statemgr.LockInfo, whose Created is a time.Time. A lock taken without
// Created (curl, as docs/terraform.md shows) was answered with "Created":"",
// which tofu could not decode ("failed to unmarshal body"), and it then
// showed its own lock ID as the holder's.
func TestLockedAnswerReadsAsTofus(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	p := statesP + "held"
	for i, c := range []call{
		{method: "LOCK", path: p, body: `{"ID":"x","Created":"yesterday"}`, status: 400, respBody: `Created "yesterday" is not a time`},
		{method: "LOCK", path: p, body: lockB, status: 200},
		{method: "LOCK", path: p, body: lockA, status: 423},
		{method: "UNLOCK", path: p, body: lockA, status: 423},
		// UNLOCK needs only the ID: what else it says is not kept.
		{method: "UNLOCK", path: p, body: `{"ID":"B","Created":"yesterday"}`, status: 200},
	} {
		code, body, _ := do(t, s.url, c)
		if code != c.status || !strings.Contains(body, c.respBody) {
			t.Fatalf("step %d: %s %s: %d %q; want %d with %q", i+1, c.method, c.path, code, body, c.status, c.respBody)
		}
		if code != 423 {
			continue
		}
		var holder struct {
			ID, Operation, Info, Who, Version, Path string
			Created                                 time.Time
		}
		if err := json.Unmarshal([]byte(body), &holder); err != nil || holder.ID != "B" || holder.Who != "bob@host" {
			t.Errorf("step %d: tofu reads the 423 body %q as %+v, %v; want B's lock info", i+1, body, holder, err)
		}
	}
}

// TestTooLargeStateSaysTheLimit: a state over the limit was answered
// "read the state: http: request body too large", naming neither the
// limit nor what to do.
func TestTooLargeStateSaysTheLimit(t *testing.T) {
	s := startServer(t, sqliteStore(t), nil)
	srv := httptest.NewServer(terraform.New(terraform.Config{Hub: s.hub, MaxStateBytes: 64}))
	t.Cleanup(srv.Close)
	code, body, _ := do(t, srv.URL, call{method: "POST", path: statesP + "big", body: st1})
	if want := `state "default/big" is larger than 64 bytes, the most this server takes`; code != 413 || !strings.Contains(body, want) {
		t.Errorf("POST of %d bytes: %d %q; want 413 with %q", len(st1), code, body, want)
	}
	if code, _, _ := do(t, srv.URL, call{method: "GET", path: statesP + "big"}); code != 404 {
		t.Errorf("GET after the refused POST: %d, want 404 (nothing written)", code)
	}
}
