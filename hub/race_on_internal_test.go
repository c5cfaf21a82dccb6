//go:build race

package hub

// raceEnabled says the race detector is on: tests that only repeat a
// pure computation many times run fewer rounds under it, which finds no
// race in them and makes each round about ten times slower.
const raceEnabled = true
