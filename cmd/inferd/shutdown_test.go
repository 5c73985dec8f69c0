package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
)

// processesUnder lists the live processes (zombies excepted) whose
// command line mentions dir: the Python workers of a server whose
// temporary folder is under dir, and the children of testdata models that
// name their folder.
func processesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(fields) > 0 && fields[0] == "Z" {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// TestShutdownDeadline: with --exit-timeout-secs=3, SIGTERM ends the
// process within that deadline (plus a generous margin for a loaded
// machine) although two models' finalize() never returns and one of them
// started a child process that holds the worker's output pipes. No worker,
// restarted or not, and no child outlives the server, and a request in
// flight when the signal comes, which finishes before the deadline, gets
// its answer. The exit status is 1, as tritonserver's when its exit
// timeout expires.
func TestShutdownDeadline(t *testing.T) {
	const exitTimeout = 3 * time.Second
	base := t.TempDir()
	root := filepath.Join(base, "models")
	tmp := filepath.Join(base, "tmp")
	must(t, os.CopyFS(root, os.DirFS("testdata/shutdown")))
	must(t, os.Mkdir(tmp, 0o755))
	argv, _ := json.Marshal([]string{"--model-repository=" + root, "--http-port=0", "--grpc-port=0", "--metrics-port=0",
		"--http-address=127.0.0.1", "--exit-timeout-secs=3",
		"--backend-config=python,python-executable=" + servertest.Python(t),
		"--backend-config=python,restart-dead-workers=true"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// The worker scripts land in TMPDIR: their command lines name base.
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGV="+string(argv), "TMPDIR="+tmp)
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for _, pid := range processesUnder(base) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	var log strings.Builder
	logged := make(chan struct{})
	sc := bufio.NewScanner(stderr)
	addr := regexp.MustCompile(`] "serving" http=(\S+)`)
	var url string
	for url == "" && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			url = "http://" + m[1]
		}
	}
	if url == "" {
		t.Fatalf("inferd did not serve:\n%s", log.String())
	}
	go func() {
		defer close(logged)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
		}
	}()
	termSent := make(chan struct{})
	go func() {
		// Wait closes the stderr pipe: read it to its end first, or the
		// exit's last line can be lost; after SIGTERM, for a bounded time
		// (a leftover child could hold the pipe).
		select {
		case <-logged:
		case <-termSent:
			select {
			case <-logged:
			case <-time.After(exitTimeout + time.Second):
			}
		}
		exited <- cmd.Wait()
	}()

	// Three workers and the child of child_finalize. A process caught in
	// the middle of its exec shows an empty command line for a moment, so
	// one look can miss it.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		got := processesUnder(base)
		if len(got) >= 4 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d processes under the test's folder before the stop, want 4 or more", len(got))
		}
	}

	type answer struct {
		status int
		body   string
	}
	inflight := make(chan answer, 1)
	go func() {
		s, b := post(t, url+"/v2/models/slow/infer", `{"inputs":[{"name":"IN","shape":[2],"datatype":"INT32","data":[7,8]}]}`)
		inflight <- answer{s, b}
	}()
	// The slow model marks the request's arrival, then sleeps 1.5 s.
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(root, "slow", "1", "started")); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the slow model never ran the request")
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	stopped := time.Now()
	close(termSent)
	// Separate timeouts for the drain, the unload and the backends took
	// more than twice the deadline.
	const margin = 5 * time.Second
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(exitTimeout + margin):
		_ = cmd.Process.Kill()
		<-logged
		t.Fatalf("inferd still running %v after SIGTERM with --exit-timeout-secs=3:\n%s", exitTimeout+margin, log.String())
	}
	<-logged
	t.Logf("exited %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	// As tritonserver, models that did not unload in time fail the exit.
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(log.String(), "failed to stop server: Exit timeout expired. Exiting immediately.") {
		t.Errorf("exit %v (status %d), want status 1 and Triton's message:\n%s", exitErr, code, log.String())
	}
	select {
	case a := <-inflight:
		if a.status != 200 || !strings.Contains(a.body, `"data":[7,8]`) {
			t.Errorf("in-flight request: %d %s, want 200 with its answer\n%s", a.status, a.body, log.String())
		}
	case <-time.After(10 * time.Second):
		t.Error("the in-flight request got no answer")
	}
	// The kernel ends killed processes quickly; their parents reap them.
	deadline := time.Now().Add(5 * time.Second)
	for left := processesUnder(base); len(left) > 0; left = processesUnder(base) {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v outlived the server:\n%s", left, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStopOrder: the stop runs the actors down in the order run documents:
// the exiting mark first, then the poll, the listeners (each draining),
// the metrics polls, and last the models, the backends and the traces.
func TestStopOrder(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"exiting", "metrics", "GRPC", "HTTP", "metrics polls", "models", "backends", "traces"}},
		{[]string{"--model-control-mode=poll", "--repository-poll-secs=60", "--allow-grpc=false", "--allow-metrics=false"},
			[]string{"exiting", "poll", "HTTP", "models", "backends", "traces"}},
	} {
		logFile := filepath.Join(t.TempDir(), "inferd.log")
		r := startLogged(t, append([]string{"--model-repository=../../examples/model_repository", "--log-file=" + logFile,
			"--log-format=json", "--log-verbose=1"}, tt.args...)...)
		if err := r.stop(t); err != nil {
			t.Fatalf("%v: stop: %v", tt.args, err)
		}
		b, err := os.ReadFile(logFile)
		must(t, err)
		var got []string
		for _, line := range strings.Split(string(b), "\n") {
			var rec struct{ Msg, Actor string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "stopping" {
				got = append(got, rec.Actor)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%v: stopped %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestStopWaitsForBackgroundUnload: a model whose unload began before the
// stop (pb_utils.unload_model returns without waiting for it) and whose
// finalize never returns is still unloading at the exit deadline, which,
// as for the models the stop unloads itself, makes the exit a failure.
func TestStopWaitsForBackgroundUnload(t *testing.T) {
	root := t.TempDir()
	must(t, os.CopyFS(root, os.DirFS("testdata/unloader")))
	must(t, os.CopyFS(filepath.Join(root, "hang_finalize"), os.DirFS("testdata/shutdown/hang_finalize")))
	r := start(t, "--model-repository="+root, "--model-control-mode=explicit", "--load-model=*", "--exit-timeout-secs=2",
		"--backend-config=python,python-executable="+servertest.Python(t))
	if r.http == "" {
		t.Fatalf("start: %v", <-r.done)
	}
	s, body := post(t, r.http+"/v2/models/unloader/infer", `{"inputs":[{"name":"TARGET","shape":[1],"datatype":"BYTES","data":["hang_finalize"]}]}`)
	if s != 200 || !strings.Contains(body, "unloaded hang_finalize") {
		t.Fatalf("unloader: %d %s", s, body)
	}
	if err := r.stop(t); err == nil || !strings.Contains(err.Error(), "failed to stop server") {
		t.Fatalf("run = %v with a model still unloading at the deadline, want failed to stop server", err)
	}
}
