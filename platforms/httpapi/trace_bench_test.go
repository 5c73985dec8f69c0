package httpapi

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/platforms/trace/tracetest"
)

// BenchmarkTrace measures what tracing costs `simple` (two CPU instances)
// over HTTP with JSON tensors at concurrency 16: "off" is a server whose
// trace setting is OFF (the default; every request passes the hooks and
// is not sampled), "otlp-rate1" traces every request in opentelemetry mode
// and exports the spans to an OTLP/HTTP receiver in the same process. The
// ratio sub-benchmark reports otlp-rate1 / off throughput.
//
// That "off" costs nothing is shown against a build without the hooks
// (the notrace tag compiles them out; otlp-rate1 is skipped there):
//
//	go test ./platforms/httpapi -run '^$' -bench 'BenchmarkTrace$' -benchtime 1s -count 1
//	go test ./platforms/httpapi -run '^$' -bench 'BenchmarkTrace$/off' -benchtime 1s -count 1 -tags notrace
func BenchmarkTrace(b *testing.B) {
	root := servertest.WriteRepo(b, map[string]servertest.Model{"simple": {Config: `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
`, ONNX: servertest.Simple("simple").ONNX}})
	body := []byte(simpleTraceBody)
	const conc = 16
	c := "/c" + strconv.Itoa(conc)
	rs := sidebyside.Results{}
	off, _ := startServer(b, root, serverOpts{})
	rs.Run(b, "off"+c, conc, 1, inferCaller(off+"/v2/models/simple/infer", body))
	if !core.TracingBuilt {
		return // the notrace build: the baseline of "off"
	}
	rc := tracetest.Start(b)
	cfg, err := trace.ParseConfig([]string{"mode=opentelemetry", "level=TIMESTAMPS", "rate=1", "opentelemetry,url=" + rc.URL}, trace.Deprecated{})
	must(b, err)
	m, err := trace.New(cfg, nil)
	must(b, err)
	b.Cleanup(func() { _ = m.Close(b.Context()) })
	otlp, _ := startServer(b, root, serverOpts{api: Options{Trace: m}})
	h := http.Header{"Content-Type": {"application/json"}}
	rs.Run(b, "otlp-rate1"+c, conc, 1, postCaller(otlp+"/v2/models/simple/infer", body, h))
	rs.Report(b, sidebyside.Ratio{Unit: "otlp/off-thru-c16", Num: "otlp-rate1" + c, Den: "off" + c, Of: sidebyside.InferOf})
}
