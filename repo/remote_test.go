package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is an in-memory Store for the Remote logic; the S3 and GCS
// stores are tested against real-protocol servers in their packages.
type memStore struct {
	mu        sync.Mutex
	objects   map[string][]byte
	corrupt   map[string]bool
	downloads []string
}

func (m *memStore) String() string { return "mem://bucket" }

func (m *memStore) List(_ context.Context, prefix string) ([]Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Object
	for k, v := range m.objects {
		if strings.HasPrefix(k, prefix) {
			sum := sha256.Sum256(v)
			out = append(out, Object{Key: k, Size: int64(len(v)), Version: hex.EncodeToString(sum[:8]), Modified: time.Unix(1, 0)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *memStore) Download(_ context.Context, key, path string) (Object, error) {
	m.mu.Lock()
	data, ok := m.objects[key]
	bad := m.corrupt[key]
	m.downloads = append(m.downloads, key)
	m.mu.Unlock()
	if !ok {
		return Object{}, fmt.Errorf("no object %s", key)
	}
	if bad {
		return Object{}, fmt.Errorf("%s: %w", key, ErrIntegrity)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return Object{}, err
	}
	return Object{Key: key}, os.WriteFile(path, data, 0o644)
}

func (m *memStore) fetched() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.downloads)
	m.downloads = nil
	sort.Strings(out)
	return out
}

func TestRemoteLocalize(t *testing.T) {
	ctx := context.Background()
	st := &memStore{objects: map[string][]byte{
		"a/config.pbtxt": []byte("backend: \"onnxruntime\""),
		"a/1/model.onnx": []byte("v1"),
		"a/2/model.onnx": []byte("v2"),
		"b/1/model.onnx": []byte("b"),
		"toplevel.txt":   []byte("ignored: not in a folder"),
		"c/labels/x.txt": []byte("x"),
	}}
	r := OpenOptions{CacheDir: t.TempDir()}.Remote(st)
	models, err := r.Models(ctx)
	if err != nil || !slices.Equal(models, []string{"a", "b", "c"}) {
		t.Fatalf("models %v %v", models, err)
	}
	dir, err := r.Localize(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Localize brings the configuration and empty version folders only.
	if got := st.fetched(); !slices.Equal(got, []string{"a/config.pbtxt"}) {
		t.Fatalf("Localize fetched %v", got)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "1")); err != nil || len(entries) != 0 {
		t.Fatalf("version folder 1: %v %v, want it empty", entries, err)
	}
	// Only the selected version's files are fetched.
	if err := r.LocalizeVersions(ctx, "a", []int64{2}); err != nil {
		t.Fatal(err)
	}
	if got := st.fetched(); !slices.Equal(got, []string{"a/2/model.onnx"}) {
		t.Fatalf("selecting version 2 fetched %v", got)
	}
	if err := r.LocalizeVersions(ctx, "a", []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if got := st.fetched(); !slices.Equal(got, []string{"a/1/model.onnx"}) {
		t.Fatalf("adding version 1 fetched %v, want only its file", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "2", "model.onnx")); string(b) != "v2" {
		t.Fatalf("local copy holds %q", b)
	}

	// Unchanged objects are not fetched again; changed ones are; removed
	// ones disappear from the copy.
	st.mu.Lock()
	st.objects["a/2/model.onnx"] = []byte("v2 changed")
	delete(st.objects, "a/1/model.onnx")
	st.mu.Unlock()
	if _, err := r.Localize(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.LocalizeVersions(ctx, "a", []int64{2}); err != nil {
		t.Fatal(err)
	}
	if got := st.fetched(); !slices.Equal(got, []string{"a/2/model.onnx"}) {
		t.Fatalf("second copy fetched %v, want only the changed object", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "1", "model.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("removed object still in the copy: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "2", "model.onnx")); string(b) != "v2 changed" {
		t.Fatalf("local copy holds %q", b)
	}
}

func TestRemoteLocalizeRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		objects map[string][]byte
		corrupt string
		model   string
		want    string
	}{
		{name: "escaping key", objects: map[string][]byte{"m/../../etc/x": nil, "m/1/model.onnx": nil}, model: "m", want: "escapes the model folder"},
		{name: "escaping model name", objects: map[string][]byte{"m/1/model.onnx": nil}, model: "..", want: "cannot be a local folder"},
		{name: "missing model", objects: map[string][]byte{"m/1/model.onnx": nil}, model: "n", want: "not found"},
		{name: "integrity", objects: map[string][]byte{"m/1/model.onnx": []byte("x"), "m/config.pbtxt": nil}, corrupt: "m/1/model.onnx", model: "m", want: "integrity check failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &memStore{objects: tc.objects, corrupt: map[string]bool{tc.corrupt: true}}
			r := OpenOptions{CacheDir: t.TempDir()}.Remote(st)
			dir, err := r.Localize(ctx, tc.model)
			if err == nil {
				err = r.LocalizeVersions(ctx, tc.model, []int64{1})
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Localize: %v, want %q", err, tc.want)
			}
			if tc.corrupt != "" {
				if _, err := os.Stat(filepath.Join(dir, "1", "model.onnx")); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a corrupted object reached the copy: %v", err)
				}
			}
		})
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	_, err := OpenOptions{}.Open(context.Background(), "as://account/container/models")
	if err == nil || !strings.Contains(err.Error(), "as:// repositories are not supported") {
		t.Fatalf("as:// root: %v", err)
	}
}

func TestRemoteRemovedVersionFolder(t *testing.T) {
	ctx := context.Background()
	st := &memStore{objects: map[string][]byte{"a/1/model.onnx": []byte("1"), "a/2/model.onnx": []byte("2")}}
	r := OpenOptions{CacheDir: t.TempDir()}.Remote(st)
	dir, err := r.Localize(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	delete(st.objects, "a/2/model.onnx")
	st.mu.Unlock()
	if _, err := r.Localize(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "2")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("version folder 2 left in the copy after it left the store: %v", err)
	}
}

func TestLenientUnreachableRoot(t *testing.T) {
	ctx := context.Background()
	local := t.TempDir()
	if err := os.MkdirAll(filepath.Join(local, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	down := errors.New("connection refused")
	opts := OpenOptions{Lenient: true, CacheDir: t.TempDir(), Stores: map[string]func(context.Context, string) (Store, error){
		"s3": func(context.Context, string) (Store, error) { return nil, down },
	}}
	set, err := opts.OpenAll(ctx, []string{local, "s3://bucket/models"})
	if err != nil {
		t.Fatalf("lenient open: %v", err)
	}
	models, _, err := set.Scan(ctx)
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, down) || len(models) != 1 {
		t.Fatalf("scan: %v models %v; want the local model and an unreachable root", err, models)
	}
	if _, err := (OpenOptions{Stores: opts.Stores}).OpenAll(ctx, []string{"s3://bucket/models"}); !errors.Is(err, down) {
		t.Fatalf("strict open: %v", err)
	}
}

func TestRemotePrunesRemovedModels(t *testing.T) {
	ctx := context.Background()
	st := &memStore{objects: map[string][]byte{"a/config.pbtxt": nil, "b/config.pbtxt": nil}}
	r := OpenOptions{CacheDir: t.TempDir()}.Remote(st)
	dir, err := r.Localize(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	delete(st.objects, "b/config.pbtxt")
	st.mu.Unlock()
	if names, err := r.Models(ctx); err != nil || !slices.Equal(names, []string{"a"}) {
		t.Fatalf("models %v %v", names, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("copy of a model gone from the store kept: %v", err)
	}
}
