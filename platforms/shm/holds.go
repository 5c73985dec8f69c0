package shm

import (
	"slices"

	"github.com/inferd/inferd/core"
)

// Holds are the spans one call uses, released together when it ends.
type Holds struct {
	spans  []*Span
	inputs []*Span // those an input is read from in place
}

// Add keeps s until Release.
func (h *Holds) Add(s *Span) { h.spans = append(h.spans, s) }

// AddInput keeps s, an input's span read in place (Span.Data), until
// Release.
func (h *Holds) AddInput(s *Span) {
	h.spans = append(h.spans, s)
	h.inputs = append(h.inputs, s)
}

// Detach gives every tensor whose data lies in an input's span a copy of
// its own: a backend may return an input's bytes as an output, which
// would otherwise be read from the region while the response is rendered,
// after the call's truncation check (Err). Call it before Err. A nil
// Holds does nothing.
func (h *Holds) Detach(ts []*core.Tensor) {
	if h == nil || len(h.inputs) == 0 {
		return
	}
	for _, t := range ts {
		for _, s := range h.inputs {
			if in, ok := s.Data(); ok && core.Overlap(t.Data, in) {
				_ = s.fault(func() { t.Data = slices.Clone(t.Data) }) // a fault shows in Err
				break
			}
		}
	}
}

// Release releases every span; a nil Holds does nothing.
func (h *Holds) Release() {
	if h == nil {
		return
	}
	for _, s := range h.spans {
		s.Release()
	}
	h.spans, h.inputs = h.spans[:0], h.inputs[:0]
}

// Err is the first held span's truncation error (Span.Err); nil for a nil
// Holds or when no region lost a page.
func (h *Holds) Err() error {
	if h == nil {
		return nil
	}
	for _, s := range h.spans {
		if err := s.Err(); err != nil {
			return err
		}
	}
	return nil
}
