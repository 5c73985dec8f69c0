package sequence

import "github.com/inferd/inferd/core"

// What the tests (package sequence_test) read of a batcher's insides.

// Reaping reports whether the reaper of mv's batcher is armed and how many
// sequences it watches.
func Reaping(mv *core.ModelVersion) (armed bool, watched int) {
	b := mv.Sequences().(*seqBatcher)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.armed, len(b.lastSeen)
}

// Retired reports whether mv's batcher is retired.
func Retired(mv *core.ModelVersion) bool {
	b := mv.Sequences().(*seqBatcher)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.retired
}

// LiveSequences counts the sequences that hold a slot or wait for one.
func LiveSequences(mv *core.ModelVersion) int {
	b := mv.Sequences().(*seqBatcher)
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.active) + len(b.backlogOf)
}
