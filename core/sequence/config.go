package sequence

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
)

// initialStateFolder holds the data files of initial_state entries, inside
// the model's folder (triton-inference-server/core src/constants.h).
const initialStateFolder = "initial_state"

// maxSeqSlots bounds the sequence slots of one instance (max_batch_size
// under direct, max_candidate_sequences under oldest).
const maxSeqSlots = 1 << 16

// seqControl is one control tensor the sequence batcher gives the backend
// (triton-inference-server/server docs/user_guide/architecture.md,
// "Control Inputs").
type seqControl struct {
	name string
	kind modelconfig.ModelSequenceBatching_Control_Kind
	dt   core.DataType
	// off and on are the encoded false and true values of a START, END or
	// READY control.
	off, on []byte
}

// seqState is one implicit state (triton-inference-server/server
// docs/user_guide/implicit_state_management.md).
type seqState struct {
	in, out string
	dt      core.DataType
	dims    []int64      // config dims, without the batch dimension
	init    *core.Tensor // from initial_state; nil: zeros
}

// seqConfig is the sequence_batching part of a model configuration.
type seqConfig struct {
	model     string
	batching  bool
	maxBS     int64
	oldest    bool
	slots     int // sequence slots per instance
	delay     time.Duration
	minUtil   float64 // direct: minimum_slot_utilization
	pref      []int64 // oldest: sorted preferred batch sizes
	preserve  bool    // oldest: preserve_ordering
	idle      time.Duration
	controls  []seqControl
	corrid    int // index into controls of CORRID, -1: none
	states    []seqState
	stateOuts []string // output names of states, ascending
	ragged    map[string]bool
	decoupled bool
	// iterative: iterative_sequence; a request without a correlation id
	// starts a sequence of its own and the model may reschedule it.
	iterative bool
	// listed are the outputs the configuration lists (asksFor).
	listed map[string]bool
}

// newSeqConfig reads cfg's sequence_batching, checking what Triton checks
// when it creates the sequence batcher (triton-inference-server/core
// src/sequence_batch_scheduler/sequence_batch_scheduler.cc) and reading
// initial state data files from modelDir.
func newSeqConfig(cfg *modelconfig.ModelConfig, modelDir string) (*seqConfig, error) {
	sb := cfg.GetSequenceBatching()
	name := cfg.GetName()
	sc := &seqConfig{
		model:     name,
		maxBS:     int64(cfg.GetMaxBatchSize()),
		batching:  cfg.GetMaxBatchSize() > 0,
		idle:      time.Duration(sb.GetMaxSequenceIdleMicroseconds()) * time.Microsecond,
		corrid:    -1,
		decoupled: cfg.GetModelTransactionPolicy().GetDecoupled(),
		iterative: sb.GetIterativeSequence(),
		listed:    map[string]bool{},
	}
	for _, out := range cfg.GetOutput() {
		sc.listed[out.GetName()] = true
	}
	if sc.idle <= 0 {
		sc.idle = time.Duration(modelconfig.DefaultSequenceIdleMicroseconds) * time.Microsecond
	}
	for _, in := range cfg.GetInput() {
		if in.GetAllowRaggedBatch() {
			if sc.ragged == nil {
				sc.ragged = map[string]bool{}
			}
			sc.ragged[in.GetName()] = true
		}
	}
	if o := sb.GetOldest(); o != nil {
		sc.oldest = true
		sc.slots = int(o.GetMaxCandidateSequences())
		sc.delay = time.Duration(o.GetMaxQueueDelayMicroseconds()) * time.Microsecond
		sc.preserve = o.GetPreserveOrdering()
		for _, p := range o.GetPreferredBatchSize() {
			sc.pref = append(sc.pref, int64(p))
		}
		slices.Sort(sc.pref)
		sc.pref = slices.Compact(sc.pref)
	} else {
		d := sb.GetDirect()
		sc.slots = int(max(1, sc.maxBS))
		sc.delay = time.Duration(d.GetMaxQueueDelayMicroseconds()) * time.Microsecond
		sc.minUtil = float64(d.GetMinimumSlotUtilization())
	}
	sc.slots = max(1, sc.slots)
	if sc.slots > maxSeqSlots {
		// Each slot is allocated at load: refuse rather than exhaust memory.
		return nil, core.Errorf(core.CodeInvalidArg, "sequence batching for %s needs %d sequence slots per instance, more than this server's limit of %d", name, sc.slots, maxSeqSlots)
	}

	// Controls in control_input order, each tensor carrying its one kind.
	for _, ci := range sb.GetControlInput() {
		for _, c := range ci.GetControl() {
			ctl := seqControl{name: ci.GetName(), kind: c.GetKind()}
			switch {
			case c.GetKind() == modelconfig.ModelSequenceBatching_Control_CONTROL_SEQUENCE_CORRID:
				ctl.dt = core.DataType(c.GetDataType())
				sc.corrid = len(sc.controls)
			case len(c.GetInt32FalseTrue()) == 2:
				ctl.dt = core.TypeInt32
				v := c.GetInt32FalseTrue()
				ctl.off = binary.LittleEndian.AppendUint32(nil, uint32(v[0]))
				ctl.on = binary.LittleEndian.AppendUint32(nil, uint32(v[1]))
			case len(c.GetFp32FalseTrue()) == 2:
				ctl.dt = core.TypeFP32
				v := c.GetFp32FalseTrue()
				ctl.off = binary.LittleEndian.AppendUint32(nil, math.Float32bits(v[0]))
				ctl.on = binary.LittleEndian.AppendUint32(nil, math.Float32bits(v[1]))
			case len(c.GetBoolFalseTrue()) == 2:
				ctl.dt = core.TypeBool
				v := c.GetBoolFalseTrue()
				ctl.off, ctl.on = []byte{boolByte(v[0])}, []byte{boolByte(v[1])}
			default:
				return nil, core.Errorf(core.CodeInvalidArg, "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for %s for %s", c.GetKind(), name)
			}
			sc.controls = append(sc.controls, ctl)
		}
	}

	seen := map[string]bool{}
	for _, st := range sb.GetState() {
		s := seqState{in: st.GetInputName(), out: st.GetOutputName(), dt: core.DataType(st.GetDataType()), dims: st.GetDims()}
		if n := len(st.GetInitialState()); n > 1 {
			return nil, core.Errorf(core.CodeInvalidArg, "initial_state field for state input '%s' must contain exactly one or zero element. Found '%d' elements.", s.in, n)
		}
		if seen[s.in] {
			return nil, core.Errorf(core.CodeInvalidArg, "State input name '%s' specified more than once.", s.in)
		}
		seen[s.in] = true
		if len(st.GetInitialState()) == 1 {
			t, err := initialState(st.GetInitialState()[0], st, sc.batching, modelDir)
			if err != nil {
				return nil, err
			}
			s.init = t
		} else if _, ok := core.ConfigBytes(zeroStateShape(s.dims), s.dt); !ok {
			// Each sequence's start allocates these zeros: refuse now.
			return nil, core.Errorf(core.CodeInvalidArg, "state input '%s' with dims %s would take more than %d bytes, this server's limit", s.in, core.ShapeString(s.dims), core.MaxConfigAlloc)
		}
		sc.states = append(sc.states, s)
		sc.stateOuts = append(sc.stateOuts, s.out)
	}
	slices.Sort(sc.stateOuts)
	return sc, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// initialState builds a state's initial tensor from its initial_state, with
// Triton's checks and texts (SequenceBatchScheduler::GenerateInitialStateData).
func initialState(is *modelconfig.ModelSequenceBatching_InitialState, st *modelconfig.ModelSequenceBatching_State, batching bool, modelDir string) (*core.Tensor, error) {
	in := st.GetInputName()
	if is.GetDataType() != st.GetDataType() {
		return nil, core.Errorf(core.CodeInvalidArg, "The data type used for 'initial_state' field of state '%s' does not match the state data type.", in)
	}
	if is.GetName() == "" {
		return nil, core.Errorf(core.CodeInvalidArg, "Field 'name' must be set when using initial_state for state input '%s'.", in)
	}
	if len(is.GetDims()) != len(st.GetDims()) {
		return nil, core.Errorf(core.CodeInvalidArg, "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input '%s'. %d != %d", in, len(is.GetDims()), len(st.GetDims()))
	}
	var shape []int64
	if batching {
		shape = append(shape, 1)
	}
	for i, d := range is.GetDims() {
		if d == -1 {
			return nil, core.Errorf(core.CodeInvalidArg, "'initial_state' field for state input name '%s' contains variable dimensions.", in)
		}
		if sd := st.GetDims()[i]; sd != -1 && d != sd {
			return nil, core.Errorf(core.CodeInvalidArg, "'initial_state' dim for input name '%s' doesn't match 'state' dim description. %d != %d", in, d, sd)
		}
		shape = append(shape, d)
	}
	dt := core.DataType(is.GetDataType())
	n := core.ElementCount(shape)
	// The data is built at load from the config alone: a few bytes of
	// config must not ask for more memory than the bound.
	size, ok := core.ConfigBytes(shape, dt)
	if !ok {
		return nil, core.Errorf(core.CodeInvalidArg, "'initial_state' of state input '%s' with dims %s would take more than %d bytes, this server's limit", in, core.ShapeString(is.GetDims()), core.MaxConfigAlloc)
	}
	t := &core.Tensor{Name: in, DataType: dt, Shape: shape}
	switch {
	case is.GetZeroData():
		t.Data = zeroData(dt, n)
	case is.GetDataFile() != "":
		data, err := stateFile(is.GetDataFile(), in, dt, n, size, modelDir)
		if err != nil {
			return nil, err
		}
		t.Data = data
	default:
		return nil, core.Errorf(core.CodeInvalidArg, "initial_state setting expects state'%s' to have state_data set", in)
	}
	return t, nil
}

// stateFile reads an initial_state data_file (initial_state/<data_file>
// in the model folder, as Triton's GenerateInitialStateData) through
// modelfile: it may not leave the model folder, must be a regular file,
// and is read no further than the state needs (size bytes; for BYTES,
// the whole file, at most core.MaxConfigAlloc).
func stateFile(file, in string, dt core.DataType, n, size int64, modelDir string) ([]byte, error) {
	field := fmt.Sprintf("state input '%s' initial_state data_file", in)
	name, err := modelfile.Sub(initialStateFolder, file)
	if err != nil {
		return nil, core.FileError(field, file, err)
	}
	if dt == core.TypeBytes {
		data, err := modelfile.ReadFile(modelDir, name, core.MaxConfigAlloc)
		if err != nil {
			return nil, core.FileError(field, file, err)
		}
		if core.CountBytesElements(data) != n {
			return nil, core.Errorf(core.CodeInvalidArg, "initial_state setting expects %d string elements, but the data provided from %s does not hold them", n, file)
		}
		return data, nil
	}
	data, have, err := modelfile.ReadHead(modelDir, name, size)
	if err != nil {
		return nil, core.FileError(field, file, err)
	}
	if have < size {
		return nil, core.Errorf(core.CodeInvalidArg, "initial_state setting expects %d bytes, but the data provided from %sonly has %d bytes.", size, file, have)
	}
	return data, nil
}

// zeroStateShape is the shape of a state's zeros when it has no
// initial_state, without the batch dimension: each variable dimension 1
// (seqConfig.initialStates).
func zeroStateShape(dims []int64) []int64 {
	out := make([]int64, len(dims))
	for i, d := range dims {
		if d == -1 {
			d = 1
		}
		out[i] = d
	}
	return out
}

// zeroData is n zero elements of dt: empty strings for BYTES.
func zeroData(dt core.DataType, n int64) []byte {
	if dt == core.TypeBytes {
		return make([]byte, 4*n)
	}
	return make([]byte, n*int64(dt.ByteSize()))
}
