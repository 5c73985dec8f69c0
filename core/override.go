package core

import (
	"log/slog"
	"os"
	"sync/atomic"
)

// overrideDir is the temporary folder a load override's files are written
// to. The versions loaded from it may read it for as long as they live (a
// restarted Python worker reads model.py again), so each holds a reference
// and the folder goes with the last one: the load's own, when no version
// was loaded from it, else the last such version's close.
type overrideDir struct {
	path string
	log  *slog.Logger
	refs atomic.Int32
	free func() // when set, what the last release does instead
}

// newOverrideDir wraps path with one reference, the load's.
func newOverrideDir(path string, log *slog.Logger) *overrideDir {
	d := &overrideDir{path: path, log: log}
	d.refs.Store(1)
	return d
}

// heldCopy counts the references to a remote model's local copy the same
// way: the last one gives back the load's repo.Holder hold, which deletes
// the copy unless a later load holds it too.
func heldCopy(release func()) *overrideDir {
	d := &overrideDir{free: release}
	d.refs.Store(1)
	return d
}

// hold takes a reference for a version loaded from the folder.
func (d *overrideDir) hold() *overrideDir {
	d.refs.Add(1)
	return d
}

// release drops a reference; the last one removes the folder.
func (d *overrideDir) release() {
	if d.refs.Add(-1) != 0 {
		return
	}
	if d.free != nil {
		d.free()
		return
	}
	if err := os.RemoveAll(d.path); err != nil {
		d.log.Warn("failed to remove the load override's files", "dir", d.path, "err", err)
	}
}
