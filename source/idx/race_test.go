//go:build race

package idx

// raceEnabled shortens the slowest tests under the race detector, which slows gzip ten-fold.
const raceEnabled = true
