package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/redistest"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// cachedSimple is Triton's `simple` model with the response cache on.
const cachedSimple = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
response_cache { enable: true }
`

// simpleBody is an HTTP request of `simple` with INPUT0 = base..base+15
// and INPUT1 = 1.
func simpleBody(base int) string {
	var in0, in1 []string
	for i := range 16 {
		in0 = append(in0, strconv.Itoa(base+i))
		in1 = append(in1, "1")
	}
	return fmt.Sprintf(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[%s]},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[%s]}]}`,
		strings.Join(in0, ","), strings.Join(in1, ","))
}

// simpleGRPC is the same request over gRPC.
func simpleGRPC(base int32) *pb.ModelInferRequest {
	var in0, in1 []byte
	for i := range int32(16) {
		in0 = binary.LittleEndian.AppendUint32(in0, uint32(base+i))
		in1 = binary.LittleEndian.AppendUint32(in1, 1)
	}
	return &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
		{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
	}, RawInputContents: [][]byte{in0, in1}}
}

// cacheCounts reads the model's executions and cache hits and misses from
// the HTTP statistics, checks that gRPC's statistics agree, and returns
// the metrics text (when quiet: no request is running).
func cacheCounts(t *testing.T, r *running, c pb.GRPCInferenceServiceClient, quiet bool) (execs, hits, misses int, metrics string) {
	t.Helper()
	s, body := get(t, r.http+"/v2/models/simple/stats")
	if s != 200 {
		t.Fatalf("stats: %d %s", s, body)
	}
	num := func(re string) int {
		m := regexp.MustCompile(re).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%s not in %s", re, body)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	execs = num(`"execution_count":(\d+)`)
	hits = num(`"cache_hit":\{"count":(\d+)`)
	misses = num(`"cache_miss":\{"count":(\d+)`)
	g, err := c.ModelStatistics(context.Background(), &pb.ModelStatisticsRequest{Name: "simple"})
	if err != nil {
		t.Fatal(err)
	}
	st := g.GetModelStats()[0]
	if quiet && (int(st.GetExecutionCount()) != execs || int(st.GetInferenceStats().GetCacheHit().GetCount()) != hits || int(st.GetInferenceStats().GetCacheMiss().GetCount()) != misses) {
		t.Errorf("gRPC statistics %v disagree with HTTP's %s", st, body)
	}
	_, metrics = get(t, r.metrics+"/metrics")
	return execs, hits, misses, metrics
}

// startCached starts the server with its log; r.metrics is set too.
func startCached(t *testing.T, args ...string) *running {
	t.Helper()
	r := startLogged(t, args...)
	r.metrics = "http://" + r.addrs["metrics"]
	return r
}

func TestResponseCacheOverHTTPAndGRPC(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", cachedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name  string
		args  []string
		local bool
	}{
		{"local", []string{"--cache-config=local,size=1048576", "--metrics-config=summary_latencies=true"}, true},
		{"deprecated byte size", []string{"--response-cache-byte-size=1048576"}, true},
		{"redis", []string{"--cache-config=redis,host=" + srv.Host, "--cache-config=redis,port=" + strconv.Itoa(srv.Port)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startCached(t, append([]string{"--model-repository=" + root}, tc.args...)...)
			c := grpcClient(t, r)
			base := int(time.Now().UnixNano() % 1000000) // fresh keys in the shared Redis
			s, first := post(t, r.http+"/v2/models/simple/infer", simpleBody(base))
			if s != 200 {
				t.Fatalf("infer: %d %s", s, first)
			}
			s, second := post(t, r.http+"/v2/models/simple/infer", simpleBody(base))
			if s != 200 || second != first {
				t.Fatalf("a hit answered %d %s, the miss %s", s, second, first)
			}
			g, err := c.ModelInfer(context.Background(), simpleGRPC(int32(base)))
			if err != nil {
				t.Fatal(err)
			}
			if v := int32(binary.LittleEndian.Uint32(g.GetRawOutputContents()[0][4*15:])); v != int32(base+15+1) {
				t.Errorf("gRPC hit OUTPUT0[15] = %d, want %d", v, base+16)
			}
			execs, hits, misses, text := cacheCounts(t, r, c, true)
			if execs != 1 || hits != 2 || misses != 1 {
				t.Errorf("executions %d, hits %d, misses %d; want 1, 2, 1", execs, hits, misses)
			}
			if v := metricValue(t, text, `nv_cache_num_hits_per_model{model="simple",version="1"}`); v != "2" {
				t.Errorf("nv_cache_num_hits_per_model = %s", v)
			}
			if v := metricValue(t, text, `nv_cache_num_misses_per_model{model="simple",version="1"}`); v != "1" {
				t.Errorf("nv_cache_num_misses_per_model = %s", v)
			}
			metricValue(t, text, `nv_cache_hit_duration_per_model{model="simple",version="1"}`)
			metricValue(t, text, `nv_cache_miss_duration_per_model{model="simple",version="1"}`)
			if v := metricValue(t, text, `nv_inference_request_success{model="simple",version="1"}`); v != "3" {
				t.Errorf("nv_inference_request_success = %s, want 3 (hits are successes)", v)
			}
			if v := metricValue(t, text, `nv_inference_count{model="simple",version="1"}`); v != "1" {
				t.Errorf("nv_inference_count = %s, want 1 (hits are no inferences)", v)
			}
			if tc.local {
				if v := metricValue(t, text, "nv_cache_num_entries"); v != "1" {
					t.Errorf("nv_cache_num_entries = %s", v)
				}
			}
			summaries := strings.Contains(strings.Join(tc.args, " "), "summary_latencies=true")
			for series, want := range map[string]string{
				`nv_cache_hit_summary_per_model_count{model="simple",version="1"}`:  "2",
				`nv_cache_miss_summary_per_model_count{model="simple",version="1"}`: "1",
				`nv_inference_queue_summary_us_count{model="simple",version="1"}`:   "3", // hits too, as in Triton
			} {
				if !summaries {
					if strings.Contains(text, "nv_cache_hit_summary_per_model") {
						t.Errorf("cache summaries without summary_latencies=true")
					}
					break
				}
				if v := metricValue(t, text, series); v != want {
					t.Errorf("%s = %s, want %s", series, v, want)
				}
			}
		})
	}
}

func TestResponseCacheEvicts(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", cachedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	// One response entry (two 64-byte outputs and their names and shapes)
	// fits in 400 bytes, two do not.
	r := startCached(t, "--model-repository="+root, "--cache-config=local,size=400")
	c := grpcClient(t, r)
	for _, base := range []int{1, 2, 1} {
		if s, b := post(t, r.http+"/v2/models/simple/infer", simpleBody(base)); s != 200 {
			t.Fatalf("infer: %d %s", s, b)
		}
	}
	execs, hits, misses, text := cacheCounts(t, r, c, true)
	if execs != 3 || hits != 0 || misses != 3 {
		t.Errorf("executions %d, hits %d, misses %d; want 3, 0, 3 (1 evicted by 2, then 2 by 1)", execs, hits, misses)
	}
	if v := metricValue(t, text, "nv_cache_num_evictions"); v != "2" {
		t.Errorf("nv_cache_num_evictions = %s, want 2", v)
	}
	if s, b := post(t, r.http+"/v2/models/simple/infer", simpleBody(1)); s != 200 {
		t.Fatalf("infer: %d %s", s, b)
	}
	if _, hits, _, _ := cacheCounts(t, r, c, true); hits != 1 {
		t.Errorf("hits = %d after repeating the last request, want 1", hits)
	}
}

func TestResponseCacheStartErrors(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cache-config=redis,host=" + srv.Host, "--cache-config=redis,port=" + strconv.Itoa(srv.Port)}, "Failed to initialize RedisCache: cannot reach Redis at " + srv.Addr()},
		{[]string{"--cache-config=redis,host=" + srv.Host}, "Must at a minimum specify 'host' and 'port'"},
		{[]string{"--cache-config=local,size=10", "--cache-config=redis,host=x"}, "found multiple cache configurations, but only a single cache is currently supported"},
		{[]string{"--cache-config=memcached,size=10"}, "unable to find 'libtritoncache_memcached.so' for cache. Searched: /opt/tritonserver/caches"},
		{[]string{"--cache-config=local,size=x"}, "Failed to initialize LocalCache: 'size' config must be a string or uint type"},
	} {
		cfg, err := parseFlags(append([]string{"--http-port=0", "--metrics-port=0", "--grpc-port=0", "--model-repository=" + t.TempDir()}, tc.args...), io.Discard)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(map[string]string) { cancel() })
			cancel()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	_, err := parseFlags([]string{"--response-cache-byte-size=10", "--cache-config=local,size=10"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. Please provide one or the other.") {
		t.Errorf("both flags: %v", err)
	}
}

// A Redis that goes away or stalls mid-run turns into misses, never
// failed requests, and serves hits again once it is back.
func TestRedisOutageUnderLoad(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", cachedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	srv := redistest.Start(t)
	r := startCached(t, "--model-repository="+root, "--cache-config=redis,host="+srv.Host, "--cache-config=redis,port="+strconv.Itoa(srv.Port))
	c := grpcClient(t, r)
	var failed, sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if w%2 == 0 {
					var resp *http.Response
					resp, err = http.Post(r.http+"/v2/models/simple/infer", "application/json", strings.NewReader(simpleBody(i%4)))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
				} else {
					_, err = c.ModelInfer(context.Background(), simpleGRPC(int32(i%4)))
				}
				sent.Add(1)
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	phase := func() { time.Sleep(1500 * time.Millisecond) }
	phase()
	_, hitsBefore, _, _ := cacheCounts(t, r, c, false)
	srv.Stop()
	phase()
	_, hitsDown, missesDown, _ := cacheCounts(t, r, c, false)
	phase()
	_, hitsStillDown, missesStillDown, _ := cacheCounts(t, r, c, false)
	srv.Restart()
	time.Sleep(3 * time.Second) // past the pause after a failure, and refilled
	_, hitsBack, _, _ := cacheCounts(t, r, c, false)
	phase()
	_, hitsLater, _, _ := cacheCounts(t, r, c, false)
	// A stall: the server holds its connections and answers nothing.
	srv.Pause()
	phase()
	_, hitsStalled, _, _ := cacheCounts(t, r, c, false)
	phase()
	_, hitsStillStalled, _, _ := cacheCounts(t, r, c, false)
	srv.Resume()
	time.Sleep(3 * time.Second)
	_, hitsResumed, _, _ := cacheCounts(t, r, c, false)
	phase()
	_, hitsAfterStall, _, _ := cacheCounts(t, r, c, false)
	close(stop)
	wg.Wait()
	if hitsStillStalled != hitsStalled {
		t.Errorf("hits while Redis was stalled: %d -> %d", hitsStalled, hitsStillStalled)
	}
	if hitsAfterStall <= hitsResumed {
		t.Errorf("no hits after the stall (%d -> %d)", hitsResumed, hitsAfterStall)
	}
	if failed.Load() != 0 {
		t.Errorf("%d of %d requests failed around a Redis outage and stall", failed.Load(), sent.Load())
	}
	if hitsBefore == 0 {
		t.Error("no hits before the outage")
	}
	if hitsStillDown-hitsDown > 0 || missesStillDown <= missesDown {
		t.Errorf("while Redis was down: hits %d -> %d, misses %d -> %d; want only misses", hitsDown, hitsStillDown, missesDown, missesStillDown)
	}
	if hitsLater <= hitsBack {
		t.Errorf("no hits after Redis came back (%d -> %d)", hitsBack, hitsLater)
	}
}

// An ensemble with the cache on answers a repeated request at its top
// level: no step runs. Decoupled and sequence models with the cache on are
// refused at load with Triton's errors.
func TestResponseCacheEnsembleAndRefusals(t *testing.T) {
	chain := servertest.Chain("chain")
	chain.Config += "response_cache { enable: true }\n"
	decoupled := servertest.Simple("decoupled")
	decoupled.Config += "model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n"
	sequence := servertest.Simple("sequence")
	sequence.Config += "sequence_batching { }\nresponse_cache { enable: true }\n"
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"), "chain": chain, "decoupled": decoupled, "sequence": sequence,
	})
	r := startCached(t, "--model-repository="+root, "--cache-config=local,size=1048576", "--exit-on-error=false", "--strict-readiness=false")
	body := `{"inputs":[{"name":"IN0","shape":[1,16],"datatype":"INT32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]},{"name":"IN1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	s, first := post(t, r.http+"/v2/models/chain/infer", body)
	if s != 200 {
		t.Fatalf("chain: %d %s", s, first)
	}
	if s, again := post(t, r.http+"/v2/models/chain/infer", body); s != 200 || again != first {
		t.Fatalf("chain hit: %d %s, miss %s", s, again, first)
	}
	_, stats := get(t, r.http+"/v2/models/simple/stats")
	if !strings.Contains(stats, `"execution_count":2,`) {
		t.Errorf("the steps ran again on a hit: %s", stats)
	}
	_, stats = get(t, r.http+"/v2/models/chain/stats")
	if !strings.Contains(stats, `"cache_hit":{"count":1,`) || !strings.Contains(stats, `"cache_miss":{"count":1,`) {
		t.Errorf("chain statistics: %s", stats)
	}
	_, index := post(t, r.http+"/v2/repository/index", "")
	for _, want := range []string{
		"Response Cache does not currently support model decoupled with 'decoupled' transaction policy. Please disable the response cache.",
		"Response Cache does not currently support model sequence with sequence batching scheduler. Please disable the response cache.",
	} {
		if !strings.Contains(index, want) {
			t.Errorf("index %s lacks %q", index, want)
		}
	}
}

// Two servers sharing one Redis share its entries: what one computed the
// other answers without running its model.
func TestRedisSharedBetweenServers(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "simple", cachedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	srv := redistest.Start(t)
	args := []string{"--model-repository=" + root, "--cache-config=redis,host=" + srv.Host, "--cache-config=redis,port=" + strconv.Itoa(srv.Port)}
	a, b := startCached(t, args...), startCached(t, args...)
	s, first := post(t, a.http+"/v2/models/simple/infer", simpleBody(40))
	if s != 200 {
		t.Fatalf("infer on the first server: %d %s", s, first)
	}
	s, second := post(t, b.http+"/v2/models/simple/infer", simpleBody(40))
	if s != 200 || second != first {
		t.Fatalf("the second server answered %d %s, the first %s", s, second, first)
	}
	if execs, hits, misses, _ := cacheCounts(t, b, grpcClient(t, b), true); execs != 0 || hits != 1 || misses != 0 {
		t.Errorf("second server: executions %d, hits %d, misses %d; want 0, 1, 0", execs, hits, misses)
	}
}
