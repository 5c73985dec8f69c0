package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoteHold: a model's local copy lives while a load or a loaded
// version holds it and goes with the last release; another model's copy
// stays, and releasing twice counts once.
func TestRemoteHold(t *testing.T) {
	st := &memStore{objects: map[string][]byte{
		"m/config.pbtxt":  []byte(`name: "m"`),
		"m/1/model.onnx":  []byte("one"),
		"other/1/a.onnx":  []byte("other"),
		"other/config.pb": []byte("x"),
	}}
	r := OpenOptions{CacheDir: t.TempDir()}.Remote(st)
	ctx := context.Background()
	var h Holder = r
	load := h.Hold("m")
	dir, err := r.Localize(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.LocalizeVersions(ctx, "m", []int64{1}); err != nil {
		t.Fatal(err)
	}
	otherRelease := h.Hold("other")
	other, err := r.Localize(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	version := h.Hold("m") // a version loaded from the copy
	load()                 // the load is done
	load()                 // a second call is no second release
	if !exists(filepath.Join(dir, "1", "model.onnx")) {
		t.Fatal("the copy went while a version still held it")
	}
	version()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the copy %s is still there after the last release (%v)", dir, err)
	}
	if !exists(filepath.Join(other, "config.pb")) {
		t.Fatal("another model's copy went too")
	}
	// A later load fetches the model again.
	again := h.Hold("m")
	if _, err := r.Localize(ctx, "m"); err != nil || !exists(filepath.Join(dir, "config.pbtxt")) {
		t.Fatalf("localize after the release: %v", err)
	}
	again()
	otherRelease()
	if entries, _ := os.ReadDir(r.cache); len(entries) != 0 {
		t.Fatalf("cache holds %d entries after every release", len(entries))
	}
}

// TestUnreachableHold forwards holds to the root once it opened.
func TestUnreachableHold(t *testing.T) {
	st := &memStore{objects: map[string][]byte{"m/1/model.onnx": []byte("one")}}
	opts := OpenOptions{CacheDir: t.TempDir()}
	u := &unreachable{root: "mem://bucket", open: func(context.Context) (Source, error) { return opts.Remote(st), nil }}
	u.Hold("m")() // not open yet: nothing to hold
	ctx := context.Background()
	if _, err := u.Models(ctx); err != nil { // opens the root
		t.Fatal(err)
	}
	release := u.Hold("m")
	dir, err := u.Localize(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the copy %s is still there after the release (%v)", dir, err)
	}
}
