//go:build race

package adaptertest

// raceEnabled reports that the race detector is on: its sync.Pool drops items at random, so
// frameworks that pool their contexts allocate at random, and allocation counts mean nothing.
const raceEnabled = true
