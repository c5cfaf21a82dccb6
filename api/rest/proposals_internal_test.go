package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cairn-dev/cairn"
)

func TestWriteAnswersProposals(t *testing.T) {
	res := &resource{group: "flipt.io", version: "v1", kind: "Flag", plural: "flags"}
	proposed := cairn.Instance{ID: "i1", Name: "a", Namespace: "default"}
	proposed.Latest.ResourceVersion = 2
	proposed.Latest.Value = json.RawMessage(`{"enabled":true}`)
	proposed.Latest.Context = json.RawMessage(`{"commit":"abc","proposal":{"id":"0a1b2c","provider":"github","url":"https://github.example/acme/flags/pull/3","number":3,"branch":"cairn/proposal/0a1b2c"}}`)
	plain := proposed
	plain.Latest.Context = json.RawMessage(`{"commit":"abc"}`)

	for _, tt := range []struct {
		name     string
		inst     cairn.Instance
		wrote    bool
		want     int
		proposal bool
	}{
		{"proposed", proposed, true, http.StatusAccepted, true},
		{"no-op on a proposed version", proposed, false, http.StatusOK, false},
		{"committed", plain, true, http.StatusOK, false},
	} {
		rec := httptest.NewRecorder()
		writeWrite(rec, http.StatusOK, res, tt.inst, tt.wrote)
		if rec.Code != tt.want {
			t.Errorf("%s: code %d, want %d", tt.name, rec.Code, tt.want)
		}
		var body struct {
			Kind     string          `json:"kind"`
			Spec     json.RawMessage `json:"spec"`
			Proposal *Proposal       `json:"proposal"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v: %s", tt.name, err, rec.Body)
		}
		if body.Kind != "Flag" || string(body.Spec) != `{"enabled":true}` {
			t.Errorf("%s: body %s: want the object", tt.name, rec.Body)
		}
		if got := body.Proposal != nil; got != tt.proposal {
			t.Errorf("%s: proposal in the answer = %v, want %v", tt.name, got, tt.proposal)
		}
		if tt.proposal && (body.Proposal.ID != "0a1b2c" || body.Proposal.Provider != "github" || body.Proposal.URL != "https://github.example/acme/flags/pull/3") {
			t.Errorf("%s: proposal = %+v", tt.name, body.Proposal)
		}
	}
}
