package onnxrt

import (
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
)

// TestCAPI checks the direct C API calls reach the right ORT functions:
// their answers are ORT's own.
func TestCAPI(t *testing.T) {
	if layoutErr != nil {
		t.Fatal(layoutErr)
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer so.Destroy()
	err = registerCustomOpsLibrary(so, "/nonexistent/libcustom.so")
	if err == nil || !strings.Contains(err.Error(), "Failed to load library /nonexistent/libcustom.so") {
		t.Errorf("RegisterCustomOpsLibrary_V2: %v", err)
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Destroy()
	if err := addRunConfigEntry(ro, "memory.enable_memory_arena_shrinkage", "cpu:0"); err != nil {
		t.Errorf("AddRunConfigEntry: %v", err)
	}
}
