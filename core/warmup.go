package core

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
)

// warmup runs the config's model_warmup samples on one instance
// (triton-inference-server/server
// docs/user_guide/model_configuration.md, "Model Warmup"): each sample as batch_size requests of batch 1
// in one execution, count times. They are recorded like real requests.
func (mv *ModelVersion) warmup(ctx context.Context, inst Instance, modelDir string, seq SequenceConfig) error {
	samples := mv.Config.GetModelWarmup()
	if len(samples) == 0 {
		return nil
	}
	for _, sample := range samples {
		if sample.GetBatchSize() == 0 {
			continue
		}
		bs := int(sample.GetBatchSize())
		if mv.Config.GetMaxBatchSize() == 0 {
			bs = 1
		}
		req, err := mv.warmupRequest(sample, modelDir)
		if err != nil {
			return fmt.Errorf("failed to run warmup sample '%s': %w", sample.GetName(), err)
		}
		// The execution gathers batch_size copies of the sample into one
		// batch: that buffer is bounded too.
		if total := requestBytes(req); total > MaxConfigAlloc/int64(bs) {
			return fmt.Errorf("failed to run warmup sample '%s': batch_size %d of its %d bytes would take more than %d bytes, this server's limit", sample.GetName(), bs, total, MaxConfigAlloc)
		}
		for range max(sample.GetCount(), 1) {
			jobs := make([]*Job, bs)
			for i := range jobs {
				start := time.Now()
				j := &Job{ctx: ctx, mv: mv, orig: req}
				if err := mv.prepare(req, &j.req); err != nil {
					return fmt.Errorf("failed to run warmup sample '%s': %w", sample.GetName(), err)
				}
				if seq != nil {
					seq.Warmup(&j.req)
				}
				j.size, j.req.job = max(1, int64(j.req.BatchSize)), j
				jobs[i] = j
				jobs[i].times.req, jobs[i].times.queue, jobs[i].times.exec = start, start, start
			}
			// Warmup runs outside the scheduler: a decoupled model must
			// finish its warmup requests within the execution.
			errs := RunExecution(inst, mv.Name, false, mv.Stats, jobs, mv.log, &Execution{}, nil)
			for i, j := range jobs {
				if errs[i] != nil {
					return fmt.Errorf("failed to run warmup sample '%s': %w", sample.GetName(), errs[i])
				}
				mv.Stats.recordSuccess(j.times, time.Now(), j.req.BatchSize)
			}
		}
	}
	return nil
}

// warmupRequest builds one batch-1 request from a warmup sample. Inputs
// that the model does not declare are control inputs, which ONNX models
// do not have: they are left out.
func (mv *ModelVersion) warmupRequest(sample *modelconfig.ModelWarmup, modelDir string) (*InferRequest, error) {
	req := &InferRequest{ID: "warmup", ModelName: mv.Name, ModelVersion: mv.Version}
	names := make([]string, 0, len(sample.GetInputs()))
	for name := range sample.GetInputs() {
		names = append(names, name)
	}
	sort.Strings(names)
	// One random source per sample keeps random data reproducible.
	rng := rand.New(rand.NewPCG(1, uint64(len(names))))
	for _, name := range names {
		in := sample.GetInputs()[name]
		if _, ok := mv.inputs[name]; !ok {
			continue
		}
		dt := DataType(in.GetDataType())
		n := ElementCount(in.GetDims())
		for _, d := range in.GetDims() {
			if d < 0 {
				return nil, fmt.Errorf("warmup input '%s' has a variable dimension %s", name, ShapeString(in.GetDims()))
			}
		}
		// The sample's data is made here from its dims alone: dims whose
		// product overflows, or that ask for more than the bound, fail the
		// load instead of the allocation panicking or taking the machine's
		// memory.
		size, ok := ConfigBytes(in.GetDims(), dt)
		if !ok {
			return nil, fmt.Errorf("warmup input '%s' with dims %s would take more than %d bytes, this server's limit", name, ShapeString(in.GetDims()), MaxConfigAlloc)
		}
		var data []byte
		switch {
		case in.GetInputDataFile() != "":
			raw, err := warmupFile(modelDir, in.GetInputDataFile(), name, dt, n, size)
			if err != nil {
				return nil, err
			}
			data = raw
		case in.GetRandomData() && dt != TypeBytes:
			data = randomData(rng, dt, n)
		default:
			// Zeros; for STRING that is n empty elements (4-byte zero lengths).
			data = make([]byte, size)
		}
		shape := in.GetDims()
		if mv.Config.GetMaxBatchSize() > 0 {
			shape = append([]int64{1}, shape...)
		}
		req.Inputs = append(req.Inputs, &Tensor{Name: name, DataType: dt, Shape: shape, Data: data})
	}
	return req, nil
}

// warmupFile reads a sample's input_data_file (warmup/<file> in the model
// folder, as Triton's model warmup) through modelfile: it may not leave
// the model folder, must be a regular file, and is read no further than
// the input needs (size bytes; for STRING, the whole file, at most
// MaxConfigAlloc, of which the first n elements are taken).
func warmupFile(modelDir, file, input string, dt DataType, n, size int64) ([]byte, error) {
	field := fmt.Sprintf("warmup input '%s' input_data_file", input)
	name, err := modelfile.Sub(warmupFolder, file)
	if err != nil {
		return nil, FileError(field, file, err)
	}
	if dt == TypeBytes {
		raw, err := modelfile.ReadFile(modelDir, name, MaxConfigAlloc)
		if err != nil {
			return nil, FileError(field, file, err)
		}
		pos := bytesOffset(raw, n)
		if pos < 0 {
			return nil, fmt.Errorf("warmup input '%s' from '%s': file holds fewer than %d string elements", input, file, n)
		}
		return raw[:pos], nil
	}
	raw, have, err := modelfile.ReadHead(modelDir, name, size)
	if err != nil {
		return nil, FileError(field, file, err)
	}
	if have < size {
		return nil, fmt.Errorf("warmup input '%s' from '%s': file holds %d bytes, the input needs %d", input, file, have, size)
	}
	return raw, nil
}

// requestBytes is the size of req's input data.
func requestBytes(req *InferRequest) int64 {
	var n int64
	for _, t := range req.Inputs {
		n += int64(len(t.Data))
	}
	return n
}

// warmupFolder holds the warmup data files, inside the model's folder
// (triton-inference-server/core src/constants.h).
const warmupFolder = "warmup"

// randomData fills n elements with values valid for their type (no NaNs).
func randomData(rng *rand.Rand, dt DataType, n int64) []byte {
	size := dt.ByteSize()
	out := make([]byte, 0, n*int64(size))
	for range n {
		switch dt {
		case TypeFP32:
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(rng.Float32()))
		case TypeFP64:
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(rng.Float64()))
		case TypeFP16, TypeBF16:
			// Mantissa bits only: values in [0, 2^-14) / tiny, never NaN or Inf.
			out = binary.LittleEndian.AppendUint16(out, uint16(rng.IntN(1<<10)))
		case TypeBool:
			out = append(out, byte(rng.IntN(2)))
		default:
			for range size {
				out = append(out, byte(rng.Uint32()))
			}
		}
	}
	return out
}

// discard is the consumer of warmup responses.
func discard(*InferResponse, bool) error { return nil }
