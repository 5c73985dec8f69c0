package perf

import (
	"bytes"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

func TestResponseCacheFigures(t *testing.T) {
	t.Parallel()
	// Ten requests: four cache hits of 2 µs, six misses of 5 µs lookup and
	// insertion that then ran for 100 µs of compute.
	before := statsSnapshot{}
	after := statsSnapshot{successCount: 10, successNS: 10 * 120000, inferenceCount: 6, executionCount: 6,
		queueCount: 10, queueNS: 10 * 3000, inputCount: 6, inputNS: 6 * 10000, inferCount: 6, inferNS: 6 * 80000, outputCount: 6, outputNS: 6 * 10000,
		cacheHitCount: 4, cacheHitNS: 4 * 2000, cacheMissCount: 6, cacheMissNS: 6 * 5000}
	s := split(before, after)
	s.ResponseCache = true
	// perf_analyzer's overhead with a cache: request 120 - queue 3 -
	// (hits + misses + compute) / (compute count + hits) = (8+30+600)/10 = 63.8;
	// printed from whole microseconds, 120 - 3 - 63 = 54.
	if s.CacheHits != 4 || s.CacheMisses != 6 || s.CacheHitUS != 2 || s.CacheMissUS != 5 || s.ComputeUS != 63.8 || s.OverheadUS < 53.19 || s.OverheadUS > 53.21 {
		t.Fatalf("split %+v", s)
	}
	r := result{Concurrency: 1, Throughput: 100, Requests: 10, Avg: 150, Percentiles: map[int]float64{50: 1, 90: 2, 95: 3, 99: 4}, Stable: true, Server: s}
	o, err := parseArgs([]string{"-m", "m"}, io.Discard)
	must(t, err)
	var b bytes.Buffer
	writeSettingReport(&b, o, r)
	for _, line := range []string{
		"    Cache hit count: 4\n    Cache miss count: 6\n    Successful request count: 10\n",
		"    Avg request latency: 120 usec (overhead 54 usec + queue 3 usec + cache hit/miss 63 usec)\n",
		"      Average Cache Hit Latency: 2 usec\n",
		"      Average Cache Miss Latency: 105 usec (cache lookup/insertion 5 usec + compute input 10 usec + compute infer 80 usec + compute output 10 usec)\n",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("no %q in\n%s", line, b.String())
		}
	}
	b.Reset()
	must(t, writeCSV(&b, o, []result{r}))
	if head, _, _ := strings.Cut(b.String(), "\n"); head != "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,Server Cache Hit,Server Cache Miss,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency" {
		t.Errorf("header %s", head)
	}
	// Network: 150 - queue 3 - compute 100 - hit 2 - miss 5 = 40.
	if !strings.Contains(b.String(), "\n1,100,0,40,3,10,80,10,2,5,0,1,2,3,4\n") {
		t.Errorf("CSV\n%s", b.String())
	}
}

func TestResponseCacheAgainstInferd(t *testing.T) {
	t.Parallel()
	models := testModels(t)
	m := models["simple"]
	m.Config += "response_cache { enable: true }\n"
	core := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, map[string]servertest.Model{"cached": m}),
		ResponseCache: cache.NewLocalSize(1 << 20)})
	hs := httptest.NewServer(httpapi.New(core, httpapi.Options{}))
	t.Cleanup(hs.Close)
	addr := strings.TrimPrefix(hs.URL, "http://")
	csvPath := filepath.Join(t.TempDir(), "r.csv")
	// Zero inputs: every request after the first is a hit.
	code, stdout, stderr := runPerf(t, append([]string{"-m", "cached", "-u", addr, "--input-data", "zero", "-f", csvPath}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "    Cache hit count: ") || !strings.Contains(stdout, "      Average Cache Hit Latency: ") {
		t.Errorf("no cache lines:\n%s", stdout)
	}
	rows := readCSV(t, csvPath)
	if len(rows) != 1 || rows[0]["Server Cache Hit"] == "" || rows[0]["Server Cache Miss"] == "" {
		t.Errorf("rows %v", rows)
	}
}
