//go:build !race

package hub

// raceEnabled: see race_on_internal_test.go.
const raceEnabled = false
