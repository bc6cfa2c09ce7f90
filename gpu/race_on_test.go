//go:build race

package gpu

// raceEnabled: the test binary runs under the race detector (ThreadSanitizer).
const raceEnabled = true
