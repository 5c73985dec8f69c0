package repo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackendDetectionEveryRoot: Triton's backend detection (the first
// sub-folder holds model.onnx; AutoCompleteBackendFields in
// triton-inference-server/core src/model_config_utils.cc) gives the same
// answer for a model folder on local disk and the same folder in an object
// store, where Localize has fetched no version's files yet.
func TestBackendDetectionEveryRoot(t *testing.T) {
	ctx := context.Background()
	const undetermined = "Could not determine backend for model"
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // backend, or an error substring
	}{
		{name: "noconfig", files: map[string]string{"1/model.onnx": "x"}, want: "onnxruntime"},
		// The default policy selects version 2 only: version 1, the first
		// folder, is never fetched.
		{name: "first_not_selected", files: map[string]string{"1/model.onnx": "x", "2/model.onnx": "y"}, want: "onnxruntime"},
		{name: "config_without_platform", files: map[string]string{"config.pbtxt": "max_batch_size: 0", "1/model.onnx": "x"}, want: "onnxruntime"},
		{name: "onnx_folder", files: map[string]string{"1/model.onnx/model.onnx": "x", "1/model.onnx/weights.bin": "w"}, want: "onnxruntime"},
		{name: "first_without_onnx", files: map[string]string{"1/model.bin": "x", "2/model.onnx": "y"}, want: undetermined},
		{name: "other_folder_first", files: map[string]string{".meta/notes.txt": "x", "1/model.onnx": "y"}, want: undetermined},
		{name: "nothing", files: map[string]string{"1/readme.txt": "x"}, want: undetermined},
		// An empty folder: a folder marker object in the store.
		{name: "empty_folder_first", files: map[string]string{"0/": "", "1/model.onnx": "y"}, want: undetermined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := t.TempDir()
			st := &memStore{objects: map[string][]byte{}}
			for rel, content := range tc.files {
				if strings.HasSuffix(rel, "/") {
					if err := os.MkdirAll(filepath.Join(local, tc.name, rel), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				write(t, local, map[string]string{tc.name + "/" + rel: content})
				st.objects[tc.name+"/"+rel] = []byte(content)
			}
			dir, err := OpenDir(local)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, src := range []Source{dir, OpenOptions{CacheDir: t.TempDir()}.Remote(st)} {
				d, err := src.Localize(ctx, tc.name)
				if err != nil {
					t.Fatal(err)
				}
				m, err := ReadModel(d, tc.name, nil, ReadOptions{AutoComplete: true})
				if err != nil {
					got = append(got, err.Error())
				} else {
					got = append(got, m.Config.GetBackend())
				}
			}
			if !strings.Contains(got[0], tc.want) || got[1] != got[0] {
				t.Errorf("local root: %q; remote root: %q; want %q from both", got[0], got[1], tc.want)
			}
			// The remote answer came without fetching any version.
			for _, key := range st.fetched() {
				if rel := strings.TrimPrefix(key, tc.name+"/"); isVersionFolder(strings.Split(rel, "/")[0]) {
					t.Errorf("Localize fetched %s", key)
				}
			}
		})
	}
}

// TestRemoteDetectionAfterChange: the detection follows the store, not
// what earlier copies left on disk (a folder whose objects were deleted).
func TestRemoteDetectionAfterChange(t *testing.T) {
	ctx := context.Background()
	st := &memStore{objects: map[string][]byte{"m/0extra/notes.txt": []byte("x"), "m/1/model.onnx": []byte("y")}}
	r := OpenOptions{CacheDir: t.TempDir()}.Remote(st)
	dir, err := r.Localize(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadModel(dir, "m", nil, ReadOptions{AutoComplete: true}); err == nil || !strings.Contains(err.Error(), "Could not determine backend") {
		t.Fatalf("first folder without model.onnx: %v", err)
	}
	st.mu.Lock()
	delete(st.objects, "m/0extra/notes.txt")
	st.mu.Unlock()
	if dir, err = r.Localize(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	m, err := ReadModel(dir, "m", nil, ReadOptions{AutoComplete: true})
	if err != nil || m.Config.GetBackend() != "onnxruntime" {
		t.Fatalf("after the folder left the store: %v %v", m, err)
	}
	// Nothing of version 1 was fetched to find that out.
	if _, err := os.Stat(filepath.Join(dir, "1", "model.onnx")); !os.IsNotExist(err) {
		t.Fatalf("version 1 fetched by Localize: %v", err)
	}
}
