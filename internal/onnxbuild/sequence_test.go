package onnxbuild

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild/orttest"
	"github.com/inferd/inferd/repo/modelconfig"
)

// TestAccumulatorORT runs two sequences side by side in one [2, 1] batch,
// feeding each step's STATE_OUT back as the next STATE_IN, as the sequence
// batcher does.
func TestAccumulatorORT(t *testing.T) {
	orttest.Init(t)
	for _, dt := range []DataType{Int32, Float, Int64, Double} {
		t.Run(dt.String(), func(t *testing.T) {
			model := Must(Accumulator(dt))
			sym := []int64{-1, 1}
			checkInfo(t, model,
				[]tensor{{name: "INPUT", elem: dt, shape: sym}, {name: "STATE_IN", elem: dt, shape: sym}},
				[]tensor{{name: "OUTPUT", elem: dt, shape: sym}, {name: "STATE_OUT", elem: dt, shape: sym}})
			shape := []int64{2, 1}
			state := []float64{0, 0}
			sums := []float64{0, 0}
			for step := range 4 {
				in := []float64{float64(step + 1), float64(10 * (step + 1))}
				got := run(t, model,
					[]tensor{{name: "INPUT", elem: dt, shape: shape, nums: in}, {name: "STATE_IN", elem: dt, shape: shape, nums: state}},
					[]tensor{{name: "OUTPUT", elem: dt, shape: shape}, {name: "STATE_OUT", elem: dt, shape: shape}})
				sums[0] += in[0]
				sums[1] += in[1]
				checkOutputs(t, got, []tensor{
					{name: "OUTPUT", elem: dt, shape: shape, nums: sums},
					{name: "STATE_OUT", elem: dt, shape: shape, nums: sums},
				})
				state = got[1].nums
			}
			if sums[0] != 10 || sums[1] != 100 {
				t.Fatalf("sums %v", sums)
			}
		})
	}
}

func TestPreviousORT(t *testing.T) {
	orttest.Init(t)
	for _, dt := range []DataType{String, Bool, Int8, Float16} {
		t.Run(dt.String(), func(t *testing.T) {
			model := Must(Previous(dt))
			shape := []int64{2, 1}
			in := tensor{name: "INPUT", elem: dt, shape: shape}
			state := tensor{name: "STATE_IN", elem: dt, shape: shape}
			if dt == String {
				in.strs, state.strs = []string{"now", "later"}, []string{"", "before"}
			} else {
				in.nums, state.nums = []float64{1, 0}, []float64{0, 1}
			}
			got := run(t, model, []tensor{in, state},
				[]tensor{{name: "OUTPUT", elem: dt, shape: shape}, {name: "STATE_OUT", elem: dt, shape: shape}})
			wantOut, wantState := state, in
			wantOut.name, wantState.name = "OUTPUT", "STATE_OUT"
			checkOutputs(t, got, []tensor{wantOut, wantState})
		})
	}
}

func TestSequenceControlsORT(t *testing.T) {
	orttest.Init(t)
	for _, control := range ControlTypes {
		for _, corrid := range CorrIDTypes {
			t.Run(fmt.Sprintf("%v/%v", control, corrid), func(t *testing.T) {
				model := Must(SequenceControls(control, corrid))
				sym := []int64{-1, 1}
				checkInfo(t, model,
					[]tensor{
						{name: "INPUT", elem: Int32, shape: sym},
						{name: "START", elem: control, shape: sym}, {name: "END", elem: control, shape: sym},
						{name: "READY", elem: control, shape: sym}, {name: "CORRID", elem: corrid, shape: sym},
					},
					[]tensor{
						{name: "OUTPUT", elem: Int32, shape: sym},
						{name: "OUTPUT_START", elem: control, shape: sym}, {name: "OUTPUT_END", elem: control, shape: sym},
						{name: "OUTPUT_READY", elem: control, shape: sym}, {name: "OUTPUT_CORRID", elem: corrid, shape: sym},
					})
				// Three slots: the first starts its sequence, the second
				// ends one, the third is empty (READY false).
				shape := []int64{3, 1}
				start, end, ready := []float64{1, 0, 0}, []float64{0, 1, 0}, []float64{1, 1, 0}
				id := tensor{name: "CORRID", elem: corrid, shape: shape}
				if corrid == String {
					id.strs = []string{"seq-a", "seq-b", ""}
				} else {
					id.nums = []float64{7, 4000000000, 0}
				}
				in := []tensor{
					{name: "INPUT", elem: Int32, shape: shape, nums: []float64{5, -6, 9}},
					{name: "START", elem: control, shape: shape, nums: start},
					{name: "END", elem: control, shape: shape, nums: end},
					{name: "READY", elem: control, shape: shape, nums: ready},
					id,
				}
				if corrid == Int32 {
					in[4].nums[1] = -3 // 4e9 does not fit
				}
				outs := []tensor{
					{name: "OUTPUT", elem: Int32, shape: shape},
					{name: "OUTPUT_START", elem: control, shape: shape},
					{name: "OUTPUT_END", elem: control, shape: shape},
					{name: "OUTPUT_READY", elem: control, shape: shape},
					{name: "OUTPUT_CORRID", elem: corrid, shape: shape},
				}
				wantID := in[4]
				wantID.name = "OUTPUT_CORRID"
				checkOutputs(t, run(t, model, in, outs), []tensor{
					{name: "OUTPUT", elem: Int32, shape: shape, nums: []float64{5, -6, 0}},
					{name: "OUTPUT_START", elem: control, shape: shape, nums: start},
					{name: "OUTPUT_END", elem: control, shape: shape, nums: end},
					{name: "OUTPUT_READY", elem: control, shape: shape, nums: ready},
					wantID,
				})
			})
		}
	}
}

// TestGrowingStateORT feeds STATE_OUT back for four steps: the state grows
// by one element each time.
func TestGrowingStateORT(t *testing.T) {
	orttest.Init(t)
	for _, dt := range GrowingStateTypes {
		t.Run(dt.String(), func(t *testing.T) {
			model := Must(GrowingState(dt))
			checkInfo(t, model,
				[]tensor{{name: "INPUT", elem: dt, shape: []int64{1}}, {name: "STATE_IN", elem: dt, shape: []int64{-1}}},
				[]tensor{{name: "OUTPUT", elem: dt, shape: []int64{1}}, {name: "STATE_OUT", elem: dt, shape: []int64{-1}},
					{name: "HISTORY", elem: dt, shape: []int64{-1}}})
			state := []float64{0} // the config's initial state
			sum := 0.0
			for step := 1; step <= 4; step++ {
				x := float64(step * 3)
				n := []int64{int64(step + 1)}
				got := run(t, model,
					[]tensor{
						{name: "INPUT", elem: dt, shape: []int64{1}, nums: []float64{x}},
						{name: "STATE_IN", elem: dt, shape: []int64{int64(len(state))}, nums: state},
					},
					// Preallocated by run, so the growing shapes are given.
					[]tensor{{name: "OUTPUT", elem: dt, shape: []int64{1}}, {name: "STATE_OUT", elem: dt, shape: n},
						{name: "HISTORY", elem: dt, shape: n}})
				sum += x
				history := append(append([]float64(nil), state...), x)
				checkOutputs(t, got, []tensor{
					{name: "OUTPUT", elem: dt, shape: []int64{1}, nums: []float64{sum}},
					{name: "STATE_OUT", elem: dt, shape: n, nums: history},
					{name: "HISTORY", elem: dt, shape: n, nums: history},
				})
				state = got[1].nums
			}
		})
	}
}

// TestGrowingStateBatchedORT runs two sequences of the same length side by
// side in one batch.
func TestGrowingStateBatchedORT(t *testing.T) {
	orttest.Init(t)
	model := Must(GrowingStateBatched(Float))
	checkInfo(t, model,
		[]tensor{{name: "INPUT", elem: Float, shape: []int64{-1, 1}}, {name: "STATE_IN", elem: Float, shape: []int64{-1, -1}}},
		[]tensor{{name: "OUTPUT", elem: Float, shape: []int64{-1, 1}}, {name: "STATE_OUT", elem: Float, shape: []int64{-1, -1}},
			{name: "HISTORY", elem: Float, shape: []int64{-1, -1}}})
	state := []float64{0, 0} // [2, 1]
	rows := [][]float64{{0}, {0}}
	for step := 1; step <= 3; step++ {
		x := []float64{float64(step), float64(-10 * step)}
		n := []int64{2, int64(step + 1)}
		got := run(t, model,
			[]tensor{
				{name: "INPUT", elem: Float, shape: []int64{2, 1}, nums: x},
				{name: "STATE_IN", elem: Float, shape: []int64{2, int64(step)}, nums: state},
			},
			[]tensor{{name: "OUTPUT", elem: Float, shape: []int64{2, 1}}, {name: "STATE_OUT", elem: Float, shape: n},
				{name: "HISTORY", elem: Float, shape: n}})
		var sums, history []float64
		for r := range rows {
			rows[r] = append(rows[r], x[r])
			sum := 0.0
			for _, v := range rows[r] {
				sum += v
			}
			sums = append(sums, sum)
			history = append(history, rows[r]...)
		}
		checkOutputs(t, got, []tensor{
			{name: "OUTPUT", elem: Float, shape: []int64{2, 1}, nums: sums},
			{name: "STATE_OUT", elem: Float, shape: n, nums: history},
			{name: "HISTORY", elem: Float, shape: n, nums: history},
		})
		state = got[1].nums
	}
}

// TestStatefulConfigs checks that each config parses and passes the
// repository's validation, and names the types it was asked for.
func TestStatefulConfigs(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"accumulator INT32", AccumulatorConfig(Int32), []string{"TYPE_INT32", `"STATE_IN"`, "zero_data: true"}},
		{"accumulator FP32", AccumulatorConfig(Float), []string{"TYPE_FP32"}},
		{"previous STRING", PreviousConfig(String), []string{"TYPE_STRING", "zero_data: true"}},
		{"controls INT32 UINT64", SequenceControlsConfig(Int32, Uint64), []string{"int32_false_true", "data_type: TYPE_UINT64"}},
		{"controls FP32 STRING", SequenceControlsConfig(Float, String), []string{"fp32_false_true", "data_type: TYPE_STRING"}},
		{"controls BOOL INT64", SequenceControlsConfig(Bool, Int64), []string{"bool_false_true: [ false, true ]", "TYPE_BOOL", "TYPE_INT64"}},
		{"growing FP64", GrowingStateConfig(Double), []string{"TYPE_FP64", "dims: [ -1 ]", "max_batch_size: 0"}},
		{"growing batched INT32", GrowingStateBatchedConfig(Int32), []string{"TYPE_INT32", "dims: [ -1 ]", "max_batch_size: 8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, w := range tt.want {
				if !strings.Contains(tt.text, w) {
					t.Errorf("config lacks %q:\n%s", w, tt.text)
				}
			}
			cfg, err := modelconfig.Parse([]byte(tt.text))
			if err != nil {
				t.Fatalf("parse: %v\n%s", err, tt.text)
			}
			if err := modelconfig.Normalize(cfg, "m", true); err != nil {
				t.Fatal(err)
			}
			if err := modelconfig.Validate(cfg, "m", true); err != nil {
				t.Fatalf("validate: %v\n%s", err, tt.text)
			}
			if got := cfg.GetSequenceBatching().GetMaxSequenceIdleMicroseconds(); got != SequenceIdleMicroseconds {
				t.Errorf("max_sequence_idle_microseconds = %d", got)
			}
		})
	}
}

func TestStatefulRejectTypes(t *testing.T) {
	for name, build := range map[string]func() ([]byte, error){
		"Accumulator BOOL":        func() ([]byte, error) { return Accumulator(Bool) },
		"SequenceControls INT64":  func() ([]byte, error) { return SequenceControls(Int64, Uint64) },
		"SequenceControls corrid": func() ([]byte, error) { return SequenceControls(Int32, Float) },
		"GrowingState STRING":     func() ([]byte, error) { return GrowingState(String) },
		"GrowingState UINT8":      func() ([]byte, error) { return GrowingState(Uint8) },
	} {
		if _, err := build(); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("%s: err = %v, want a type error", name, err)
		}
	}
}
