package examples

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/internal/onnxbuild/orttest"
)

// TestCheckedInFilesUpToDate keeps the generated files identical to what the
// generator writes now, and the directories of generated models free of
// stray files.
func TestCheckedInFilesUpToDate(t *testing.T) {
	files, err := Repository()
	if err != nil {
		t.Fatal(err)
	}
	const fix = "run `go generate ./examples` and commit the result"
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
		got, err := os.ReadFile(filepath.FromSlash(f.Path))
		if err != nil {
			t.Errorf("%v; %s", err, fix)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s differs from the generator's output; %s", f.Path, fix)
		}
	}
	for _, m := range specs {
		err := filepath.WalkDir(filepath.Join(m.repo, m.name), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !want[filepath.ToSlash(p)] {
				t.Errorf("%s is not generated; delete it or add it to the generator", p)
			}
			return nil
		})
		if err != nil {
			t.Errorf("walk %s: %v", m.name, err)
		}
	}
}

// TestSimpleConfig pins "simple" to Triton's quickstart config, which the
// upstream repository ships with this exact body.
func TestSimpleConfig(t *testing.T) {
	const upstream = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
`
	i := slices.IndexFunc(specs, func(m modelSpec) bool { return m.name == "simple" })
	if i < 0 {
		t.Fatal("no simple model")
	}
	cfg, err := specs[i].config()
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(cfg, "\n") // drop the generated-file comment
	if body != upstream {
		t.Errorf("simple config:\n%s\nwant:\n%s", body, upstream)
	}
}

// TestModelsMatchConfigs loads each checked-in model.onnx into ONNX Runtime
// and checks its inputs and outputs against the config: same names in the
// same order, same types, and config dims behind a symbolic batch dimension.
func TestModelsMatchConfigs(t *testing.T) {
	orttest.Init(t)
	for _, m := range specs {
		t.Run(m.name, func(t *testing.T) {
			ins, outs, err := ort.GetInputOutputInfo(filepath.Join(m.repo, m.name, "1", "model.onnx"))
			if err != nil {
				t.Fatalf("ORT rejected the model: %v", err)
			}
			compare := func(kind string, got []ort.InputOutputInfo, want []tensorSpec) {
				if len(got) != len(want) {
					t.Fatalf("%d %ss, want %d", len(got), kind, len(want))
				}
				for i, w := range want {
					dims := w.dims
					if m.maxBatchSize > 0 {
						dims = append([]int64{-1}, dims...)
					}
					g := got[i]
					if g.Name != w.name || g.DataType != ort.TensorElementDataType(w.elem) || !slices.Equal(g.Dimensions, dims) {
						t.Errorf("%s %d = %v; want %q %v %v", kind, i, &g, w.name, w.elem, dims)
					}
				}
			}
			compare("input", ins, m.inputs)
			compare("output", outs, m.outputs)
		})
	}
}
