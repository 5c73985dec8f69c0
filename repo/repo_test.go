package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(rel, "/") {
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const onnxConfig = `platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] label_filename: "labels.txt" } ]
`

func TestReadModel(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"m/config.pbtxt":           onnxConfig,
		"m/configs/alt.pbtxt":      strings.Replace(onnxConfig, "max_batch_size: 4", "max_batch_size: 2", 1),
		"m/labels.txt":             "a\nb\n",
		"m/1/model.onnx":           "x",
		"m/0/model.onnx":           "x",
		"m/007/model.onnx":         "x", // leading zero: skipped
		"m/warmup/data":            "x",
		"m/configs/other.pbtxt":    "x",
		"m/1abc/model.onnx":        "x", // not a number: skipped
		"m/notes.txt":              "plain files are never versions",
		"noconfig/1/model.onnx":    "x",
		"escape/config.pbtxt":      strings.Replace(onnxConfig, "labels.txt", "../secret", 1),
		"escape/1/model.onnx":      "x",
		"badname/config.pbtxt":     `name: "other"` + "\n" + onnxConfig,
		"custom_file/config.pbtxt": `default_model_filename: "x.onnx"`,
	})
	t.Run("versions and labels", func(t *testing.T) {
		m, err := ReadModel(filepath.Join(root, "m"), "m", nil, ReadOptions{AutoComplete: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(m.Versions, []int64{0, 1}) {
			t.Errorf("versions %v, want [0 1]", m.Versions)
		}
		if m.Config.GetMaxBatchSize() != 4 || m.Config.GetName() != "m" || m.Config.GetBackend() != "onnxruntime" {
			t.Errorf("config %v", m.Config)
		}
		labels, err := m.Labels()
		if err != nil || !slices.Equal(labels["y"], []string{"a", "b"}) {
			t.Errorf("labels %v %v", labels, err)
		}
	})
	t.Run("--model-config-name", func(t *testing.T) {
		m, err := ReadModel(filepath.Join(root, "m"), "m", nil, ReadOptions{ConfigName: "alt", AutoComplete: true})
		if err != nil || m.Config.GetMaxBatchSize() != 2 {
			t.Fatalf("%v %v", m, err)
		}
		m, err = ReadModel(filepath.Join(root, "m"), "m", nil, ReadOptions{ConfigName: "absent", AutoComplete: true})
		if err != nil || m.Config.GetMaxBatchSize() != 4 {
			t.Fatalf("fallback to config.pbtxt: %v %v", m, err)
		}
	})
	t.Run("no config with auto-complete", func(t *testing.T) {
		m, err := ReadModel(filepath.Join(root, "noconfig"), "noconfig", nil, ReadOptions{AutoComplete: true})
		if err != nil || m.HasConfigFile || m.Config.GetBackend() != "onnxruntime" || m.Config.GetPlatform() != "onnxruntime_onnx" {
			t.Fatalf("%v %v", m, err)
		}
	})
	t.Run("no config without auto-complete", func(t *testing.T) {
		_, err := ReadModel(filepath.Join(root, "noconfig"), "noconfig", nil, ReadOptions{})
		if !errors.Is(err, ErrNoConfig) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("label file escaping the model folder", func(t *testing.T) {
		m, err := ReadModel(filepath.Join(root, "escape"), "escape", nil, ReadOptions{AutoComplete: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Labels(); err == nil || !strings.Contains(err.Error(), "names a path outside the model directory") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("name differs from folder", func(t *testing.T) {
		if _, err := ReadModel(filepath.Join(root, "badname"), "badname", nil, ReadOptions{AutoComplete: true}); err == nil {
			t.Fatal("want an error")
		}
	})
	t.Run("default_model_filename without platform", func(t *testing.T) {
		_, err := ReadModel(filepath.Join(root, "custom_file"), "custom_file", nil, ReadOptions{AutoComplete: true})
		if err == nil || !strings.Contains(err.Error(), "unexpected platform type") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSet(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write(t, a, map[string]string{"one/1/": "", "dup/1/": "", ".hidden/1/": "", "file.txt": "root files are ignored"})
	write(t, b, map[string]string{"two/1/": "", "dup/1/": ""})
	set, err := OpenAll(context.Background(), []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	models, dups, err := set.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range models {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{".hidden", "one", "two"}) {
		t.Errorf("models %v", names)
	}
	if len(dups["dup"]) != 2 {
		t.Errorf("dups %v", dups)
	}
	if _, err := set.Find(context.Background(), "dup"); err == nil || !strings.Contains(err.Error(), "more than one repository") {
		t.Errorf("Find(dup) = %v", err)
	}
	if _, err := set.Find(context.Background(), "absent"); err == nil {
		t.Error("Find(absent) succeeded")
	}
	if _, err := OpenAll(context.Background(), []string{filepath.Join(a, "file.txt")}); err == nil || !strings.Contains(err.Error(), "not a valid directory") {
		t.Errorf("a file as root: %v", err)
	}
	if _, err := OpenAll(context.Background(), []string{"s3://bucket/models"}); err == nil {
		t.Error("s3:// accepted before it is supported")
	}
}
