//go:build !race

package adaptertest

const raceEnabled = false
