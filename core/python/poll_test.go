package python

import (
	"testing"
	"time"
)

// TestReplyPoll: the reader polls only while an execute is unanswered,
// the last one was answered within pollFor, the write was less than
// pollFor ago, and no yield found the CPU busy within pollRest.
func TestReplyPoll(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(p *replyPoll)
		want bool
	}{
		{"fresh", func(p *replyPoll) {}, false},
		{"first execute", func(p *replyPoll) { p.sending() }, false},
		{"after a quick answer", func(p *replyPoll) { p.sending(); p.answered(); p.sending() }, true},
		{"nothing pending", func(p *replyPoll) { p.sending(); p.answered() }, false},
		{"after a slow answer", func(p *replyPoll) {
			p.sending()
			p.sent.Add(-int64(2 * pollFor))
			p.answered()
			p.sending()
		}, false},
		{"written long ago", func(p *replyPoll) { p.sending(); p.answered(); p.sending(); p.sent.Add(-int64(2 * pollFor)) }, false},
		{"CPU found busy", func(p *replyPoll) { p.sending(); p.answered(); p.sending(); p.busy() }, false},
		{"quick answer while resting", func(p *replyPoll) { p.sending(); p.busy(); p.answered(); p.sending() }, false},
		{"rest over", func(p *replyPoll) {
			p.sending()
			p.busy()
			p.rest.Add(-int64(2 * pollRest))
			p.answered()
			p.sending()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newReplyPoll()
			p.born = p.born.Add(-time.Hour) // times well after the origin
			tc.set(p)
			if got := p.polling(); got != tc.want {
				t.Fatalf("polling() = %v, want %v", got, tc.want)
			}
		})
	}
}
