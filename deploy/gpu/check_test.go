package gpu

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/modroot"
)

// The checks of check.sh's report: those that need a GPU, which a machine
// without one must skip with a reason, and those it must pass anyway.
var (
	gpuChecks = []string{"cuda-provider", "kind-gpu-ort", "nvml", "cuda-shm-ipc", "http-simple_gpu", "grpc-simple_gpu",
		"tensorrt-http", "tensorrt-grpc", "cuda-shm-server", "cuda-shm-cupy", "cuda-shm-16mib", "perf-mlp_gpu", "gpu-metrics", "figure1-gpu"}
	cpuChecks = []string{"bundle", "tests-onnxrt", "tests-metrics", "tests-cudaipc", "server", "http-simple", "grpc-simple", "perf-mlp_cpu"}
)

// TestCheckWithoutGPU is CI's run of the GPU check: it builds a bundle
// without the CUDA and TensorRT providers (GPU_PROVIDERS=0) in parts small
// enough to be several, brings them to check.sh one at a time (stash) and
// the rest at once, and asserts the report: a missing part fails the
// reassembly, then each GPU check is skipped with its reason and each CPU
// check passes; with a stand-in nvidia-smi saying there is a GPU, the GPU
// checks that cannot run fail instead.
func TestCheckWithoutGPU(t *testing.T) {
	root, err := modroot.Dir()
	if err != nil {
		t.Skipf("no checkout to build the bundle from: %v", err)
	}
	if out, err := exec.Command("nvidia-smi", "-L").Output(); err == nil && strings.HasPrefix(string(out), "GPU ") {
		t.Skip("this host has a GPU: run `make gpu-bundle` and deploy/gpu/check.sh on it instead")
	}
	for _, tool := range []string{"make", "bash", "xz", "split", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	parts, arrive, hold := filepath.Join(tmp, "parts"), filepath.Join(tmp, "arrive"), filepath.Join(tmp, "hold")
	must(t, os.Mkdir(arrive, 0o755))

	// MAKEFLAGS from an outer `make test` would join its jobserver.
	env := []string{"MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=", "INFERD_GPU_DIR=" + hold, "BUNDLE_DIR=" + arrive,
		"PORT_BASE=" + strconv.Itoa(freePort(t))}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Without the figure 1 benchmarks' test binary, whose checks skip here
	// anyway, and without symbols: linking is most of this test's time.
	out, err := run("make", "--no-print-directory", "gpu-bundle", "GPU_PROVIDERS=0", "GPU_BUNDLE="+parts, "PART_MB=20",
		"GPU_TEST_PKGS=core/onnxrt platforms/metrics platforms/shm/cudaipc deploy/gpu",
		"BUNDLE_XZ=-0", "BUNDLE_GOFLAGS="+bundleGoFlags+" -ldflags='-s -w'")
	if err != nil {
		t.Fatalf("make gpu-bundle: %v\n%s", err, out)
	}
	names, err := filepath.Glob(filepath.Join(parts, "gpu-*"))
	must(t, err)
	sort.Strings(names)
	if len(names) < 2 {
		t.Fatalf("parts %v, want several of at most 20 MiB", names)
	}
	for _, n := range names {
		if st, err := os.Stat(n); err != nil || st.Size() > 20<<20 {
			t.Fatalf("part %s: %v, %d bytes", n, err, st.Size())
		}
		if !strings.HasSuffix(n, "of"+twoDigits(len(names))) {
			t.Fatalf("part %s does not say it is one of %d", n, len(names))
		}
	}
	bring := func(n string) { must(t, os.Rename(n, filepath.Join(arrive, filepath.Base(n)))) }

	// The first part arrives alone and is stashed; a run now fails.
	bring(names[0])
	if out, err := run("bash", "deploy/gpu/check.sh", "stash"); err != nil || !strings.Contains(out, filepath.Base(names[0])) {
		t.Fatalf("stash: %v\n%s", err, out)
	}
	report := filepath.Join(tmp, "report")
	if out, err := run("bash", "deploy/gpu/check.sh", "run", report); err == nil {
		t.Fatalf("run with one part of %d succeeded:\n%s", len(names), out)
	}
	checks := readReport(t, filepath.Join(report, "summary.txt"))
	if got := checks["bundle"]; !strings.HasPrefix(got, "FAIL") || !strings.Contains(got, "have not arrived") {
		t.Fatalf("bundle with parts missing: %q", got)
	}

	// The rest arrive at once.
	for _, n := range names[1:] {
		bring(n)
	}
	out, err = run("bash", "deploy/gpu/check.sh", "run", report)
	if err != nil {
		t.Errorf("check.sh run: %v\n%s", err, out)
	}
	checks = readReport(t, filepath.Join(report, "summary.txt"))
	for _, c := range gpuChecks {
		status, reason, _ := strings.Cut(checks[c], " ")
		if status != "SKIP" || len(reason) < 10 {
			t.Errorf("GPU check %s: %q, want SKIP with its reason", c, checks[c])
		}
	}
	for _, c := range cpuChecks {
		if !strings.HasPrefix(checks[c], "PASS") {
			t.Errorf("CPU check %s: %q, want PASS", c, checks[c])
		}
	}
	if got := checks["figure1-cpu"]; !strings.HasPrefix(got, "SKIP") {
		t.Errorf("figure1-cpu: %q, want SKIP (no httpapi.test in this bundle, or too few CPUs)", got)
	}
	if st, err := os.Stat(filepath.Join(report, "details.tgz")); err != nil || st.Size() == 0 {
		t.Errorf("details.tgz: %v", err)
	}
	if t.Failed() {
		t.Fatalf("check.sh's output:\n%s", out)
	}

	// On a host that says it has a GPU, a GPU check that cannot run fails:
	// skipping is for hosts without one.
	fake := filepath.Join(tmp, "fakebin")
	must(t, os.Mkdir(fake, 0o755))
	must(t, os.WriteFile(filepath.Join(fake, "nvidia-smi"), []byte("#!/bin/sh\necho 'GPU 0: Fake GPU (UUID: GPU-0)'\n"), 0o755))
	env = append(env, "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"), "CPU_FIGURES=0")
	if out, err = run("bash", "deploy/gpu/check.sh", "run", report); err == nil {
		t.Errorf("check.sh run with a GPU it cannot use succeeded:\n%s", out)
	}
	checks = readReport(t, filepath.Join(report, "summary.txt"))
	for _, c := range []string{"nvml", "cuda-shm-ipc", "cuda-shm-server", "gpu-metrics"} {
		if !strings.HasPrefix(checks[c], "FAIL") {
			t.Errorf("%s on a GPU host without CUDA's libraries: %q, want FAIL", c, checks[c])
		}
	}
	if got := checks["kind-gpu-ort"]; !strings.HasPrefix(got, "SKIP") || !strings.Contains(got, "GPU_PROVIDERS=0") {
		t.Errorf("kind-gpu-ort with a bundle without providers: %q", got)
	}
}

// readReport maps each check of a summary.txt to its "STATUS reason".
func readReport(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	checks := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		status, rest, _ := strings.Cut(sc.Text(), " ")
		name, reason, ok := strings.Cut(rest, ": ")
		if ok && (status == "PASS" || status == "FAIL" || status == "SKIP") {
			checks[name] = status + " " + reason
		}
	}
	must(t, sc.Err())
	return checks
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func twoDigits(n int) string { return fmt.Sprintf("%02d", n) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
