package onnxrt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
)

// defaultModelFile is used when default_model_filename is empty, and is the
// fixed name inside a model directory.
const defaultModelFile = "model.onnx"

// modelPath resolves a version's ONNX file as Triton does
// (triton-inference-server/onnxruntime_backend src/onnxruntime.cc): the
// configured file name or model.onnx, and for a directory of that name its
// inner model.onnx. The name must lie inside the version folder
// (modelfile.Locate: links are followed, as Triton does, and a load
// override's own names were confined after links too by the core) and end
// at a regular file: a default_model_filename such as "../../x" fails the
// load instead of ONNX Runtime opening whatever it names.
func modelPath(v core.VersionFiles, cfg *modelconfig.ModelConfig) (string, error) {
	name := cfg.GetDefaultModelFilename()
	if name == "" {
		name = defaultModelFile
	}
	if _, st, err := modelfile.Locate(v.VersionDir, name); err == nil && st.IsDir() {
		name = path.Join(name, defaultModelFile)
	}
	p, err := modelfile.LocateFile(v.VersionDir, name)
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", core.Errorf(core.CodeUnavailable, "unable to find '%s' for model instance '%s'", filepath.Join(v.VersionDir, name), modelName(v, cfg))
	case errors.Is(err, modelfile.ErrOutside), errors.Is(err, modelfile.ErrNotRegular):
		return "", core.Errorf(core.CodeInvalidArg, "%v", &modelfile.FieldError{Field: fmt.Sprintf("model '%s' default_model_filename", modelName(v, cfg)), Path: name, Err: err})
	}
	return "", core.Errorf(core.CodeUnavailable, "unable to read '%s' for model instance '%s': %v", filepath.Join(v.VersionDir, name), modelName(v, cfg), err)
}

func modelName(v core.VersionFiles, cfg *modelconfig.ModelConfig) string {
	if v.ModelName != "" {
		return v.ModelName
	}
	return cfg.GetName()
}

// graphInfo is what ORT reports about a model's graph inputs and outputs,
// in declaration order.
type graphInfo struct {
	inputs, outputs []ort.InputOutputInfo
}

func (g *graphInfo) input(name string) *ort.InputOutputInfo  { return find(g.inputs, name) }
func (g *graphInfo) output(name string) *ort.InputOutputInfo { return find(g.outputs, name) }

func find(ios []ort.InputOutputInfo, name string) *ort.InputOutputInfo {
	for i := range ios {
		if ios[i].Name == name {
			return &ios[i]
		}
	}
	return nil
}

// infoCache remembers graph I/O per model file, because ORT can only report
// it by loading a whole session: without the cache, auto-complete and every
// instance of a model would each pay one extra load. Instances created at
// once wait for the one load under way instead of each starting their own:
// each costs the model's weights in memory, which ORT's allocator keeps.
type infoCache struct {
	mu      sync.Mutex
	entries map[infoKey]*infoEntry
}

type infoKey struct {
	path  string
	size  int64
	mtime time.Time
}

// infoEntry is one file's graph I/O, or the load of it under way.
type infoEntry struct {
	ready chan struct{} // closed once g or err is set
	g     *graphInfo
	err   error
}

// maxInfoEntries bounds the cache; reloaded files leave stale keys behind.
const maxInfoEntries = 256

// load returns the graph I/O of the model at path, loading it with the
// model's custom-op libraries (needed to parse graphs that use them).
func (c *infoCache) load(path string, cfg *modelconfig.ModelConfig) (*graphInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	key := infoKey{path, st.Size(), st.ModTime()}
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		if c.entries == nil || len(c.entries) >= maxInfoEntries {
			c.entries = make(map[infoKey]*infoEntry)
		}
		e = &infoEntry{ready: make(chan struct{})}
		c.entries[key] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.ready
		return e.g, e.err
	}
	e.g, e.err = readGraphInfo(path, cfg)
	if e.err != nil {
		c.mu.Lock()
		if c.entries[key] == e {
			delete(c.entries, key) // a later load tries again
		}
		c.mu.Unlock()
	}
	close(e.ready)
	return e.g, e.err
}

func readGraphInfo(path string, cfg *modelconfig.ModelConfig) (*graphInfo, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	defer so.Destroy()
	// A throw-away session: no optimisation passes and no thread pool worth
	// the name, just enough to read the graph signature.
	if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	if err := so.SetIntraOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	if err := registerCustomOps(so, cfg); err != nil {
		return nil, err
	}
	in, out, err := ort.GetInputOutputInfoWithOptions(path, so)
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArg, "load %s: %v", path, err)
	}
	g := &graphInfo{inputs: in, outputs: out}
	for _, ios := range [][]ort.InputOutputInfo{in, out} {
		for _, io := range ios {
			if io.OrtValueType != ort.ONNXTypeTensor {
				return nil, core.Errorf(core.CodeUnsupported,
					"Unsupported ONNX Type '%s' for I/O '%s', expected 'ONNX_TYPE_TENSOR'.", io.OrtValueType, io.Name)
			}
		}
	}
	return g, nil
}
