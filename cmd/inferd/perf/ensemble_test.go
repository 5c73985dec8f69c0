package perf

import (
	"bytes"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

func TestEnsembleFigures(t *testing.T) {
	t.Parallel()
	// An ensemble of two models; the ensemble's own statistics have no
	// queue or compute, its composing models' do.
	step := func(name string, queueUS, computeUS int64) statsSnapshot {
		return statsSnapshot{name: name, version: "1", successCount: 10, successNS: 10 * (queueUS + computeUS + 5) * 1000, inferenceCount: 10, executionCount: 10,
			queueCount: 10, queueNS: 10 * queueUS * 1000, inputCount: 10, inputNS: 10 * 1000, inferCount: 10, inferNS: 10 * (computeUS - 2) * 1000, outputCount: 10, outputNS: 10 * 1000}
	}
	before := statsSnapshot{composing: []statsSnapshot{{name: "a", version: "1"}, {name: "b", version: "1"}}}
	after := statsSnapshot{successCount: 10, successNS: 10 * 300 * 1000, inferenceCount: 10, executionCount: 10,
		composing: []statsSnapshot{step("a", 20, 100), step("b", 30, 50)}}
	s := split(before, after)
	if s == nil || len(s.Composing) != 2 || s.Composing[0].Model != "a" || s.Composing[1].Version != "1" || s.Composing[1].QueueUS != 30 {
		t.Fatalf("split %+v", s)
	}
	var b bytes.Buffer
	writeServer(&b, s)
	// perf_analyzer's ensemble block: the queue and compute of the
	// composing models summed, then each model's own block.
	want := `  Server: 
    Inference count: 10
    Execution count: 10
    Successful request count: 10
    Avg request latency: 300 usec (overhead 100 usec + queue 50 usec + compute 150 usec)

  Composing models: 
  a, version: 1
      Inference count: 10
      Execution count: 10
      Successful request count: 10
      Avg request latency: 125 usec (overhead 5 usec + queue 20 usec + compute input 1 usec + compute infer 98 usec + compute output 1 usec)
  b, version: 1
      Inference count: 10
      Execution count: 10
      Successful request count: 10
      Avg request latency: 85 usec (overhead 5 usec + queue 30 usec + compute input 1 usec + compute infer 48 usec + compute output 1 usec)
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}

	// One CSV per composing model beside -f's, in perf_analyzer's columns.
	dir := t.TempDir()
	o, err := parseArgs([]string{"-m", "m", "-f", filepath.Join(dir, "r.csv")}, io.Discard)
	must(t, err)
	r := result{Concurrency: 1, Throughput: 200, Avg: 400, Percentiles: map[int]float64{50: 1, 90: 1, 95: 1, 99: 1}, Stable: true, Server: s}
	must(t, writeReports(o, []result{r}))
	got, err := os.ReadFile(filepath.Join(dir, "a_v1.r.csv"))
	must(t, err)
	if string(got) != "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv\n1,200,0,5,20,1,98,1,0\n" {
		t.Errorf("a_v1.r.csv:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "b_v1.r.csv")); err != nil {
		t.Error(err)
	}
}

func TestEnsembleAgainstInferd(t *testing.T) {
	t.Parallel()
	models := testModels(t)
	models = map[string]servertest.Model{"simple": models["simple"], "ens": {Config: `platform: "ensemble"
max_batch_size: 8
input [ { name: "IN0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "IN1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]
ensemble_scheduling { step [ { model_name: "simple" model_version: -1
  input_map { key: "INPUT0" value: "IN0" } input_map { key: "INPUT1" value: "IN1" }
  output_map { key: "OUTPUT0" value: "OUT0" } } ] }
`}}
	core := servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, models)})
	hs := httptest.NewServer(httpapi.New(core, httpapi.Options{}))
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	code, stdout, stderr := runPerf(t, append([]string{"-m", "ens", "-u", strings.TrimPrefix(hs.URL, "http://"), "-f", filepath.Join(dir, "r.csv")}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "\n  Composing models: \n  simple, version: 1\n      Inference count: ") {
		t.Errorf("no composing models:\n%s", stdout)
	}
	rows := readCSV(t, filepath.Join(dir, "simple_v1.r.csv"))
	if len(rows) != 1 || rows[0]["Concurrency"] != "1" || num(t, rows[0]["Inferences/Second"]) <= 0 {
		t.Errorf("simple_v1.r.csv: %v", rows)
	}
}
