// Command checkrepo writes the model repository that deploy/gpu/check.sh
// serves on a GPU host, built from onnxbuild's models so that the bundle
// needs neither Python's onnx package nor a download:
//
//	simple      Triton's quickstart add/sub (INT32 [16]), KIND_CPU
//	simple_gpu  the same model, KIND_GPU
//	simple_trt  the same model, KIND_GPU with the TensorRT accelerator
//	mlp_gpu     BENCHMARKS.md's compute-bound MLP (FP32 [1024], four
//	            1024x1024 layers), dynamic batching, KIND_GPU
//	mlp_cpu     the same, on two CPU instances
//	id16m_gpu   a 16 MiB FP32 identity ([4194304], no batching), KIND_GPU,
//	            for CUDA shared memory's figure (cudashm_bench.py)
//	id16m_cpu   the same, KIND_CPU
//
// mlp_cpu's and id16m_cpu's model files are hard links to the GPU ones',
// which tar stores once.
//
//	go run ./deploy/gpu/checkrepo OUTDIR
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/inferd/inferd/internal/onnxbuild"
)

const simpleIO = `max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
`

const mlpIO = `max_batch_size: 64
input [ { name: "x" data_type: TYPE_FP32 dims: [ 1024 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1024 ] } ]
dynamic_batching { max_queue_delay_microseconds: 200 }
`

const id16mIO = `max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4194304 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4194304 ] } ]
`

const (
	gpuGroup = "instance_group [ { kind: KIND_GPU count: 1 } ]\n"
	trt      = `optimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }` + "\n"
)

// model is one model folder: its config after the name and platform lines,
// and the model file it shares with the model named in linkTo, if any.
type model struct {
	name, config string
	onnx         func() ([]byte, error)
	linkTo       string
}

func models() []model {
	simple := func() ([]byte, error) { return onnxbuild.AddSub(onnxbuild.Int32, -1, 16) }
	return []model{
		{name: "simple", config: simpleIO + "instance_group [ { kind: KIND_CPU count: 1 } ]\n", onnx: simple},
		{name: "simple_gpu", config: simpleIO + gpuGroup, onnx: simple},
		{name: "simple_trt", config: simpleIO + gpuGroup + trt, onnx: simple},
		{name: "mlp_gpu", config: mlpIO + gpuGroup, onnx: func() ([]byte, error) { return onnxbuild.MLP(1024, 1024, 4) }},
		{name: "mlp_cpu", config: mlpIO + "instance_group [ { kind: KIND_CPU count: 2 } ]\n", linkTo: "mlp_gpu"},
		{name: "id16m_gpu", config: id16mIO + gpuGroup, onnx: func() ([]byte, error) { return onnxbuild.Identity(onnxbuild.Float, 1<<22) }},
		{name: "id16m_cpu", config: id16mIO + "instance_group [ { kind: KIND_CPU count: 1 } ]\n", linkTo: "id16m_gpu"},
	}
}

func write(root string) error {
	for _, m := range models() {
		dir := filepath.Join(root, m.name, "1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		cfg := fmt.Sprintf("name: %q\nplatform: \"onnxruntime_onnx\"\n%s", m.name, m.config)
		if err := os.WriteFile(filepath.Join(root, m.name, "config.pbtxt"), []byte(cfg), 0o644); err != nil {
			return err
		}
		file := filepath.Join(dir, "model.onnx")
		if m.linkTo != "" {
			if err := os.Link(filepath.Join(root, m.linkTo, "1", "model.onnx"), file); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			continue
		}
		b, err := m.onnx()
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: checkrepo OUTDIR")
		os.Exit(2)
	}
	if _, err := os.Stat(os.Args[1]); !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "checkrepo: %s exists; give a new folder\n", os.Args[1])
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "checkrepo:", err)
		os.Exit(1)
	}
}
