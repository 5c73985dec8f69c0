package python_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
)

// TestWorkerModule runs testdata/worker_test.py: checks of the worker
// script's own parts (its header encoder and decoder, its polling after a
// reply) in the real interpreter, without a server.
func TestWorkerModule(t *testing.T) {
	cmd := exec.Command(servertest.Python(t), filepath.Join("testdata", "worker_test.py"))
	cmd.Env = append(os.Environ(), "PYTHONPATH=shim")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestExecuteBenchScript runs testdata/execute_bench.py (BENCHMARKS.md
// "Python backend") briefly, so that it keeps working with the worker.
func TestExecuteBenchScript(t *testing.T) {
	out, err := exec.Command(servertest.Python(t), filepath.Join("testdata", "execute_bench.py"), "shim", "20").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "execute ") || !strings.Contains(string(out), "\nread+execute ") {
		t.Fatalf("%v\n%s", err, out)
	}
}
