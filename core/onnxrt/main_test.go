package onnxrt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

// testBackend is shared by the tests: ORT has one environment per process.
var testBackend *Backend

func TestMain(m *testing.M) {
	b, err := New(Options{DefaultMaxBatchSize: DefaultMaxBatchSize})
	if err != nil {
		// No skipping: a green run without ORT would prove nothing.
		fmt.Fprintf(os.Stderr, "core/onnxrt tests need ONNX Runtime (run `make ort`): %v\n", err)
		os.Exit(1)
	}
	testBackend = b
	code := m.Run()
	if n := liveValues.Load(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "%d ORT values were never destroyed\n", n)
		code = 1
	}
	if err := b.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// version writes model into a fresh repository as <model>/1/model.onnx.
func version(t testing.TB, name string, model []byte) core.VersionFiles {
	t.Helper()
	root := t.TempDir()
	v := core.VersionFiles{
		ModelName: name, Version: 1,
		ModelDir: filepath.Join(root, name), VersionDir: filepath.Join(root, name, "1"),
	}
	if err := onnxbuild.WriteFile(filepath.Join(v.VersionDir, "model.onnx"), model); err != nil {
		t.Fatal(err)
	}
	return v
}

// config parses config.pbtxt text.
func config(t testing.TB, text string) *modelconfig.ModelConfig {
	t.Helper()
	cfg, err := modelconfig.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config %q: %v", text, err)
	}
	return cfg
}

// load creates a KIND_CPU instance, failing the test on error.
func load(t testing.TB, v core.VersionFiles, cfg *modelconfig.ModelConfig) core.BatchInstance {
	t.Helper()
	in, err := loadKind(v, cfg, modelconfig.ModelInstanceGroup_KIND_CPU)
	if err != nil {
		t.Fatalf("load %s: %v", v.ModelName, err)
	}
	t.Cleanup(func() {
		if err := in.Close(); err != nil {
			t.Error(err)
		}
	})
	return in
}

func loadKind(v core.VersionFiles, cfg *modelconfig.ModelConfig, kind modelconfig.ModelInstanceGroup_Kind) (core.BatchInstance, error) {
	return testBackend.NewBatchInstance(context.Background(), core.InstanceSpec{
		VersionFiles: v, Name: v.ModelName + "_0", Kind: kind, Config: cfg,
	})
}

// tensor encodes vals as a tensor of elem.
func tensor(t testing.TB, name string, elem onnxbuild.DataType, shape []int64, vals []float64) *core.Tensor {
	t.Helper()
	data, err := onnxbuild.Encode(elem, vals)
	if err != nil {
		t.Fatal(err)
	}
	return &core.Tensor{Name: name, DataType: coreType(elem), Shape: shape, Data: data}
}

// coreType maps an onnxbuild element type to core's (onnxbuild numbers
// types as ONNX does, like ORT).
func coreType(e onnxbuild.DataType) core.DataType {
	return fromONNX(ort.TensorElementDataType(e))
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
