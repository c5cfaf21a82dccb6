package rest

import (
	"encoding/json"
	"testing"

	"github.com/cairn-dev/cairn"
)

// TestCupResultOf: a write that became a proposal answers cup with the
// proposal (its provider as Source, its URL) and a ULID made of its id;
// one that took effect at once with the zero ULID and no proposal, as
// cupd answers.
func TestCupResultOf(t *testing.T) {
	var inst cairn.Instance
	if got := cupResultOf(inst); got.ID != cupZeroID || got.Proposal != nil {
		t.Errorf("without a proposal: %+v", got)
	}
	inst.Latest.Context = json.RawMessage(`{"commit":"abc","proposal":{"id":"0a1b2c3d4e5f","provider":"gitea","url":"https://gitea.example/acme/flags/pulls/3"}}`)
	got := cupResultOf(inst)
	if got.Proposal == nil || got.Proposal.Source != "gitea" || got.Proposal.URL != "https://gitea.example/acme/flags/pulls/3" {
		t.Errorf("proposal = %+v", got.Proposal)
	}
	// 0x0a1b2c3d4e5f in 26 Crockford base32 digits, right-aligned.
	if got.ID != "00000000000000000A3CP3TKJZ" || len(got.ID) != 26 {
		t.Errorf("ID = %q", got.ID)
	}
	for id, want := range map[string]string{
		"":                                 cupZeroID,
		"01":                               "00000000000000000000000001",
		"20":                               "00000000000000000000000010",
		"ffffffffffffffffffffffffffffffff": "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", // the largest ULID
	} {
		if got := ulidOf(id); got != want {
			t.Errorf("ulidOf(%q) = %q, want %q", id, got, want)
		}
	}
}
