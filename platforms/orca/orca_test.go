package orca_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	xds "github.com/cncf/xds/go/xds/data/orca/v3"
	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	_ "google.golang.org/grpc/orca" // the trailer parser DoneInfo.ServerLoad comes from
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/grpcapi"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/sagemaker"
	"github.com/inferd/inferd/vertex"
)

// gate is a backend whose executions wait until the test lets one
// through, so that requests queue behind them; y = x.
type gate struct{ open, entered chan struct{} }

func (gate) Name() string { return "gate" }
func (gate) AutoComplete(context.Context, core.VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (g gate) NewInstance(_ context.Context, spec core.InstanceSpec) (core.Instance, error) {
	return core.Concatenated(spec.Config, gateInstance(g)), nil
}

type gateInstance gate

func (g gateInstance) Execute(ctx context.Context, b *core.ConcatBatch) error {
	b.ComputeStart, b.InferStart = time.Now(), time.Now()
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.Results = []*core.Tensor{{Name: "OUT", DataType: b.Inputs[0].DataType, Shape: b.Inputs[0].Shape, Data: b.Inputs[0].Data}}
	b.InferEnd, b.ComputeEnd = time.Now(), time.Now()
	return nil
}
func (gateInstance) Close() error { return nil }

const gateConfig = `name: "slow"
backend: "gate"
max_batch_size: 4
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

// env is a server with every route that reports load: the v2 HTTP API,
// SageMaker and Vertex over it, gRPC, and the metrics endpoint, with a
// KV-cache family as a backend's custom metrics would export it.
type env struct {
	http, sagemaker, vertex, metrics string
	grpcAddr                         string
	grpcAPI                          *grpcapi.Server
	kv                               *prometheus.GaugeVec
	gate, entered                    chan struct{}
}

// start builds the env. Its Reporter reuses the KV-cache figures for
// 100 ms as a server's does, which the tests that set the family once,
// before any report, do not see; a test that changes the family between
// requests passes orca.KVCacheOff.
func start(t *testing.T, opts ...func(orca.Options) orca.Options) *env {
	t.Helper()
	e := &env{gate: make(chan struct{}), entered: make(chan struct{}, 16)}
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"slow":   {Config: gateConfig, ONNX: []byte{}},
	})
	srv := servertest.Start(t, servertest.Options{Repo: root, Backends: []core.Backend{gate{e.gate, e.entered}}})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	e.kv = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nv_trt_llm_kv_cache_block_metrics", Help: "KV-cache blocks"},
		[]string{"kv_cache_block_type", "model", "version"})
	custom := prometheus.NewRegistry()
	custom.MustRegister(e.kv)
	o := orca.Options{Metrics: custom, Logger: quiet}
	for _, f := range opts {
		o = f(o)
	}
	loads := orca.New(o)

	api := httpapi.New(srv, httpapi.Options{Logger: quiet, LoadReports: loads})
	e.http = serve(t, api)
	e.sagemaker = serve(t, sagemaker.New(srv, api, sagemaker.Options{DefaultModel: "simple", Logger: quiet}))
	vh := vertex.New(srv, api, vertex.Options{HealthRoute: "/health", PredictRoute: "/predict", DefaultModel: "simple", Logger: quiet})
	servertest.Must(t, vh.Resolve())
	e.vertex = serve(t, vh)
	e.metrics = serve(t, metrics.NewHandler(srv, metrics.DefaultConfig(), e.kv))

	g := grpcapi.New(srv, grpcapi.Options{Logger: quiet, LoadReports: loads})
	e.grpcAPI = g
	gs := grpc.NewServer(g.ServerOptions()...)
	g.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(t, err)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	e.grpcAddr = ln.Addr().String()
	t.Cleanup(func() { close(e.gate) }) // before the core's shutdown
	return e
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s.URL
}

// setKV sets the family's three series (a missing one when < 0).
func (e *env) setKV(tokensPer, used, maxBlocks float64) {
	e.kv.Reset()
	for typ, v := range map[string]float64{"tokens_per": tokensPer, "used": used, "max": maxBlocks} {
		if v >= 0 {
			e.kv.WithLabelValues(typ, "llm", "1").Set(v)
		}
	}
}

const simpleBody = `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},` +
	`{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`

const generateBody = `{"INPUT0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"INPUT1":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}`

func post(t *testing.T, url, format, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	servertest.Must(t, err)
	req.Header.Set("Content-Type", "application/json")
	if format != "" {
		req.Header.Set("endpoint-load-metrics-format", format)
	}
	resp, err := http.DefaultClient.Do(req)
	servertest.Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	servertest.Must(t, err)
	return resp, string(b)
}

// envoyText parses a TEXT report as Envoy's ORCA parser does: comma
// separated name:value pairs, the five standard fields and
// named_metrics.<name>, no repeats, finite numbers.
func envoyText(t *testing.T, v string) *xds.OrcaLoadReport {
	t.Helper()
	body, ok := strings.CutPrefix(v, "TEXT ")
	if !ok {
		t.Fatalf("%q: no TEXT prefix", v)
	}
	rep := &xds.OrcaLoadReport{NamedMetrics: map[string]float64{}}
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(body, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || name == "" || val == "" || seen[name] {
			t.Fatalf("%q: bad or repeated pair %q", v, pair)
		}
		seen[name] = true
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("%q: value of %s: %q", v, name, val)
		}
		switch name {
		case "cpu_utilization":
			rep.CpuUtilization = f
		case "mem_utilization":
			rep.MemUtilization = f
		case "application_utilization":
			rep.ApplicationUtilization = f
		case "rps_fractional":
			rep.RpsFractional = f
		case "eps":
			rep.Eps = f
		default:
			key, ok := strings.CutPrefix(name, "named_metrics.")
			if !ok || key == "" {
				t.Fatalf("%q: unsupported metric name %q", v, name)
			}
			rep.NamedMetrics[key] = f
		}
	}
	return rep
}

// envoyJSON parses a JSON report as Envoy does: the OrcaLoadReport's JSON
// mapping, unknown fields refused.
func envoyJSON(t *testing.T, v string) *xds.OrcaLoadReport {
	t.Helper()
	body, ok := strings.CutPrefix(v, "JSON ")
	if !ok {
		t.Fatalf("%q: no JSON prefix", v)
	}
	rep := &xds.OrcaLoadReport{}
	if err := protojson.Unmarshal([]byte(body), rep); err != nil {
		t.Fatalf("%q: %v", v, err)
	}
	return rep
}

// envoyBin decodes endpoint-load-metrics-bin.
func envoyBin(t *testing.T, v string) *xds.OrcaLoadReport {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatalf("%q: %v", v, err)
	}
	rep := &xds.OrcaLoadReport{}
	servertest.Must(t, proto.Unmarshal(raw, rep))
	return rep
}

// scrape reads the metrics endpoint's samples, by name and labels as
// written ("nv_inference_count{model=\"simple\",version=\"1\"}").
func (e *env) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(e.metrics + "/metrics")
	servertest.Must(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		servertest.Must(t, err)
		out[line[:i]] = v
	}
	return out
}

func series(model, name string) string {
	return fmt.Sprintf(`%s{model="%s",version="1"}`, name, model)
}

// TestInferReport: /infer and the platform routes over it report the
// model's load in the asked format and in binary, and the binary form
// agrees with the text form and with the metrics endpoint.
func TestInferReport(t *testing.T) {
	e := start(t)
	e.setKV(64, 2, 8)
	envelope := `{"instances":[{"INPUT0":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"INPUT1":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	routes := []struct{ name, url, body string }{
		{"v2", e.http + "/v2/models/simple/infer", simpleBody},
		{"sagemaker", e.sagemaker + "/invocations", simpleBody},
		{"vertex-v2", e.vertex + "/predict", simpleBody},
		{"vertex-envelope", e.vertex + "/predict", envelope},
	}
	for _, r := range routes {
		for _, format := range []string{"text", "json"} {
			t.Run(r.name+"/"+format, func(t *testing.T) {
				resp, body := post(t, r.url, format, r.body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				m := e.scrape(t)
				text, bin := resp.Header.Values(orca.Header), resp.Header.Values(orca.BinHeader)
				if len(text) != 1 || len(bin) != 1 {
					t.Fatalf("headers %v", resp.Header)
				}
				var got *xds.OrcaLoadReport
				if format == "json" {
					got = envoyJSON(t, text[0])
				} else {
					got = envoyText(t, text[0])
				}
				want := envoyBin(t, bin[0])
				if !proto.Equal(got, want) {
					t.Fatalf("%s form %v differs from the binary %v", format, got, want)
				}
				nm := want.GetNamedMetrics()
				count, execs := m[series("simple", "nv_inference_count")], m[series("simple", "nv_inference_exec_count")]
				checks := []struct {
					name      string
					got, want float64
				}{
					{"queue_size", nm["queue_size"], m[series("simple", "nv_inference_pending_request_count")]},
					{"batch_fill", nm["batch_fill"], count / execs / 8},
					{"instance_utilization", nm["instance_utilization"], 0},
					{"kv_cache_utilization", nm["kv_cache_utilization"], 0.25},
					{"max_token_capacity", nm["max_token_capacity"], 512},
				}
				for _, c := range checks {
					if c.got != c.want {
						t.Errorf("%s = %v, want %v (metrics: count %v, executions %v)", c.name, c.got, c.want, count, execs)
					}
				}
				if want.GetRpsFractional() <= 0 || want.GetEps() != 0 {
					t.Errorf("rps %v, eps %v: want > 0 and 0", want.GetRpsFractional(), want.GetEps())
				}
				for name, v := range map[string]float64{"cpu": want.GetCpuUtilization(), "mem": want.GetMemUtilization(), "application": want.GetApplicationUtilization()} {
					if !(v >= 0 && v <= 1) || (name == "mem" && v == 0) {
						t.Errorf("%s_utilization = %v, want within (0, 1]", name, v)
					}
				}
			})
		}
	}
}

// TestNoReport: no header, or a value other than text / json, gets none;
// and so does every route but the inference ones.
func TestNoReport(t *testing.T) {
	e := start(t)
	e.setKV(64, 2, 8)
	cases := []struct{ name, url, format, body string }{
		{"no header", e.http + "/v2/models/simple/infer", "", simpleBody},
		{"upper case", e.http + "/v2/models/simple/infer", "JSON", simpleBody},
		{"unknown", e.http + "/v2/models/simple/infer", "xml", simpleBody},
		{"generate without header", e.http + "/v2/models/simple/generate", "", generateBody},
		{"generate unknown", e.http + "/v2/models/simple/generate", "binary", generateBody},
		{"unknown model", e.http + "/v2/models/nope/infer", "json", simpleBody},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, _ := post(t, c.url, c.format, c.body)
			for _, h := range []string{orca.Header, orca.BinHeader} {
				if v := resp.Header.Values(h); len(v) != 0 {
					t.Errorf("%s: %q", h, v)
				}
			}
		})
	}
}

// TestGenerateReport is Triton's report on /generate and
// /generate_stream (triton-inference-server/server src/orca_http.cc): the
// KV-cache figures in its exact
// forms, none when the family lacks a series.
func TestGenerateReport(t *testing.T) {
	e := start(t, orca.KVCacheOff) // every case sets the family anew
	cases := []struct {
		name                  string
		tokensPer, used, maxB float64
		format, want          string
	}{
		{"json", 64, 2, 4, "json", `JSON {"named_metrics":{"kv_cache_utilization":0.5,"max_token_capacity":256}}`},
		{"text", 64, 2, 4, "text", `TEXT named_metrics.kv_cache_utilization=0.500000, named_metrics.max_token_capacity=256`},
		{"json zero max", 64, 2, 0, "json", `JSON {"named_metrics":{"kv_cache_utilization":0.0,"max_token_capacity":0}}`},
		{"text thirds", 16, 1, 3, "text", `TEXT named_metrics.kv_cache_utilization=0.333333, named_metrics.max_token_capacity=48`},
		{"truncated capacity", 0.5, 1, 3, "json", `JSON {"named_metrics":{"kv_cache_utilization":0.3333333333333333,"max_token_capacity":1}}`},
		{"no used series", 64, -1, 4, "json", ""},
		{"no max series", 64, 2, -1, "text", ""},
	}
	for _, c := range cases {
		for _, route := range []string{"generate", "generate_stream"} {
			t.Run(c.name+"/"+route, func(t *testing.T) {
				e.setKV(c.tokensPer, c.used, c.maxB)
				resp, body := post(t, e.http+"/v2/models/simple/"+route, c.format, generateBody)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				got := resp.Header.Values(orca.Header)
				if c.want == "" {
					if len(got) != 0 || len(resp.Header.Values(orca.BinHeader)) != 0 {
						t.Fatalf("headers %v, want no report", resp.Header)
					}
					return
				}
				if len(got) != 1 || got[0] != c.want {
					t.Fatalf("%s = %q, want %q", orca.Header, got, c.want)
				}
				bin := envoyBin(t, resp.Header.Get(orca.BinHeader))
				if u := bin.GetNamedMetrics()["kv_cache_utilization"]; u != c.used/max(c.maxB, 1)*min(c.maxB, 1) && !(c.maxB == 0 && u == 0) {
					t.Fatalf("binary kv_cache_utilization %v", u)
				}
			})
		}
	}
	// On the wire the names are lower-case, as Triton writes them.
	e.setKV(64, 2, 4)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.http, "http://"))
	servertest.Must(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /v2/models/simple/generate HTTP/1.1\r\nHost: x\r\nEndpoint-Load-Metrics-Format: json\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(generateBody), generateBody)
	servertest.Must(t, err)
	raw, err := io.ReadAll(conn)
	servertest.Must(t, err)
	if !strings.Contains(string(raw), "\r\nendpoint-load-metrics: JSON {") || !strings.Contains(string(raw), "\r\nendpoint-load-metrics-bin: ") {
		t.Fatalf("raw reply without lower-case report headers:\n%s", raw)
	}

	// Triton ignores the header on /infer; this server reports there too,
	// but in the standard form, never Triton's generate-only one.
	resp, _ := post(t, e.http+"/v2/models/simple/infer", "json", simpleBody)
	if v := resp.Header.Get(orca.Header); !strings.HasPrefix(v, `JSON {"cpu_utilization":`) {
		t.Fatalf("/infer: %q", v)
	}
}

// TestQueueSize: the report of a request that waited behind others shows
// the queue the metrics endpoint shows at that moment.
func TestQueueSize(t *testing.T) {
	e := start(t)
	body := `{"inputs":[{"name":"IN","datatype":"INT32","shape":[1,1],"data":[1]}]}`
	url := e.http + "/v2/models/slow/infer"
	var wg sync.WaitGroup
	send := func(format string) chan *http.Response {
		ch := make(chan *http.Response, 1)
		wg.Go(func() {
			resp, _ := post(t, url, format, body)
			ch <- resp
		})
		return ch
	}
	waitPending := func(n float64) {
		deadline := time.Now().Add(10 * time.Second)
		for e.scrape(t)[series("slow", "nv_inference_pending_request_count")] != n {
			if time.Now().After(deadline) {
				t.Fatalf("pending never reached %v", n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	send("") // runs, held at the gate
	<-e.entered
	asked := send("json") // queued first
	waitPending(1)
	send("")
	send("")
	waitPending(3)
	e.gate <- struct{}{} // the first finishes; the asking one runs
	<-e.entered
	// The asking one finishes; its instance takes the third before the
	// reply goes, so one is left queued.
	e.gate <- struct{}{}
	resp := <-asked
	m := e.scrape(t)
	rep := envoyBin(t, resp.Header.Get(orca.BinHeader))
	pending := m[series("slow", "nv_inference_pending_request_count")]
	if q := rep.GetNamedMetrics()["queue_size"]; q != pending || q != 1 {
		t.Fatalf("queue_size %v, metrics' pending %v; want 1 and 1", q, pending)
	}
	if u := rep.GetNamedMetrics()["instance_utilization"]; u != 0 && u != 1 {
		t.Fatalf("instance_utilization %v of one instance", u)
	}
	e.gate <- struct{}{}
	e.gate <- struct{}{}
	wg.Wait()
}

// loads receives DoneInfo.ServerLoad of each call picked by the
// "orca_test_lb" policy: what grpc-go hands a load balancer from the
// call's trailer (its orca package registers the parser).
var loads = make(chan any, 16)

func init() {
	balancer.Register(base.NewBalancerBuilder("orca_test_lb", loadPickerBuilder{}, base.Config{}))
}

type loadPickerBuilder struct{}

func (loadPickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	for sc := range info.ReadySCs {
		return loadPicker{sc}
	}
	return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
}

type loadPicker struct{ sc balancer.SubConn }

func (p loadPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{SubConn: p.sc, Done: func(di balancer.DoneInfo) { loads <- di.ServerLoad }}, nil
}

// TestGRPCTrailer: ModelInfer puts the report in the trailer that grpc-go
// gives its load balancers on every call (gRPC clients never ask), or,
// with TrailerOnlyWhenAsked, only when the call's metadata asks.
func TestGRPCTrailer(t *testing.T) {
	onlyAsked := func(o orca.Options) orca.Options { o.TrailerOnlyWhenAsked = true; return o }
	for _, c := range []struct {
		name      string
		opts      []func(orca.Options) orca.Options
		ask, want bool
	}{
		{"every call, asked", nil, true, true},
		{"every call, not asked", nil, false, true},
		{"only when asked, asked", []func(orca.Options) orca.Options{onlyAsked}, true, true},
		{"only when asked, not asked", []func(orca.Options) orca.Options{onlyAsked}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, c.opts...)
			e.setKV(64, 2, 8)
			conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"orca_test_lb":{}}]}`))
			servertest.Must(t, err)
			defer conn.Close()
			ctx := context.Background()
			if c.ask {
				ctx = metadata.AppendToOutgoingContext(ctx, "endpoint-load-metrics-format", "json")
			}
			var trailer metadata.MD
			if _, err := pb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, simpleInfer(), grpc.Trailer(&trailer)); err != nil {
				t.Fatal(err)
			}
			var seen *xds.OrcaLoadReport
			select {
			case l := <-loads:
				seen, _ = l.(*xds.OrcaLoadReport)
			case <-time.After(5 * time.Second):
				t.Fatal("the balancer saw no call end")
			}
			got := trailer.Get(orca.BinHeader)
			if !c.want {
				if len(got) != 0 || seen != nil {
					t.Fatalf("trailer %v, balancer's load %v without asking", trailer, seen)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("trailer %v", trailer)
			}
			rep := &xds.OrcaLoadReport{}
			servertest.Must(t, proto.Unmarshal([]byte(got[0]), rep))
			if !proto.Equal(rep, seen) {
				t.Fatalf("the balancer saw %v, the trailer holds %v", seen, rep)
			}
			m := e.scrape(t)
			nm := rep.GetNamedMetrics()
			count, execs := m[series("simple", "nv_inference_count")], m[series("simple", "nv_inference_exec_count")]
			if nm["batch_fill"] != count/execs/8 || nm["queue_size"] != 0 || nm["kv_cache_utilization"] != 0.25 || rep.GetRpsFractional() <= 0 {
				t.Fatalf("report %v; metrics count %v, executions %v", rep, count, execs)
			}
		})
	}
}

func simpleInfer() *pb.ModelInferRequest {
	return &pb.ModelInferRequest{ModelName: "simple", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
		{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}, Contents: &pb.InferTensorContents{IntContents: make([]int32, 16)}},
	}}
}

// TestGRPCTrailerReuse: a model's trailer is reused while fresh (the same
// bytes on the next call, though the model's rate has moved) and computed
// afresh when reuse is off.
func TestGRPCTrailerReuse(t *testing.T) {
	for _, c := range []struct {
		name string
		ttl  time.Duration
		same bool
	}{
		{"reused", time.Hour, true},
		{"fresh", -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, orca.CallCache(c.ttl))
			conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			servertest.Must(t, err)
			defer conn.Close()
			client := pb.NewGRPCInferenceServiceClient(conn)
			var got [2]string
			for i := range got {
				var trailer metadata.MD
				if _, err := client.ModelInfer(context.Background(), simpleInfer(), grpc.Trailer(&trailer)); err != nil {
					t.Fatal(err)
				}
				if v := trailer.Get(orca.BinHeader); len(v) == 1 {
					got[i] = v[0]
				}
				time.Sleep(20 * time.Millisecond) // the rate's window moves
			}
			if got[0] == "" || (got[0] == got[1]) != c.same {
				t.Fatalf("trailers %q and %q; want the same %v", got[0], got[1], c.same)
			}
		})
	}
}

// TestOutOfBand: the gRPC listener serves xds.service.orca.v3.OpenRcaService
// as grpc-go's weighted_round_robin calls it: a report at once, then one
// each interval asked, with the process's rate after some calls.
func TestOutOfBand(t *testing.T) {
	e := start(t)
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	servertest.Must(t, err)
	defer conn.Close()
	client := pb.NewGRPCInferenceServiceClient(conn)
	for range 5 {
		if _, err := client.ModelInfer(context.Background(), simpleInfer()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := orcaservice.NewOpenRcaServiceClient(conn).StreamCoreMetrics(ctx,
		&orcaservice.OrcaLoadReportRequest{ReportInterval: durationpb.New(time.Second)})
	servertest.Must(t, err)
	start := time.Now()
	for i := range 2 {
		rep, err := stream.Recv()
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
		if rep.GetRpsFractional() <= 0 {
			t.Fatalf("report %d: %v; want a rate after 5 calls", i, rep)
		}
		if _, ok := rep.GetNamedMetrics()[orca.QueueSize]; !ok {
			t.Fatalf("report %d: %v; want %s", i, rep, orca.QueueSize)
		}
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("two reports %v apart; asked for 1s", waited)
	}
}

// TestOutOfBandExiting: an open out-of-band stream ends when the server
// starts exiting, rather than holding its graceful stop until the next
// report or the client's leave.
func TestOutOfBandExiting(t *testing.T) {
	e := start(t)
	conn, err := grpc.NewClient(e.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	servertest.Must(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := orcaservice.NewOpenRcaServiceClient(conn).StreamCoreMetrics(ctx,
		&orcaservice.OrcaLoadReportRequest{ReportInterval: durationpb.New(time.Hour)})
	servertest.Must(t, err)
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first report: %v", err)
	}
	e.grpcAPI.SetExiting()
	if rep, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after SetExiting: %v, %v; want the stream's end", rep, err)
	}
}
