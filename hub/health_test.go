package hub_test

import (
	"testing"

	"github.com/cairn-dev/cairn"
)

func TestCheckBackend(t *testing.T) {
	e := newEnv(t)
	sb, health, err := e.h.CheckBackend(e.ctx, cairn.BuiltinBackendID)
	if err != nil || !sb.Abstract || health.Status != "SERVING" {
		t.Errorf("built-in: %+v %+v %v, want SERVING", sb, health, err)
	}
	if _, health, err := e.h.CheckBackend(e.ctx, "abd48b8c-99bd-40a7-99c0-047bd69f1db8"); err != nil || health.Status != "SERVING" {
		t.Errorf("in-process gotemplate backend: %+v %v, want SERVING", health, err)
	}
	// The test opener cannot check health: the hub says so.
	id, _ := e.addBackend("ext", true, "")
	_, _, err = e.h.CheckBackend(e.ctx, id)
	wantCode(t, err, cairn.CodeUnavailable)
	wantContains(t, err, "no health check is available", id)
	_, _, err = e.h.CheckBackend(e.ctx, "00000000-0000-4000-8000-00000000abcd")
	wantCode(t, err, cairn.CodeNotFound)
}
