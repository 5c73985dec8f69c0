package onnxrt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/repo/modelconfig"
)

// TestBackgroundLoad checks Options.Background: New returns before ONNX
// Runtime's load has to end, and the backend serves once it has (here
// TestMain's backend already loaded the library, as a second backend of
// one process finds it).
func TestBackgroundLoad(t *testing.T) {
	lib, err := FindLibrary("")
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{LibraryPath: lib, DefaultMaxBatchSize: DefaultMaxBatchSize, Background: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	v := version(t, "m", ob.Must(ob.Identity(ob.Float, 4)))
	cfg := config(t, `name: "m" backend: "onnxruntime" max_batch_size: 0`)
	if err := b.AutoComplete(context.Background(), v, cfg); err != nil {
		t.Fatalf("AutoComplete: %v", err)
	}
	in, err := b.NewBatchInstance(context.Background(), core.InstanceSpec{VersionFiles: v, Name: "m_0", Kind: modelconfig.ModelInstanceGroup_KIND_CPU, Config: cfg})
	if err != nil {
		t.Fatalf("NewBatchInstance: %v", err)
	}
	if err := in.Close(); err != nil {
		t.Error(err)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
}

// TestBackgroundLoadFailure checks that a load that fails in the
// background reaches every caller as the load's error: Ready, and each
// auto-complete and instance as UNAVAILABLE naming it; New without
// Background returns it, as before. The library asked for is another file
// than the one this process loaded, which one process cannot hold.
func TestBackgroundLoadFailure(t *testing.T) {
	other := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{LibraryPath: other}); err == nil || !strings.Contains(err.Error(), "cannot also load") {
		t.Fatalf("New without Background: %v, want the load's error", err)
	}
	b, err := New(Options{LibraryPath: other, Background: true})
	if err != nil {
		t.Fatalf("New with Background: %v, want the error from Ready", err)
	}
	if err := b.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot also load") {
		t.Fatalf("Ready: %v, want the load's error", err)
	}
	v := version(t, "m", ob.Must(ob.Identity(ob.Float, 4)))
	cfg := config(t, `name: "m" backend: "onnxruntime"`)
	for name, call := range map[string]func() error{
		"AutoComplete": func() error { return b.AutoComplete(context.Background(), v, cfg) },
		"NewBatchInstance": func() error {
			in, err := b.NewBatchInstance(context.Background(), core.InstanceSpec{VersionFiles: v, Name: "m_0", Config: cfg})
			if in != nil {
				_ = in.Close()
			}
			return err
		},
	} {
		err := call()
		if core.CodeOf(err) != core.CodeUnavailable || !strings.Contains(err.Error(), "failed to load") || !strings.Contains(err.Error(), "cannot also load") {
			t.Errorf("%s: %v (%v), want UNAVAILABLE with the load's error", name, err, core.CodeOf(err))
		}
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestBackgroundLoadWaitCancelled checks that a caller whose context ends
// while the load still runs gets the context's error, not UNAVAILABLE.
func TestBackgroundLoadWaitCancelled(t *testing.T) {
	b := &Backend{loaded: make(chan struct{})} // a load that never ends
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Ready(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ready: %v, want context.Canceled", err)
	}
	if _, err := b.hold(ctx); !errors.Is(err, context.Canceled) || core.CodeOf(err) == core.CodeUnavailable {
		t.Errorf("hold: %v, want context.Canceled", err)
	}
	// A load that has failed is the answer even to a caller who has gone.
	failed := &Backend{loaded: make(chan struct{}), loadErr: errors.New("no library")}
	close(failed.loaded)
	if _, err := failed.hold(ctx); core.CodeOf(err) != core.CodeUnavailable || !strings.Contains(err.Error(), "no library") {
		t.Errorf("hold after a failed load, context cancelled: %v, want UNAVAILABLE naming the load's error", err)
	}
}
