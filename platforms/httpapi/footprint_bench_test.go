package httpapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/modroot"
)

// footprint is what BenchmarkFootprint measures of one inferd process,
// beside the floor: ortfloor (internal/ortfloor), which only loads ONNX
// Runtime and creates the same sessions.
type footprint struct {
	readyMs     float64 // process start to /v2/health/ready answering 200
	lambdaMs    float64 // process start to the first poll of a Lambda Runtime API
	loadMs      float64 // longest nv_model_load_duration_secs
	loadSumMs   float64 // sum over the repository's models
	idle        rss     // once ready and idle
	loadMiB     float64 // highest VmRSS sampled under load
	peakMiB     float64 // VmHWM at the end of the load
	loadReqPerS float64

	floorReadyMs float64 // ortfloor's start to its sessions created
	floor        rss     // ortfloor once ready and idle
}

// rss is a process's resident set, in MiB: VmRSS and its private (RssAnon)
// and file-backed (RssFile: the executable, the libraries) parts.
type rss struct{ total, anon, file float64 }

// footprintOf caches the measurement of the current top-level benchmark:
// the framework calls BenchmarkFootprint more than once with the same B
// (b.N = 1, then more), and each -count repetition with a new one.
var footprintOf struct {
	b   *testing.B
	fp  footprint
	err error
}

// Load phase of BenchmarkFootprint.
const (
	footprintLoad     = 3 * time.Second
	footprintConc     = 16
	footprintIdentity = 64 << 10 // FP32 elements per identity_fp32 request (256 KiB)
	footprintIdle     = 500 * time.Millisecond
)

// BenchmarkFootprint builds the inferd binary and its floor, ortfloor
// (internal/ortfloor: ONNX Runtime loaded and the same sessions created,
// nothing else), and measures side by side on the example repository
// (examples/model_repository; BENCHMARKS.md, sections 4 and 5):
//
//   - ortfloor: start to its sessions created, and its resident set
//     (VmRSS, RssAnon, RssFile of /proc/<pid>/status) once idle;
//   - inferd in Lambda mode: start to the first poll of a Runtime API;
//   - inferd serving HTTP: start to /v2/health/ready answering 200, the
//     longest model load (nv_model_load_duration_secs on /metrics), the
//     resident set once idle, its highest VmRSS while 16 clients post for
//     3 s (12 on `simple` with JSON tensors, 4 on `identity_fp32` with
//     256 KiB binary tensors), and VmHWM.
//
// One process of each is measured per benchmark run (per -count
// repetition), whatever b.N. INFERD_FOOTPRINT_BIN=<folder> runs the inferd
// and ortfloor binaries found there instead of building them:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkFootprint
func BenchmarkFootprint(b *testing.B) { reportFootprint(b, footprintBuilds()[0]) }

// footprintBuild is one of cmd/inferd's builds (docs/deploy.md): its
// binary's name, build tag and whether it has the gRPC frontend and the
// Lambda adapter, which the measurement uses when present.
type footprintBuild struct {
	name, tags   string
	grpc, lambda bool
}

func footprintBuilds() []footprintBuild {
	return []footprintBuild{
		{name: "inferd", grpc: true, lambda: true},
		{name: "inferd-sagemaker", tags: "inferd_sagemaker"},
		{name: "inferd-vertex", tags: "inferd_vertex", grpc: true},
		{name: "inferd-lambda", tags: "lambda.norpc,inferd_lambda", lambda: true},
	}
}

// BenchmarkFootprintBuilds measures each per-cloud build as
// BenchmarkFootprint measures the full one, in one run (issue 37;
// BENCHMARKS.md, "Per-cloud builds"): the floor is measured again beside
// each. Lambda init is measured for the builds with the Lambda adapter
// (lambda-init-ms 0 for the others). INFERD_FOOTPRINT_BIN=<folder> runs
// ortfloor and inferd, inferd-sagemaker, ... found there.
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkFootprintBuilds
func BenchmarkFootprintBuilds(b *testing.B) {
	for _, fb := range footprintBuilds() {
		b.Run("build="+fb.name, func(b *testing.B) { reportFootprint(b, fb) })
	}
}

func reportFootprint(b *testing.B, fb footprintBuild) {
	if footprintOf.b != b {
		footprintOf.fp, footprintOf.err = measureFootprint(b.TempDir(), fb)
		footprintOf.b = b
	}
	if footprintOf.err != nil {
		b.Fatal(footprintOf.err)
	}
	fp := footprintOf.fp
	// The figures are per process, not per op.
	for _, unit := range []string{"ns/op", "B/op", "allocs/op"} {
		b.ReportMetric(0, unit)
	}
	b.ReportMetric(fp.readyMs, "ready-ms")
	b.ReportMetric(fp.floorReadyMs, "floor-ready-ms")
	b.ReportMetric(fp.lambdaMs, "lambda-init-ms")
	b.ReportMetric(fp.loadMs, "load-max-ms")
	b.ReportMetric(fp.loadSumMs, "load-sum-ms")
	b.ReportMetric(fp.idle.total, "idle-rss-MiB")
	b.ReportMetric(fp.idle.anon, "idle-anon-MiB")
	b.ReportMetric(fp.idle.file, "idle-file-MiB")
	b.ReportMetric(fp.floor.total, "floor-rss-MiB")
	b.ReportMetric(fp.floor.anon, "floor-anon-MiB")
	b.ReportMetric(fp.floor.file, "floor-file-MiB")
	b.ReportMetric(fp.idle.total/fp.floor.total, "rss/floor")
	b.ReportMetric(fp.idle.anon/fp.floor.anon, "anon/floor")
	b.ReportMetric(fp.loadMiB, "load-rss-MiB")
	b.ReportMetric(fp.peakMiB, "peak-rss-MiB")
	b.ReportMetric(fp.loadReqPerS, "load-req/s")
}

func measureFootprint(dir string, fb footprintBuild) (fp footprint, err error) {
	root, err := modroot.Dir()
	if err != nil {
		return fp, err
	}
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		return fp, err
	}
	// Both binaries are built the same way, so the page cache holds both
	// the same way: the file-backed part of the resident set depends on it.
	// INFERD_FOOTPRINT_BIN names a folder holding both, built beforehand,
	// for a machine without the Go toolchain.
	bin, floorBin := filepath.Join(dir, fb.name), filepath.Join(dir, "ortfloor")
	if prebuilt := os.Getenv("INFERD_FOOTPRINT_BIN"); prebuilt != "" {
		bin, floorBin = filepath.Join(prebuilt, fb.name), filepath.Join(prebuilt, "ortfloor")
	} else {
		if err := goBuild(root, bin, "./cmd/inferd", fb.tags); err != nil {
			return fp, err
		}
		if err := goBuild(root, floorBin, "./internal/ortfloor", ""); err != nil {
			return fp, err
		}
	}
	repository := filepath.Join(root, "examples", "model_repository")
	// INFERD_FOOTPRINT_COLD=1 starts each process with its executable and
	// ONNX Runtime's library out of the page cache, as a container's first
	// start has them: how much of a file a process maps into its resident
	// set then follows what it touches, not how the build or an earlier
	// run left the cache (a kernel with large folios maps a cached file a
	// folio at a time).
	cold := os.Getenv("INFERD_FOOTPRINT_COLD") != ""
	if cold {
		evictCache(floorBin, lib)
	}
	if fp.floorReadyMs, fp.floor, err = measureFloor(floorBin, lib, repository); err != nil {
		return fp, err
	}
	if fb.lambda {
		if fp.lambdaMs, err = measureLambdaInit(root, bin, repository); err != nil {
			return fp, err
		}
	}

	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return fp, err
		}
	}
	httpPort, metricsPort := ports[0], ports[1]
	var logs bytes.Buffer
	args := []string{"--model-repository=" + repository, "--http-address=127.0.0.1", "--http-port=" + strconv.Itoa(httpPort),
		"--metrics-port=" + strconv.Itoa(metricsPort)}
	if fb.grpc {
		args = append(args, "--grpc-port="+strconv.Itoa(ports[2]))
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &logs, &logs
	if cold {
		evictCache(bin, lib)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fp, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		stopProcess(cmd, exited)
		if err != nil {
			err = fmt.Errorf("%w\ninferd log:\n%s", err, logs.String())
		}
	}()

	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	if err := waitReady(base+"/v2/health/ready", exited); err != nil {
		return fp, err
	}
	fp.readyMs = float64(time.Since(start).Microseconds()) / 1e3
	// The listeners bind one after another (HTTP first), so the metrics
	// one may not be there the moment HTTP answers ready.
	if err := waitReady("http://127.0.0.1:"+strconv.Itoa(metricsPort)+"/metrics", exited); err != nil {
		return fp, err
	}
	if fp.loadMs, fp.loadSumMs, err = loadDurations("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"); err != nil {
		return fp, err
	}
	time.Sleep(footprintIdle)
	pid := cmd.Process.Pid
	if fp.idle, err = procRSS(pid); err != nil {
		return fp, err
	}

	// Load: `simple` with JSON tensors, and identity_fp32 with large binary
	// tensors, while a sampler reads VmRSS.
	simple := inferCaller(base+"/v2/models/simple/infer", []byte(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`))
	blob := make([]byte, 4*footprintIdentity)
	identity := binaryCaller(base+"/v2/models/identity_fp32/infer",
		`{"inputs":[{"name":"INPUT0","shape":[1,`+strconv.Itoa(footprintIdentity)+`],"datatype":"FP32","parameters":{"binary_data_size":`+strconv.Itoa(len(blob))+`}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`, blob)
	var (
		requests atomic.Int64
		failure  atomic.Value
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(footprintLoad)
	for w := range footprintConc {
		call := simple
		if w%4 == 3 {
			call = identity
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := call(); err != nil {
					failure.CompareAndSwap(nil, err)
					return
				}
				requests.Add(1)
			}
		}()
	}
	loadStart := time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if rss, err := procStatusMiB(pid, "VmRSS"); err == nil {
			fp.loadMiB = max(fp.loadMiB, rss)
		}
	}
	wg.Wait()
	fp.loadReqPerS = float64(requests.Load()) / time.Since(loadStart).Seconds()
	if e, ok := failure.Load().(error); ok {
		return fp, fmt.Errorf("under load: %w", e)
	}
	if fp.peakMiB, err = procStatusMiB(pid, "VmHWM"); err != nil {
		return fp, err
	}
	return fp, nil
}

// goBuild builds pkg of the module at root into out, with tags.
func goBuild(root, out, pkg, tags string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	build := exec.Command(goBin, "build", "-tags", tags, "-o", out, pkg)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// stopProcess ends a started process with SIGTERM, killing it after 15 s;
// exited receives cmd.Wait's result.
func stopProcess(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// measureFloor starts ortfloor on repository and returns the time from its
// start to its "ready" line (ONNX Runtime loaded, sessions created) and its
// resident set once idle.
func measureFloor(bin, lib, repository string) (readyMs float64, idle rss, err error) {
	var logs bytes.Buffer
	cmd := exec.Command(bin, "-lib", lib, repository)
	cmd.Stderr = &logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, idle, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, idle, err
	}
	line, readErr := bufio.NewReader(stdout).ReadString('\n')
	readyMs = float64(time.Since(start).Microseconds()) / 1e3
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer stopProcess(cmd, exited)
	if !strings.HasPrefix(line, "ready") {
		return 0, idle, fmt.Errorf("ortfloor: %q (%v)\n%s", line, readErr, logs.String())
	}
	time.Sleep(footprintIdle)
	idle, err = procRSS(cmd.Process.Pid)
	return readyMs, idle, err
}

// measureLambdaInit starts inferd in Lambda mode (AWS_LAMBDA_RUNTIME_API
// set) on repository and returns the time from its start to its first poll
// of the Runtime API, which has no event to give.
func measureLambdaInit(root, bin, repository string) (ms float64, err error) {
	polled := make(chan time.Time, 1)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			select {
			case polled <- time.Now():
			default:
			}
			<-r.Context().Done() // no event: the runtime waits, as on Lambda
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer api.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--model-repository="+repository)
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(api.URL, "http://"))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The process ends before the server closes: the pending poll
	// holds the server's Close until its connection drops.
	defer stopProcess(cmd, exited)
	select {
	case at := <-polled:
		return float64(at.Sub(start).Microseconds()) / 1e3, nil
	case err := <-exited:
		exited <- err
		return 0, fmt.Errorf("inferd (Lambda mode) exited before polling: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("inferd (Lambda mode) did not poll in a minute\n%s", logs.String())
	}
}

// procRSS reads the resident set of a process from /proc/<pid>/status.
func procRSS(pid int) (r rss, err error) {
	for _, f := range []struct {
		name string
		into *float64
	}{{"VmRSS", &r.total}, {"RssAnon", &r.anon}, {"RssFile", &r.file}} {
		if *f.into, err = procStatusMiB(pid, f.name); err != nil {
			return r, err
		}
	}
	return r, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls url until it answers 200, the process exits or a minute
// passes.
func waitReady(url string, exited <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("inferd exited before ready: %v", err)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return errors.New("inferd not ready after a minute")
}

var loadSeries = regexp.MustCompile(`(?m)^nv_model_load_duration_secs\{[^}]*\} (\S+)$`)

// loadDurations reads every nv_model_load_duration_secs series of the
// metrics endpoint and returns the longest and the sum, in ms.
func loadDurations(url string) (maxMs, sumMs float64, err error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	ms := loadSeries.FindAllSubmatch(text, -1)
	if len(ms) == 0 {
		return 0, 0, fmt.Errorf("no nv_model_load_duration_secs on %s", url)
	}
	for _, m := range ms {
		secs, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return 0, 0, fmt.Errorf("nv_model_load_duration_secs %q: %v", m[1], err)
		}
		maxMs = max(maxMs, secs*1e3)
		sumMs += secs * 1e3
	}
	return maxMs, sumMs, nil
}

// procStatusMiB reads a "kB" field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatusMiB(pid int, field string) (float64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %v", field, value, err)
		}
		return kb / 1024, nil
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// evictCache drops the page cache of files no process maps
// (POSIX_FADV_DONTNEED); a file it cannot open or advise is left as it is.
func evictCache(paths ...string) {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
}
