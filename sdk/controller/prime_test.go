package controller

import (
	"encoding/json"
	"os"
	"testing"
)

type primer struct {
	primed int
	panics bool
}

func (p *primer) Prime() {
	p.primed++
	if p.panics {
		panic("priming failed")
	}
}
func (*primer) Get(*os.Root, Kind, string, string) (json.RawMessage, error) { return nil, nil }
func (*primer) List(*os.Root, Kind, string, map[string]string) ([]json.RawMessage, error) {
	return nil, nil
}
func (*primer) Put(*os.Root, Kind, Resource) error          { return nil }
func (*primer) Delete(*os.Root, Kind, string, string) error { return nil }

// prime runs the controller's Prime once, and a panic in it does not
// reach the caller (priming is an optimisation; the call runs anyway).
func TestPrime(t *testing.T) {
	for _, panics := range []bool{false, true} {
		p := &primer{panics: panics}
		prime(p)
		if p.primed != 1 {
			t.Errorf("panics=%v: Prime ran %d times, want 1", panics, p.primed)
		}
	}
	prime(&struct{ Controller }{}) // not a Primer: nothing to call
	if startedAhead() {
		t.Error("startedAhead outside wasip1: only a wasip1 host starts modules ahead of their calls")
	}
}
