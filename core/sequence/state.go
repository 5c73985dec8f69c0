package sequence

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// addControls appends the control tensors of r's sequence flags and
// correlation id, in control_input order (READY is always true: every
// request an execution holds is a ready one), and asks for the state
// outputs besides the requested ones.
func (sc *seqConfig) addControls(r *core.ExecRequest) {
	inputs := r.Inputs
	shape := []int64{1}
	if sc.batching {
		shape = []int64{1, 1}
	}
	for _, c := range sc.controls {
		t := &core.Tensor{Name: c.name, DataType: c.dt, Shape: shape}
		switch c.kind {
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_START:
			t.Data = pick(c, r.Correlation.Flags&core.FlagSequenceStart != 0)
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_END:
			t.Data = pick(c, r.Correlation.Flags&core.FlagSequenceEnd != 0)
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_READY:
			t.Data = c.on
		case modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID:
			t.Data = corridData(c.dt, r.Correlation)
		}
		inputs = append(inputs, t)
	}
	outputs := r.Outputs
	if len(sc.stateOuts) > 0 {
		outputs = slices.Concat(r.Outputs, sc.stateOuts)
		slices.Sort(outputs)
		outputs = slices.Compact(outputs)
	}
	r.Reset(inputs, outputs)
}

func pick(c seqControl, on bool) []byte {
	if on {
		return c.on
	}
	return c.off
}

// corridData encodes a correlation id as CORRID's data type; numeric types
// narrower than 64 bits take the id's low bits, as Triton's cast does.
func corridData(dt core.DataType, c core.Correlation) []byte {
	switch dt {
	case core.TypeBytes:
		return core.AppendBytesElement(nil, []byte(c.StringID))
	case core.TypeUint32, core.TypeInt32:
		return binary.LittleEndian.AppendUint32(nil, uint32(c.ID))
	}
	return binary.LittleEndian.AppendUint64(nil, c.ID)
}

// stateInputs are the state tensors j runs with: its sequence's current
// state, or the initial state when j starts the sequence (which also
// resets the slot's state, so nothing leaks from an earlier sequence).
func (b *seqBatcher) stateInputs(j *core.Job) []*core.Tensor {
	if len(b.cfg.states) == 0 {
		return nil
	}
	slot := slotOf(j)
	slot.smu.Lock()
	defer slot.smu.Unlock()
	if j.Request().Correlation.Flags&core.FlagSequenceStart != 0 || slot.state == nil {
		slot.state = b.cfg.initialStates()
	}
	out := make([]*core.Tensor, len(slot.state))
	for i, t := range slot.state {
		out[i] = &core.Tensor{Name: b.cfg.states[i].in, DataType: t.DataType, Shape: t.Shape, Data: t.Data}
	}
	return out
}

// initialStates are a fresh sequence's states: initial_state, or zeros
// with each variable dimension 1 (as Triton's SequenceStates::Initialize).
func (sc *seqConfig) initialStates() []*core.Tensor {
	out := make([]*core.Tensor, len(sc.states))
	for i, s := range sc.states {
		if s.init != nil {
			out[i] = s.init
			continue
		}
		var shape []int64
		if sc.batching {
			shape = append(shape, 1)
		}
		for _, d := range s.dims {
			if d == -1 {
				d = 1
			}
			shape = append(shape, d)
		}
		out[i] = &core.Tensor{Name: s.in, DataType: s.dt, Shape: shape, Data: zeroData(s.dt, core.ElementCount(shape))}
	}
	return out
}

// compatible reports whether j (with states st) may join a batch started
// by first (with states fst): the same inputs, and the same shapes but for
// the batch dimension and ragged inputs, so that they concatenate.
func (b *seqBatcher) compatible(first *core.Job, fst []*core.Tensor, j *core.Job, st []*core.Tensor) bool {
	if !b.cfg.batching {
		return false
	}
	same := func(x, y []*core.Tensor) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Name != y[i].Name {
				return false
			}
			if !b.cfg.ragged[x[i].Name] && !slices.Equal(x[i].Shape[1:], y[i].Shape[1:]) {
				return false
			}
		}
		return true
	}
	return same(first.Request().Inputs, j.Request().Inputs) && same(fst, st)
}

// keep takes the state outputs out of resp and keeps them as the slot's
// next state; a model that is not decoupled must produce every state
// output in its response.
func (s *seqSlot) keep(sc *seqConfig, resp *core.ExecResponse, asked func(string) bool) error {
	if len(sc.states) == 0 || resp == nil || resp.Err != nil {
		return nil
	}
	found := make([]*core.Tensor, len(sc.states))
	outs := make([]*core.Tensor, 0, len(resp.Outputs))
	for _, t := range resp.Outputs {
		k := slices.IndexFunc(sc.states, func(st seqState) bool { return st.out == t.Name })
		if k < 0 {
			outs = append(outs, t)
			continue
		}
		found[k] = &core.Tensor{Name: sc.states[k].in, DataType: t.DataType, Shape: slices.Clone(t.Shape), Data: bytes.Clone(t.Data)}
		if asked(t.Name) {
			// "For debugging purposes, the client can request the output
			// state" (triton-inference-server/server
			// docs/user_guide/implicit_state_management.md).
			outs = append(outs, t)
		}
	}
	resp.Outputs = outs
	s.smu.Lock()
	defer s.smu.Unlock()
	for k, t := range found {
		if t == nil {
			if sc.decoupled {
				continue
			}
			return core.Errorf(core.CodeInternal, "model '%s' did not produce the output '%s' of state '%s'", sc.model, sc.states[k].out, sc.states[k].in)
		}
		if s.state != nil {
			s.state[k] = t
		}
	}
	return nil
}

// Warmup completes a model_warmup request of a sequence model, which runs
// outside the sequence batcher: a one-request sequence (START and END, id 1)
// with the initial state.
func (sc *seqConfig) Warmup(r *core.ExecRequest) {
	r.Correlation = core.Correlation{ID: 1, StringID: "1", Flags: core.FlagSequenceStart | core.FlagSequenceEnd}
	if sc.corrid >= 0 && sc.controls[sc.corrid].dt == core.TypeBytes {
		r.Correlation.IsString = true
	}
	sc.addControls(r)
	r.SetInputs(append(r.Inputs, sc.initialStates()...))
}
