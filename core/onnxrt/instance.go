package onnxrt

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// instance is one ORT session serving one model instance.
type instance struct {
	name, model string
	log         *slog.Logger
	maxBatch    int32

	inputs    []inputSlot // in session input order
	inputIdx  map[string]int
	outputs   []outputSlot // in session output order
	outputIdx map[string]int

	mu     sync.Mutex // Execute is not concurrent per the contract; Close may race it
	closed bool
	// session may be shared with the model's other instances (share.go):
	// dropSession gives this instance's hold back.
	session     *ort.DynamicAdvancedSession
	dropSession func()
	runOpts     *ort.RunOptions
	// watch stops a run whose context ends once it outlasts watchAfter.
	watch   runWatch
	scratch runScratch
	cache   valueCache
	// For runRaw: the session's names as C strings, and each output's
	// element size (0 for STRING).
	inNames, outNames cNames
	elemSizes         []int
	// gpu: a KIND_GPU instance on GPU device, whose CUDA provider reads
	// inputs in that GPU's memory in place.
	gpu    bool
	device int32
}

// inputSlot describes one session input.
type inputSlot struct {
	name   string
	dtype  core.DataType
	onnx   ort.TensorElementDataType
	scalar bool // rank-0 graph tensor: the request's [1] is passed as a scalar
}

// outputSlot describes one session output.
type outputSlot struct {
	name  string
	dtype core.DataType
	onnx  ort.TensorElementDataType
	dims  []int64 // graph dims, -1 where unknown
	// batched: dims[0] is Triton's batch dimension, so it equals the batch
	// size of the inputs.
	batched bool
	// scalarShape is reported for a rank-0 graph output: Triton uses the
	// configured dims instead of the empty shape.
	scalarShape []int64
	// half: FP16/BF16, which onnxruntime_go cannot take back from ORT
	// (see execute.go).
	half bool
}

var _ core.BatchInstance = (*instance)(nil)

// NewInstance loads one instance of a model version, served through the
// core's concatenating adapter: ONNX Runtime runs one tensor per input for
// the whole batch.
func (b *Backend) NewInstance(ctx context.Context, spec core.InstanceSpec) (core.Instance, error) {
	in, err := b.NewBatchInstance(ctx, spec)
	if err != nil {
		return nil, err
	}
	return core.Concatenated(spec.Config, in), nil
}

// NewBatchInstance loads one instance of a model version: it builds session
// options from the config, checks the config against the graph (as
// triton-inference-server/onnxruntime_backend src/onnxruntime.cc does),
// registers the execution providers of the instance kind and opens
// the ORT session. KIND_CPU and KIND_MODEL run on the CPU; KIND_GPU adds the
// CUDA provider (after any TensorRT one) on spec.DeviceID.
func (b *Backend) NewBatchInstance(ctx context.Context, spec core.InstanceSpec) (core.BatchInstance, error) {
	release, err := b.hold(ctx)
	if err != nil {
		return nil, err
	}
	loaded := false
	defer func() {
		if !loaded {
			release() // a loaded instance keeps the hold until Close
		}
	}()
	cfg := spec.Config
	model := modelName(spec.VersionFiles, cfg)
	if cfg.GetModelTransactionPolicy().GetDecoupled() {
		// A decoupled model would pass validation and then answer every
		// request with the one-response path; refuse it at load instead.
		return nil, core.Errorf(core.CodeInvalidArg, "unable to load model '%s', the onnxruntime backend does not support model_transaction_policy { decoupled: true }: ONNX Runtime returns exactly one response per request", model)
	}
	path, err := modelPath(spec.VersionFiles, cfg)
	if err != nil {
		return nil, err
	}
	plan, err := planProviders(cfg, spec.Kind, spec.DeviceID)
	if err != nil {
		return nil, err
	}
	g, err := b.infos.load(path, cfg)
	if err != nil {
		return nil, err
	}
	if err := validate(model, cfg, g); err != nil {
		return nil, err
	}
	in, err := newInstance(spec.Name, model, cfg, g)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load instance %s: %w", spec.Name, err)
	}

	inNames := make([]string, len(in.inputs))
	for i, s := range in.inputs {
		inNames[i] = s.name
	}
	outNames := make([]string, len(in.outputs))
	for i, s := range in.outputs {
		outNames[i] = s.name
	}
	share, _, err := boolParam(cfg, shareParam)
	if err != nil {
		return nil, err
	}
	in.log = b.log.With("model", model, "instance", spec.Name)
	if in.runOpts, err = newRunOptions(cfg); err != nil {
		return nil, fmt.Errorf("load instance %s: %w", spec.Name, err)
	}
	open := func() (*ort.DynamicAdvancedSession, error) {
		return b.openSession(path, cfg, plan, spec.Name, inNames, outNames)
	}
	if share {
		key := sessionKey{load: cfg, path: path, kind: spec.Kind, device: spec.DeviceID}
		in.session, in.dropSession, err = b.sessions.acquire(ctx, key, spec.Name, in.log, open)
	} else if in.session, err = open(); err == nil {
		b.sessions.opened()
		s, log := in.session, in.log
		in.dropSession = func() { b.sessions.closed(s, log) }
	}
	if err != nil {
		in.runOpts.Destroy()
		return nil, err
	}
	in.inNames, in.outNames = newCNames(inNames), newCNames(outNames)
	in.gpu, in.device = spec.Kind == modelconfig.ModelInstanceGroup_KIND_GPU, spec.DeviceID
	loaded = true
	in.log.Info("instance loaded", "file", path, "kind", spec.Kind.String(), "device", spec.DeviceID, "shared_session", share)
	return in, nil
}

// openSession builds an instance's session options (the config's, then the
// providers of its kind and device) and opens an ORT session on path.
func (b *Backend) openSession(path string, cfg *modelconfig.ModelConfig, plan *providerPlan, instance string, inNames, outNames []string) (*ort.DynamicAdvancedSession, error) {
	so, err := b.newSessionOptions(cfg)
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	if err := plan.appendProviders(so, instance); err != nil {
		return nil, err
	}
	s, err := ort.NewDynamicAdvancedSession(path, inNames, outNames, so)
	trimHeap() // what ORT freed once the session was built (heap.go)
	if err != nil {
		return nil, core.Errorf(core.CodeInternal, "load %s for instance '%s': onnx runtime error: %v", path, instance, err)
	}
	return s, nil
}

// newRunOptions makes the per-instance run options; the one run-level
// config key Triton honours is passed through.
func newRunOptions(cfg *modelconfig.ModelConfig) (*ort.RunOptions, error) {
	ro, err := ort.NewRunOptions()
	if err != nil {
		return nil, fmt.Errorf("run options: %w", err)
	}
	const shrink = "memory.enable_memory_arena_shrinkage"
	if v, ok := param(cfg, shrink); ok {
		if err := addRunConfigEntry(ro, shrink, v); err != nil {
			ro.Destroy()
			return nil, core.Errorf(core.CodeInvalidArg, "%s=%q: %v", shrink, v, err)
		}
	}
	return ro, nil
}

// newInstance lays out the session's inputs and outputs: the config's
// inputs in config order, then batch inputs, sequence controls and state
// inputs (all fed by the scheduler by name); the config's outputs, then
// state outputs.
func newInstance(name, model string, cfg *modelconfig.ModelConfig, g *graphInfo) (*instance, error) {
	in := &instance{
		name: name, model: model, maxBatch: cfg.GetMaxBatchSize(),
		inputIdx: map[string]int{}, outputIdx: map[string]int{},
	}
	addInput := func(n string) error {
		if _, dup := in.inputIdx[n]; dup {
			return nil
		}
		info := g.input(n)
		if info == nil {
			return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', model does not provide input '%s'", model, n)
		}
		s := inputSlot{name: n, dtype: fromONNX(info.DataType), onnx: info.DataType, scalar: len(info.Dimensions) == 0}
		if s.scalar && !scalarCapable(s.dtype) {
			return core.Errorf(core.CodeUnsupported, "unable to load model '%s', scalar %s input '%s' is not supported", model, s.dtype, n)
		}
		in.inputIdx[n] = len(in.inputs)
		in.inputs = append(in.inputs, s)
		return nil
	}
	for _, i := range cfg.GetInput() {
		if err := addInput(i.GetName()); err != nil {
			return nil, err
		}
	}
	for _, bi := range cfg.GetBatchInput() {
		for _, t := range bi.GetTargetName() {
			if err := addInput(t); err != nil {
				return nil, err
			}
		}
	}
	seq := cfg.GetSequenceBatching()
	for _, ci := range seq.GetControlInput() {
		if err := addInput(ci.GetName()); err != nil {
			return nil, err
		}
	}
	for _, st := range seq.GetState() {
		if err := addInput(st.GetInputName()); err != nil {
			return nil, err
		}
	}

	batchOutputs := map[string]bool{}
	for _, bo := range cfg.GetBatchOutput() {
		for _, t := range bo.GetTargetName() {
			batchOutputs[t] = true
		}
	}
	addOutput := func(n string, configDims []int64) error {
		if _, dup := in.outputIdx[n]; dup {
			return nil
		}
		info := g.output(n)
		if info == nil {
			return core.Errorf(core.CodeInvalidArg, "unable to load model '%s', model does not provide output '%s'", model, n)
		}
		s := outputSlot{
			name: n, dtype: fromONNX(info.DataType), onnx: info.DataType,
			dims:    append([]int64(nil), info.Dimensions...),
			batched: in.maxBatch > 0 && !batchOutputs[n] && len(info.Dimensions) > 0 && info.Dimensions[0] == -1,
		}
		if len(s.dims) == 0 {
			s.scalarShape = append([]int64{}, configDims...)
			if !scalarCapable(s.dtype) && s.dtype != core.TypeBytes {
				return core.Errorf(core.CodeUnsupported, "unable to load model '%s', scalar %s output '%s' is not supported", model, s.dtype, n)
			}
		}
		s.half = s.dtype == core.TypeFP16 || s.dtype == core.TypeBF16
		in.outputIdx[n] = len(in.outputs)
		in.outputs = append(in.outputs, s)
		in.elemSizes = append(in.elemSizes, s.dtype.ByteSize())
		return nil
	}
	for _, o := range cfg.GetOutput() {
		dims := o.GetDims()
		if o.GetReshape() != nil {
			dims = o.GetReshape().GetShape()
		}
		if err := addOutput(o.GetName(), dims); err != nil {
			return nil, err
		}
	}
	for _, st := range seq.GetState() {
		if err := addOutput(st.GetOutputName(), st.GetDims()); err != nil {
			return nil, err
		}
	}
	in.cache = valueCache{inputs: make([]slotCache, len(in.inputs)), outputs: make([]slotCache, len(in.outputs))}
	return in, nil
}

// shapeKnown reports whether the output's shape follows from the graph and
// the batch size alone.
func (s *outputSlot) shapeKnown() bool {
	for i, d := range s.dims {
		if d < 0 && !(i == 0 && s.batched) {
			return false
		}
	}
	return true
}

// Close gives the session back (destroying it unless other instances
// share it). It waits for a running Execute.
func (in *instance) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil
	}
	in.closed = true
	in.watch.close()
	in.cache.free()
	in.dropSession()
	if err := in.runOpts.Destroy(); err != nil {
		in.log.Warn("destroy run options", "err", err)
	}
	in.inNames.free()
	in.outNames.free()
	if err := releaseEnv(); err != nil {
		return fmt.Errorf("close instance %s: %w", in.name, err)
	}
	return nil
}
