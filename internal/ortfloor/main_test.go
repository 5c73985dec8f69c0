package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/modroot"
)

// TestModelFiles: each model folder's highest numeric version holding a
// model.onnx, and nothing else.
func TestModelFiles(t *testing.T) {
	repo := t.TempDir()
	for _, f := range []string{"a/1/model.onnx", "a/3/model.onnx", "a/5/config.pbtxt", "b/x/model.onnx", "c/2/model.onnx", "d/config.pbtxt"} {
		p := filepath.Join(repo, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := modelFiles(repo)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(repo, "a/3/model.onnx"), filepath.Join(repo, "c/2/model.onnx")}
	if !slices.Equal(got, want) {
		t.Errorf("modelFiles = %q, want %q", got, want)
	}
	if _, err := modelFiles(t.TempDir()); err == nil {
		t.Error("an empty repository gave no error")
	}
}

// TestOpenExamples creates the example repository's sessions with the real
// ONNX Runtime: two per model, as BenchmarkFootprint's floor does.
func TestOpenExamples(t *testing.T) {
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		t.Fatalf("%v (run `make ort` or set ORT_LIB_PATH)", err)
	}
	root, err := modroot.Dir()
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(root, "examples", "model_repository")
	files, err := modelFiles(repo)
	if err != nil || len(files) == 0 {
		t.Fatalf("the example repository's ONNX models: %q, %v", files, err)
	}
	sessions, err := open(lib, repo, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range sessions {
			_ = s.Destroy()
		}
		_ = ort.DestroyEnvironment()
	}()
	if len(sessions) != 2*len(files) {
		t.Errorf("%d sessions, want %d (%d models, two each)", len(sessions), 2*len(files), len(files))
	}
}
