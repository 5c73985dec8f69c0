package sequence

import (
	"time"

	"github.com/inferd/inferd/core"
)

// The idle reaper: a sequence idle for max_sequence_idle_microseconds
// ends, and a backlogged sequence whose requests' timeout passes is
// refused.

// touch records a request for key at now and arms the reaper; b.mu is held.
func (b *seqBatcher) touch(key corrKey, now time.Time) {
	b.lastSeen[key] = now
	b.arm(now.Add(b.cfg.idle))
}

// expireAfter applies j's timeout to its backlogged sequence; b.mu is held.
func (b *seqBatcher) expireAfter(bl *backlogged, j *core.Job) {
	if j.Request().TimeoutMicros == 0 {
		return
	}
	at := j.QueuedAt().Add(time.Duration(j.Request().TimeoutMicros) * time.Microsecond)
	if bl.expire.IsZero() || at.Before(bl.expire) {
		bl.expire = at
		b.arm(at)
	}
}

// arm makes the reaper run at the latest at at; b.mu is held.
func (b *seqBatcher) arm(at time.Time) {
	if b.armed && !at.Before(b.reapAt) {
		return
	}
	b.armed, b.reapAt = true, at
	if b.reaper == nil {
		b.reaper = time.AfterFunc(time.Until(at), b.reap)
	} else {
		b.reaper.Reset(time.Until(at))
	}
}

// reap ends the sequences idle longer than max_sequence_idle_microseconds
// (their slots are released once the requests already queued there have
// run) and refuses the backlogged sequences whose timeout passed. It
// re-arms itself for the next deadline, or not at all when nothing is left
// to watch, so it never spins.
func (b *seqBatcher) reap() {
	b.mu.Lock()
	b.armed = false
	if b.closed {
		b.mu.Unlock()
		return
	}
	now := time.Now()
	var next time.Time
	soonest := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for key, last := range b.lastSeen {
		if at := last.Add(b.cfg.idle); at.After(now) {
			soonest(at)
			continue
		}
		delete(b.lastSeen, key)
		if slot := b.active[key]; slot != nil {
			// Later requests for key now need a START, as in Triton.
			delete(b.active, key)
			b.log.Debug("sequence idle for too long: ended", "correlation_id", key.String())
			slot.reaped = true
			wake(slot.inst)
		}
		// A backlogged sequence is watched again once it holds a slot.
	}
	var expired []*core.Job
	live := b.backlog[:0]
	for _, bl := range b.backlog {
		switch {
		case bl.expire.IsZero():
		case !bl.expire.After(now):
			if b.backlogOf[bl.key] == bl {
				delete(b.backlogOf, bl.key)
			}
			expired = append(expired, bl.jobs...)
			continue
		default:
			soonest(bl.expire)
		}
		live = append(live, bl)
	}
	clear(b.backlog[len(live):])
	b.backlog = live
	b.stats.AddPending(-int64(len(expired)))
	if !next.IsZero() {
		b.arm(next)
	}
	b.mu.Unlock()
	for _, j := range expired {
		b.finish(j, core.Expired(errBacklogExpired))
	}
}
