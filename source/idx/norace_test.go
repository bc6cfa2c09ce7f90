//go:build !race

package idx

const raceEnabled = false
