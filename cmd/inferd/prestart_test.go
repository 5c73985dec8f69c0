package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core/onnxrt"
)

// TestOrtPrestart runs the server binary and checks prestart.go: ONNX
// Runtime's load begins at process start when ORT_LIB_PATH names the
// library the server loads, the server then serves with one copy of the
// library mapped, and the start is left alone where the launch line names
// another library or INFERD_ORT_PRESTART=0 turns it off.
func TestOrtPrestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		t.Fatal(err)
	}
	// The same file by another name: a launch line naming a library is
	// never second-guessed, even when it is the variable's file.
	link := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.Symlink(lib, link); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../../examples/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildServer(t)
	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		prestart bool
	}{
		{name: "ORT_LIB_PATH", prestart: true},
		{name: "tritonserver word", args: []string{"tritonserver"}, prestart: true},
		{name: "library-path given", args: []string{"--backend-config=onnxruntime,library-path=" + link}},
		{name: "turned off", env: []string{"INFERD_ORT_PRESTART=0"}},
		{name: "telemetry set on", env: []string{"ORT_DISABLE_TELEMETRY=0"}},
		{name: "telemetry set off", env: []string{"ORT_DISABLE_TELEMETRY=1"}, prestart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(tc.args, "--model-repository="+repo, "--http-address=127.0.0.1", "--http-port=0",
				"--allow-grpc=false", "--allow-metrics=false", "--log-verbose=1")
			log, base, pid := startServing(t, bin, append([]string{"ORT_LIB_PATH=" + lib}, tc.env...), "http", args)
			began := regexp.MustCompile(`ONNX Runtime's load began at process start.* state=(\S+)`).FindStringSubmatch(log)
			switch {
			case tc.prestart && began == nil:
				t.Errorf("no prestart line in the log:\n%s", log)
			case tc.prestart && began[1] != "done" && began[1] != "started":
				t.Errorf("prestart state %q, want done or started", began[1])
			case !tc.prestart && began != nil:
				t.Errorf("prestart ran: %s", began[0])
			}
			smokeInfer(t, base+"/v2/health/ready", base+"/v2/models/simple/infer")
			maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
			if err != nil {
				t.Fatal(err)
			}
			files := map[string]bool{}
			for _, line := range strings.Split(string(maps), "\n") {
				if f := strings.Fields(line); len(f) == 6 && strings.Contains(f[5], "libonnxruntime") {
					files[f[5]] = true
				}
			}
			if len(files) != 1 {
				t.Errorf("ONNX Runtime mapped from %d files, want 1: %v", len(files), files)
			}
		})
	}
}

// startServing starts bin with env added to the environment and returns
// its log up to the "serving" line, the base URL of the listener named key
// there and the process id; the process is killed when the test ends.
func startServing(t *testing.T, bin string, env []string, key string, args []string) (log, base string, pid int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type result struct{ log, addr string }
	found := make(chan result, 1)
	go func() {
		addr := regexp.MustCompile(`"serving" .*\b` + key + `=(\S+)`)
		var b strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if m := addr.FindStringSubmatch(sc.Text()); m != nil {
				found <- result{b.String(), m[1]}
				for sc.Scan() { // keep the pipe drained
				}
				return
			}
		}
		found <- result{b.String(), ""}
	}()
	select {
	case r := <-found:
		if r.addr == "" {
			t.Fatalf("exited before serving:\n%s", r.log)
		}
		return r.log, "http://" + strings.Replace(r.addr, "0.0.0.0", "127.0.0.1", 1), cmd.Process.Pid
	case <-time.After(time.Minute):
		t.Fatal("not serving after a minute")
	}
	return "", "", 0
}
