package servertest

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
)

// A model loaded from the load API's files keeps serving after its
// temporary folder is gone: ONNX Runtime holds what it read. (The core
// keeps the folder until the version is closed; the test removes it.)
func TestOverrideModelServesWithoutItsFiles(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	srv := Start(t, Options{Mode: core.ModeExplicit})
	ov := &core.LoadOverride{
		ConfigJSON: `{"platform":"onnxruntime_onnx","max_batch_size":8,
			"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[16]},{"name":"INPUT1","data_type":"TYPE_INT32","dims":[16]}],
			"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[16]},{"name":"OUTPUT1","data_type":"TYPE_INT32","dims":[16]}]}`,
		Files: map[string][]byte{"1/model.onnx": onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	}
	Must(t, srv.Load(context.Background(), "simple", ov))
	// The folder lives as long as the version; without it, the version
	// still serves.
	left, _ := filepath.Glob(filepath.Join(tmp, "inferd-*", "model-simple-*"))
	if len(left) != 1 {
		t.Fatalf("override folders while loaded: %v", left)
	}
	Must(t, os.RemoveAll(left[0]))
	in := make([]byte, 0, 64)
	for i := range 16 {
		in = binary.LittleEndian.AppendUint32(in, uint32(i))
	}
	resp, err := srv.Infer(context.Background(), &core.InferRequest{ModelName: "simple", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{
		{Name: "INPUT0", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: in},
		{Name: "INPUT1", DataType: core.TypeInt32, Shape: []int64{1, 16}, Data: in},
	}})
	Must(t, err)
	for _, out := range resp.Outputs {
		if out.Name == "OUTPUT0" && binary.LittleEndian.Uint32(out.Data[4*15:]) != 30 {
			t.Fatalf("OUTPUT0[15] = %d, want 30", binary.LittleEndian.Uint32(out.Data[4*15:]))
		}
	}
	// The process's own folder (repo/tempdir) may stay, empty.
	inside, _ := filepath.Glob(filepath.Join(tmp, "*", "*"))
	if entries, _ := os.ReadDir(tmp); len(entries) > 1 || len(inside) != 0 {
		t.Fatalf("temporary folder not empty: %v %v", entries, inside)
	}
}
