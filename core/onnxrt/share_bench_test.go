package onnxrt_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/modroot"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// The figures of BENCHMARKS.md, "One ONNX Runtime session for many
// instances" (issue 38): a real inferd process per configuration, on a
// temporary repository holding an MLP of about 200 MB of FP32 weights.
//
//	ORT_LIB_PATH=$PWD/third_party/onnxruntime/libonnxruntime.so.1 \
//	  go test ./core/onnxrt -run '^$' -bench BenchmarkSharedSession -benchtime 1x
//
// SHARE_BENCH_ROUNDS (default 1) alternates the shared and separate
// processes that many times; SHARE_BENCH_SECONDS (default 5) is the length
// of each load; SHARE_BENCH_INTRA=n sets every model's
// intra_op_thread_count; SHARE_BENCH_WINDOWS (default 6) is the number
// of 2 s windows per side of the interleaved throughput measurement (one
// process serving both models, loaded in turn); INFERD_BIN runs a
// prebuilt inferd instead of building one.

// Shape of the benchmark model: 48 layers of 1024×1024 FP32 weights,
// 201 MB, about 100 MFLOP per inference.
const (
	benchIn, benchHidden, benchLayers = 1024, 1024, 48
	benchInstances                    = 4
	benchConc                         = 16
)

// shareRun is what one inferd process measured.
type shareRun struct {
	pssMiB  float64 // Pss of /proc/<pid>/smaps_rollup once ready and idle
	inferPS float64 // inferences per second at benchConc clients
	// inferCPU is inferences per CPU second the inferd process used: on a
	// VM shared with other work, which moves inferPS by 2x and more from
	// one run to the next, the steadier measure of the server's cost.
	inferCPU float64
	startLog string // the load line's instance_start
}

func BenchmarkSharedSession(b *testing.B) {
	for _, unit := range []string{"ns/op", "B/op", "allocs/op"} {
		b.ReportMetric(0, unit)
	}
	rounds, seconds := envInt("SHARE_BENCH_ROUNDS", 1), envInt("SHARE_BENCH_SECONDS", 5)
	bin, repo := shareBenchSetup(b)
	var one, shared, separate []shareRun
	run := func(model string, load bool) shareRun {
		r, err := measureShare(bin, repo, model, load, time.Duration(seconds)*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: PSS %.1f MiB, %.1f infer/s, %.1f infer/cpu-s, instance_start %s", model, r.pssMiB, r.inferPS, r.inferCPU, r.startLog)
		return r
	}
	one = append(one, run("one", false))
	for i := range rounds {
		// Alternate which goes first: the VM's other load drifts.
		if i%2 == 0 {
			shared = append(shared, run("shared", true))
			separate = append(separate, run("separate", true))
		} else {
			separate = append(separate, run("separate", true))
			shared = append(shared, run("shared", true))
		}
		b.Logf("round %d: shared/separate %.3f infer/s, %.3f infer/cpu-s", i,
			shared[i].inferPS/separate[i].inferPS, shared[i].inferCPU/separate[i].inferCPU)
	}
	if windows := envInt("SHARE_BENCH_WINDOWS", 6); windows > 0 {
		sh, sep, err := measureInterleaved(bin, repo, windows, 2*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("interleaved, one process, %d windows of 2 s each: shared %.1f, separate %.1f infer/s", windows, sh, sep)
		b.ReportMetric(sh/sep, "interleaved-shared/separate")
	}
	pss := func(rs []shareRun) float64 { return median(rs, func(r shareRun) float64 { return r.pssMiB }) }
	tput := func(rs []shareRun) float64 { return median(rs, func(r shareRun) float64 { return r.inferPS }) }
	b.ReportMetric(pss(one), "one-pss-MiB")
	b.ReportMetric(pss(shared), "shared-pss-MiB")
	b.ReportMetric(pss(separate), "separate-pss-MiB")
	b.ReportMetric(pss(shared)/pss(one), "shared/one")
	b.ReportMetric(pss(separate)/pss(one), "separate/one")
	b.ReportMetric(tput(shared), "shared-infer/s")
	b.ReportMetric(tput(separate), "separate-infer/s")
	b.ReportMetric(tput(shared)/tput(separate), "shared/separate")
	cpu := func(rs []shareRun) float64 { return median(rs, func(r shareRun) float64 { return r.inferCPU }) }
	b.ReportMetric(cpu(shared), "shared-infer/cpu-s")
	b.ReportMetric(cpu(separate), "separate-infer/cpu-s")
	b.ReportMetric(cpu(shared)/cpu(separate), "shared/separate-cpu")
}

// shareBenchSetup builds inferd (unless INFERD_BIN) and writes the
// repository: models one (1 instance), separate (4) and shared (4, one
// session), all the same model file.
func shareBenchSetup(b *testing.B) (bin, repo string) {
	b.Helper()
	root, err := modroot.Dir()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	bin = os.Getenv("INFERD_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "inferd")
		build := exec.Command("go", "build", "-o", bin, "./cmd/inferd")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
	}
	model := ob.Must(ob.MLP(benchIn, benchHidden, benchLayers))
	repo = filepath.Join(dir, "repo")
	var intra string
	if n := envInt("SHARE_BENCH_INTRA", 0); n > 0 {
		intra = fmt.Sprintf(`parameters { key: "intra_op_thread_count" value { string_value: "%d" } }`, n)
	}
	for name, extra := range map[string]string{
		"one":      "instance_group [ { kind: KIND_CPU count: 1 } ]",
		"separate": fmt.Sprintf("instance_group [ { kind: KIND_CPU count: %d } ]", benchInstances),
		"shared": fmt.Sprintf("instance_group [ { kind: KIND_CPU count: %d } ]\n", benchInstances) +
			`parameters { key: "share_session_between_instances" value { string_value: "true" } }`,
	} {
		if err := ob.WriteFile(filepath.Join(repo, name, "1", "model.onnx"), model); err != nil {
			b.Fatal(err)
		}
		cfg := fmt.Sprintf(`platform: "onnxruntime_onnx"
max_batch_size: 8
input { name: "x" data_type: TYPE_FP32 dims: %d }
output { name: "y" data_type: TYPE_FP32 dims: %d }
%s
%s
`, benchIn, benchHidden, extra, intra)
		if err := os.WriteFile(filepath.Join(repo, name, "config.pbtxt"), []byte(cfg), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return bin, repo
}

// inferd is a started inferd process.
type inferd struct {
	base string // http://127.0.0.1:<port>
	pid  int
	logs *lockedLog
	stop func(err error) error // ends the process; err gains its log
}

// startInferd starts bin serving models of repo over HTTP and waits for
// it to be ready.
func startInferd(bin, repo string, models ...string) (*inferd, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--model-repository=" + repo, "--model-control-mode=explicit",
		"--http-address=127.0.0.1", "--http-port=" + strconv.Itoa(port), "--allow-grpc=false", "--allow-metrics=false"}
	for _, m := range models {
		args = append(args, "--load-model="+m)
	}
	p := &inferd{base: "http://127.0.0.1:" + strconv.Itoa(port), logs: &lockedLog{}}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p.stop = func(err error) error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if err != nil {
			err = fmt.Errorf("%v: %w\ninferd log:\n%s", models, err, p.logs.String())
		}
		return err
	}
	if err := waitReady(p.base+"/v2/health/ready", exited); err != nil {
		return nil, p.stop(err)
	}
	return p, nil
}

// measureShare starts inferd serving model alone, reads its PSS once ready
// and idle and, with load, its throughput with benchConc clients.
func measureShare(bin, repo, model string, load bool, d time.Duration) (r shareRun, err error) {
	p, err := startInferd(bin, repo, model)
	if err != nil {
		return r, err
	}
	defer func() { err = p.stop(err) }()
	time.Sleep(time.Second) // idle: the load's garbage collected, ORT's threads parked
	if r.pssMiB, err = smapsPss(p.pid); err != nil {
		return r, err
	}
	r.startLog = logField(p.logs.String(), "instance_start=")
	if load {
		cpu0, err := cpuSeconds(p.pid)
		if err != nil {
			return r, err
		}
		var n int64
		if r.inferPS, n, err = loadModel(p.base+"/v2/models/"+model+"/infer", d); err != nil {
			return r, err
		}
		cpu1, err := cpuSeconds(p.pid)
		if err != nil {
			return r, err
		}
		r.inferCPU = float64(n) / (cpu1 - cpu0)
	}
	return r, nil
}

// measureInterleaved serves shared and separate from one process and loads
// them in turn, windows times each for d: on a machine whose other work
// drifts, both sides see the same drift. It returns each side's
// inferences per second over all its windows.
func measureInterleaved(bin, repo string, windows int, d time.Duration) (shared, separate float64, err error) {
	p, err := startInferd(bin, repo, "shared", "separate")
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = p.stop(err) }()
	var n [2]float64
	for w := range 2 * windows {
		model := [2]string{"shared", "separate"}[w%2]
		ps, _, err := loadModel(p.base+"/v2/models/"+model+"/infer", d)
		if err != nil {
			return 0, 0, err
		}
		n[w%2] += ps
	}
	return n[0] / float64(windows), n[1] / float64(windows), nil
}

// cpuSeconds is the user and system CPU time pid has used
// (/proc/<pid>/stat fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which ends with the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var ticks float64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15 overall
		t, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, err
		}
		ticks += t
	}
	return ticks / 100, nil
}

// loadModel posts batch-1 requests from benchConc clients for d and
// returns the inferences per second and their number.
func loadModel(url string, d time.Duration) (float64, int64, error) {
	vals := make([]string, benchIn)
	for i := range vals {
		vals[i] = strconv.FormatFloat(float64(i%17-8)/8, 'f', -1, 64)
	}
	body := []byte(`{"inputs":[{"name":"x","shape":[1,` + strconv.Itoa(benchIn) + `],"datatype":"FP32","data":[` + strings.Join(vals, ",") + `]}]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConc}}
	var (
		done    atomic.Int64
		failure atomic.Value
		wg      sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for range benchConc {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					failure.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failure.Load().(error); ok {
		return 0, 0, err
	}
	return float64(done.Load()) / time.Since(start).Seconds(), done.Load(), nil
}

// smapsPss reads the proportional set size of pid, in MiB.
func smapsPss(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no Pss line in smaps_rollup")
}

func waitReady(url string, exited <-chan error) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("inferd exited before ready: %v", err)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("not ready after 3 minutes")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logField returns the value of key (quoted or not) on the last line that
// has it.
func logField(logs, key string) string {
	i := strings.LastIndex(logs, key)
	if i < 0 {
		return ""
	}
	v := logs[i+len(key):]
	if strings.HasPrefix(v, `"`) {
		if end := strings.Index(v[1:], `"`); end >= 0 {
			return v[1 : end+1]
		}
	}
	if end := strings.IndexAny(v, " \n"); end >= 0 {
		return v[:end]
	}
	return v
}

func median(rs []shareRun, f func(shareRun) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	for i := range v { // insertion sort: a handful of values
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// lockedLog collects a process's output, written from two pipes.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
