package httpapi

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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/modroot"
)

// footprint is what BenchmarkFootprint measures of one inferd process.
type footprint struct {
	readyMs     float64 // process start to /v2/health/ready answering 200
	loadMs      float64 // longest nv_model_load_duration_secs
	loadSumMs   float64 // sum over the repository's models
	idleMiB     float64 // VmRSS once ready and idle
	loadMiB     float64 // highest VmRSS sampled under load
	peakMiB     float64 // VmHWM at the end of the load
	loadReqPerS float64
}

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
)

// BenchmarkFootprint builds the inferd binary, serves the example repository
// (examples/model_repository) with it and reports (BENCHMARKS.md, figure 4):
// the time to ready and the longest model load (nv_model_load_duration_secs
// on /metrics), the resident set (VmRSS of /proc/<pid>/status) once idle,
// its highest value while 16 clients post for 3 s (12 on `simple` with JSON
// tensors, 4 on `identity_fp32` with 256 KiB binary tensors), and VmHWM.
// One process is measured per benchmark run (per -count repetition),
// whatever b.N:
//
//	go test ./platforms/httpapi -run '^$' -bench BenchmarkFootprint
func BenchmarkFootprint(b *testing.B) {
	if footprintOf.b != b {
		footprintOf.fp, footprintOf.err = measureFootprint(b.TempDir())
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
	b.ReportMetric(fp.loadMs, "load-max-ms")
	b.ReportMetric(fp.loadSumMs, "load-sum-ms")
	b.ReportMetric(fp.idleMiB, "idle-rss-MiB")
	b.ReportMetric(fp.loadMiB, "load-rss-MiB")
	b.ReportMetric(fp.peakMiB, "peak-rss-MiB")
	b.ReportMetric(fp.loadReqPerS, "load-req/s")
}

func measureFootprint(dir string) (fp footprint, err error) {
	root, err := modroot.Dir()
	if err != nil {
		return fp, err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(dir, "inferd")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/inferd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fp, fmt.Errorf("go build ./cmd/inferd: %v\n%s", err, out)
	}
	httpPort, err := freePort()
	if err != nil {
		return fp, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return fp, err
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--model-repository="+filepath.Join(root, "examples", "model_repository"),
		"--http-address=127.0.0.1", "--http-port="+strconv.Itoa(httpPort), "--metrics-port="+strconv.Itoa(metricsPort))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &logs, &logs
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fp, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if err != nil {
			err = fmt.Errorf("%w\ninferd log:\n%s", err, logs.String())
		}
	}()

	base := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	if err := waitReady(base+"/v2/health/ready", exited); err != nil {
		return fp, err
	}
	fp.readyMs = float64(time.Since(start).Microseconds()) / 1e3
	if fp.loadMs, fp.loadSumMs, err = loadDurations("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"); err != nil {
		return fp, err
	}
	time.Sleep(500 * time.Millisecond)
	pid := cmd.Process.Pid
	if fp.idleMiB, err = procStatusMiB(pid, "VmRSS"); err != nil {
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
