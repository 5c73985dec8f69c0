package core

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

func TestWarmup(t *testing.T) {
	const io = `max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`
	file := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 7), 9)
	for _, tc := range []struct {
		name            string
		warmup          string
		wantErr         string
		execs, success  uint64
		inferences      uint64
		firstExecValues []int32
	}{
		// Checklist 42 / metrics 48: every sample, max(count,1) times, on
		// every instance, recorded like real requests, before READY.
		{name: "zero data", warmup: `model_warmup [ { name: "z" batch_size: 3 count: 2 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } } ]`,
			execs: 2 * 2, success: 2 * 2 * 3, inferences: 2 * 2 * 3, firstExecValues: []int32{0, 0, 0, 0, 0, 0}},
		{name: "file data, count 0 runs once", warmup: `model_warmup [ { name: "f" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 2 ] input_data_file: "x.bin" } } } ]`,
			execs: 2, success: 2, inferences: 2, firstExecValues: []int32{7, 9}},
		{name: "batch size 0 is skipped", warmup: `model_warmup [ { name: "s" batch_size: 0 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } } } ]`},
		{name: "wrong dims fail the load", warmup: `model_warmup [ { name: "bad" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 3 ] zero_data: true } } } ]`,
			wantErr: "failed to run warmup sample 'bad'"},
		{name: "dims whose product overflows fail the load", warmup: `model_warmup [ { name: "huge" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 4294967296, 4294967296 ] zero_data: true } } } ]`,
			wantErr: "warmup input 'x' with dims [4294967296,4294967296] would take more than 1073741824 bytes, this server's limit"},
		{name: "dims past the warmup bound fail the load", warmup: `model_warmup [ { name: "big" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 1099511627776 ] random_data: true } } } ]`,
			wantErr: "would take more than 1073741824 bytes"},
		{name: "short file fails the load", warmup: `model_warmup [ { name: "short" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 4 ] input_data_file: "x.bin" } } } ]`,
			wantErr: "file holds 8 bytes, the input needs 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, b, err := startEcho(t, io+tc.warmup+"\n", true, map[string][]byte{"warmup/x.bin": file})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("load: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := stats(t, s)
			if st.ExecutionCount != tc.execs || st.Success.Count != tc.success || st.InferenceCount != tc.inferences || st.Pending != 0 {
				t.Fatalf("after load: exec %d success %d inferences %d pending %d; want %d %d %d 0",
					st.ExecutionCount, st.Success.Count, st.InferenceCount, st.Pending, tc.execs, tc.success, tc.inferences)
			}
			batches, _ := b.executions()
			if tc.firstExecValues != nil && (len(batches) == 0 || !slices.Equal(batches[0], tc.firstExecValues)) {
				t.Fatalf("first warmup execution saw %v, want %v", batches, tc.firstExecValues)
			}
		})
	}
}
