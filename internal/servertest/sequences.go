package servertest

// ClientSequence is one sequence Triton's sequence client examples send
// (triton-inference-server/client src/python/examples,
// simple_http_sequence_sync_infer_client.py and
// simple_grpc_sequence_stream_infer_client.py) to an accumulator model:
// the INT32 value of each step, and the running sum the model answers.
type ClientSequence struct {
	ID    any // uint64 or string
	Steps []int32
	Sums  []int32
}

// ClientSequences are the examples' three sequences, in the order they
// send them: two number ids and a string one. Each starts with its own
// first value, then the examples' values, negated for two of them.
func ClientSequences() []ClientSequence {
	values := []int32{11, 7, 5, 3, 2, 0, 1}
	var out []ClientSequence
	for _, sq := range []struct {
		id    any
		first int32
		sign  int32
	}{
		{uint64(1000), 0, 1}, {uint64(1001), 100, -1}, {"5f2d7a46-9b0e-4c55-a1f1-0c9e8a3d2b77", 20, -1},
	} {
		c := ClientSequence{ID: sq.id, Steps: []int32{sq.first}, Sums: []int32{sq.first}}
		for _, v := range values {
			v *= sq.sign
			c.Steps = append(c.Steps, v)
			c.Sums = append(c.Sums, c.Sums[len(c.Sums)-1]+v)
		}
		out = append(out, c)
	}
	return out
}
