package perf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	o, err := parseArgs([]string{"-m", "m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// perf_analyzer's defaults.
	if o.baseURL != "http://localhost:8000" || o.batch != 1 || !reflect.DeepEqual(o.concurrency, []int{1}) || !o.binary ||
		o.interval != 5*time.Second || o.stability != 0.1 || o.maxTrials != 10 || o.percentile != 0 || o.inputData != "random" ||
		o.countWindows || o.requestCount != 50 || o.async || o.sharedMemory != "none" || o.outputShmSize != 102400 || o.verboseCSV {
		t.Errorf("defaults: %+v", o)
	}

	good := []struct {
		args  []string
		check func(*options) bool
	}{
		{[]string{"--concurrency-range", "1:4:3"}, func(o *options) bool { return reflect.DeepEqual(o.concurrency, []int{1, 4}) }},
		{[]string{"--concurrency-range", "2:5"}, func(o *options) bool { return reflect.DeepEqual(o.concurrency, []int{2, 3, 4, 5}) }},
		{[]string{"--concurrency-range", "8"}, func(o *options) bool { return reflect.DeepEqual(o.concurrency, []int{8}) }},
		{[]string{"--request-rate-range", "0.5:1.5:0.5"}, func(o *options) bool {
			return reflect.DeepEqual(o.rates, []float64{0.5, 1, 1.5}) && o.concurrency == nil
		}},
		{[]string{"--request-rate-range", "0.1:0.3:0.1"}, func(o *options) bool { return len(o.rates) == 3 }},
		// End 0: on by step until --latency-threshold stops the sweep.
		{[]string{"--concurrency-range", "2:0:3", "-l", "5"}, func(o *options) bool {
			return o.openRange && len(o.concurrency) == maxSettings && o.concurrency[1] == 5 && o.concurrency[maxSettings-1] == 2+3*(maxSettings-1)
		}},
		{[]string{"--request-rate-range", "10:0", "-l", "5"}, func(o *options) bool { return len(o.rates) == maxSettings && o.rates[2] == 12 }},
		{[]string{"-u", "https://h:1/prefix/"}, func(o *options) bool { return o.baseURL == "https://h:1/prefix" }},
		{[]string{"-u", "10.0.0.1:8000"}, func(o *options) bool { return o.baseURL == "http://10.0.0.1:8000" }},
		{[]string{"--protocol-json"}, func(o *options) bool { return !o.binary }},
		{[]string{"--binary=false"}, func(o *options) bool { return !o.binary }},
		{[]string{"-p", "250", "-s", "5", "--max-trials", "4", "--percentile", "95", "-l", "3"}, func(o *options) bool {
			return o.interval == 250*time.Millisecond && o.stability == 0.05 && o.maxTrials == 4 && o.percentile == 95 && o.latencyThreshold == 3*time.Millisecond
		}},
		{[]string{"--measurement-interval", "10", "--stability-percentage", "50"}, func(o *options) bool {
			return o.interval == 10*time.Millisecond && o.stability == 0.5
		}},
		{[]string{"--shape", "IN:1,2", "--shape", "a:b:3", "--shape", "S:"}, func(o *options) bool {
			return reflect.DeepEqual(o.shapes, map[string][]int64{"IN": {1, 2}, "a:b": {3}, "S": {}})
		}},
		{[]string{"-i", "HTTP", "-x", "3", "-b", "4"}, func(o *options) bool { return o.version == "3" && o.batch == 4 && o.protocol == "http" }},
		{[]string{"--protocol", "http"}, func(o *options) bool {
			return o.protocol == "http" && o.baseURL == "http://localhost:8000" && !o.streaming
		}},
		// perf_analyzer's gRPC default port.
		{[]string{"-i", "grpc"}, func(o *options) bool { return o.protocol == "grpc" && o.baseURL == "localhost:8001" && !o.streaming }},
		{[]string{"--protocol", "GRPC", "--streaming", "-u", "h:9"}, func(o *options) bool {
			return o.protocol == "grpc" && o.streaming && o.baseURL == "h:9"
		}},
		{[]string{"-i", "grpc", "-u", "grpc://[::1]:9", "--binary"}, func(o *options) bool { return o.baseURL == "[::1]:9" }},
		{[]string{"--measurement-mode", "count_windows", "--measurement-request-count", "7"}, func(o *options) bool {
			return o.countWindows && o.requestCount == 7
		}},
		{[]string{"--measurement-mode=time_windows"}, func(o *options) bool { return !o.countWindows }},
		{[]string{"--percentile=-1"}, func(o *options) bool { return o.percentile == 0 }},
		{[]string{"--percentile", "85"}, func(o *options) bool { return o.percentile == 85 }},
		{[]string{"-r", "5"}, func(o *options) bool { return o.maxTrials == 5 }},
		{[]string{"-a"}, func(o *options) bool { return o.async }},
		{[]string{"--async"}, func(o *options) bool { return o.async }},
		{[]string{"--sync"}, func(o *options) bool { return !o.async }},
		// perf_analyzer: streaming is asynchronous.
		{[]string{"-i", "grpc", "--streaming"}, func(o *options) bool { return o.async }},
		{[]string{"--shared-memory", "system", "--output-shared-memory-size", "64"}, func(o *options) bool {
			return o.sharedMemory == "system" && o.outputShmSize == 64
		}},
		{[]string{"--shared-memory=none"}, func(o *options) bool { return o.sharedMemory == "none" }},
		{[]string{"--verbose-csv"}, func(o *options) bool { return o.verboseCSV }},
		{[]string{"-H", "X-Token:a:b", "-H", "x-other: 2"}, func(o *options) bool {
			return o.headers.Get("X-Token") == "a:b" && o.headers.Get("X-Other") == "2"
		}},
		{[]string{"--string-data", "hello"}, func(o *options) bool { return o.stringData == "hello" }},
		{[]string{"-z"}, func(o *options) bool { return o.inputData == "zero" }},
		{[]string{"-v"}, func(o *options) bool { return o.verbose }},
		{[]string{"--binary-search", "--request-rate-range", "10:100:5", "-l", "3"}, func(o *options) bool { return o.binarySearch }},
		{[]string{"--request-count", "40", "--warmup-request-count", "5", "--concurrency-range", "4"}, func(o *options) bool {
			return o.benchRequests == 40 && o.warmupRequests == 5
		}},
	}
	for _, c := range good {
		o, err := parseArgs(append([]string{"-m", "m"}, c.args...), io.Discard)
		if err != nil || !c.check(o) {
			t.Errorf("%v: %+v, %v", c.args, o, err)
		}
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{}, "-m MODEL is required"},
		{[]string{"-m", "m", "extra"}, `unexpected argument "extra"`},
		{[]string{"-m", "m", "--nope"}, "flag provided but not defined"},
		{[]string{"-m", "m", "-b", "0"}, "Failed to parse -b (batch size). The value must be > 0."},
		{[]string{"-m", "m", "-i", "udp"}, "Failed to parse -i (protocol). The value should be either HTTP or gRPC."},
		{[]string{"-m", "m", "--streaming"}, "Streaming is only allowed with gRPC protocol and Triton C API."},
		{[]string{"-m", "m", "-i", "http", "--streaming"}, "Streaming is only allowed with gRPC protocol"},
		{[]string{"-m", "m", "-i", "grpc", "--protocol-json"}, "HTTP only"},
		{[]string{"-m", "m", "-i", "grpc", "--binary=false"}, "HTTP only"},
		{[]string{"-m", "m", "-i", "grpc", "-u", "http://h:1"}, "gRPC takes HOST:PORT"},
		{[]string{"-m", "m", "-i", "grpc", "-u", "h"}, "gRPC takes HOST:PORT"},
		{[]string{"-m", "m", "-i", "grpc", "-u", ":1"}, "gRPC takes HOST:PORT"},
		{[]string{"-m", "m", "-x", "v1"}, "non-negative integer"},
		{[]string{"-m", "m", "-u", "ftp://h"}, "scheme must be http"},
		{[]string{"-m", "m", "-u", "http://"}, "no host"},
		{[]string{"-m", "m", "--concurrency-range", "1:2", "--request-rate-range", "5"}, "Cannot use both Concurrency and RequestRate inference load modes."},
		{[]string{"-m", "m", "--concurrency-range", "0:2"}, "start must be greater than 0"},
		{[]string{"-m", "m", "--concurrency-range", "4:2"}, "end must not be below start"},
		{[]string{"-m", "m", "--concurrency-range", "1:4:0"}, "step must be greater than 0"},
		{[]string{"-m", "m", "--concurrency-range", "1:4:1:1"}, "want start:end:step"},
		{[]string{"-m", "m", "--concurrency-range", "1.5"}, "whole numbers"},
		{[]string{"-m", "m", "--concurrency-range", "a"}, "is not a number"},
		{[]string{"-m", "m", "--concurrency-range", "1:100000"}, "more than 10000"},
		{[]string{"-m", "m", "--concurrency-range", "1:0"}, "The end of the search range and the latency limit can not be both 0 (or 0.0) simultaneously"},
		{[]string{"-m", "m", "--request-rate-range", "1:0:2", "-l", "0"}, "The end of the search range and the latency limit can not be both 0 (or 0.0) simultaneously"},
		{[]string{"-m", "m", "--request-rate-range", "-1"}, "start must be greater than 0"},
		{[]string{"-m", "m", "--request-rate-range", "NaN"}, "is not a number"},
		{[]string{"-m", "m", "--request-distribution", "uniform"}, "constant or poisson"},
		{[]string{"-m", "m", "--max-threads", "0"}, "Failed to parse --max-threads. The value must be > 0."},
		{[]string{"-m", "m", "--protocol-json", "--binary=true"}, "contradict"},
		{[]string{"-m", "m", "-p", "0"}, "greater than 0"},
		{[]string{"-m", "m", "-s", "0"}, "greater than 0"},
		{[]string{"-m", "m", "--max-trials", "2"}, "at least 3"},
		{[]string{"-m", "m", "--percentile", "100"}, "Failed to parse --percentile. The value must be -1 for not reporting or in range (0, 100)."},
		{[]string{"-m", "m", "--percentile", "0"}, "in range (0, 100)"},
		{[]string{"-m", "m", "-l", "-1"}, "must not be negative"},
		{[]string{"-m", "m", "--string-length", "-1"}, "must not be negative"},
		{[]string{"-m", "m", "--shape", "IN"}, "want NAME:D1,D2"},
		{[]string{"-m", "m", "--shape", "IN:1,x"}, "not a non-negative integer"},
		{[]string{"-m", "m", "--shape", "IN:1", "--shape", "IN:2"}, "given twice"},
		{[]string{"-m", "m", "--request-count", "2", "--concurrency-range", "4"}, "--request-count can not be less than concurrency"},
		{[]string{"-m", "m", "--request-count", "9", "--request-rate-range", "10"}, "--request-count can not be less than request rate"},
		{[]string{"-m", "m", "--request-count", "50", "--concurrency-range", "1:2"}, "--request-count not supported with multiple concurrency values in one run"},
		{[]string{"-m", "m", "--request-count", "50", "--request-rate-range", "1:2"}, "--request-count not supported with multiple request rate values in one run"},
		{[]string{"-m", "m", "--warmup-request-count", "5", "--concurrency-range", "1:2"}, "--warmup-request-count not supported with multiple concurrency values in one run"},
		{[]string{"-m", "m", "--warmup-request-count", "5", "--request-rate-range", "1:2"}, "--warmup-request-count not supported with multiple request rate values in one run"},
		{[]string{"-m", "m", "--request-count", "-1"}, "must not be negative"},
		{[]string{"-m", "m", "--binary-search", "--concurrency-range", "1:8"}, "The --latency-threshold cannot be 0 for binary search mode."},
		{[]string{"-m", "m", "--binary-search", "--concurrency-range", "1:0", "-l", "5"}, "The end of the range can not be 0 (or 0.0) for binary search mode."},
		{[]string{"-m", "m", "-H", "NoColon"}, "-H \"NoColon\": want HEADER:VALUE"},
		{[]string{"-m", "m", "-z", "--input-data", "random"}, "-z and --input-data"},
		{[]string{"-m", "m", "--measurement-mode", "windows"}, "Failed to parse --measurement-mode. Unsupported type provided: 'windows'"},
		{[]string{"-m", "m", "--measurement-request-count", "0"}, "Failed to parse --measurement-request-count. The value must be > 0."},
		{[]string{"-m", "m", "--percentile", "-2"}, "in range (0, 100)"},
		{[]string{"-m", "m", "--async", "--sync"}, "Cannot specify --async and --sync simultaneously."},
		{[]string{"-m", "m", "-i", "grpc", "--streaming", "--sync"}, "can not use streaming with synchronous API"},
		{[]string{"-m", "m", "--shared-memory", "cuda"}, "--shared-memory cuda is not supported by inferd perf"},
		{[]string{"-m", "m", "--shared-memory", "disk"}, "want none, system or cuda"},
		{[]string{"-m", "m", "--shared-memory", "system", "--output-shared-memory-size", "0"}, "must be greater than 0"},
	}
	for _, c := range bad {
		_, err := parseArgs(c.args, io.Discard)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error with %q", c.args, err, c.want)
		}
	}

	var help bytes.Buffer
	if _, err := parseArgs([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "--concurrency-range") {
		t.Errorf("-h: %v %q", err, help.String())
	}
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"-b", "x", "-m", "m"}, &stdout, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("bad flag: exit %d, %q", code, stderr.String())
	}
	if code := Main(t.Context(), []string{"--help"}, &stdout, &stderr); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1)
	}
	for _, c := range []struct {
		vals []int64
		p    float64
		want int64
	}{
		// perf_analyzer's rule: the value at index p/100·(n-1), rounded
		// half up.
		{nil, 50, 0},
		{[]int64{7}, 1, 7},
		{[]int64{7}, 99, 7},
		{[]int64{1, 2}, 49, 1},
		{[]int64{1, 2}, 50, 2},
		{[]int64{1, 2, 3, 4}, 50, 3},
		{[]int64{1, 2, 3, 4}, 75, 3},
		{[]int64{1, 2, 3, 4}, 99, 4},
		{hundred, 50, 51},
		{hundred, 90, 90},
		{hundred, 95, 95},
		{hundred, 99, 99},
		{hundred, 99.5, 100},
		{hundred, 0.1, 1},
	} {
		if got := percentileOf(c.vals, c.p); got != c.want {
			t.Errorf("p%v of %d values = %d, want %d", c.p, len(c.vals), got, c.want)
		}
	}
	if mean([]int64{1, 2, 6}) != 3 || mean(nil) != 0 {
		t.Error("mean")
	}
}

func TestStable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		tput, lat []float64
		threshold float64
		latency   bool
		want      bool
	}{
		{"too few windows", []float64{100, 100}, []float64{5, 5}, 0.1, true, false},
		{"identical", []float64{100, 100, 100}, []float64{5, 5, 5}, 0.1, true, true},
		{"max/min within 10%", []float64{96, 100, 105}, []float64{5, 5.2, 4.9}, 0.1, true, true},
		// perf_analyzer compares max to min, not each to the mean: 95 and
		// 105 are within 10% of their mean, but 105/95 is not within 1.1.
		{"max/min off although near the mean", []float64{95, 100, 105}, []float64{5, 5, 5}, 0.1, true, false},
		{"throughput off", []float64{80, 100, 120}, []float64{5, 5, 5}, 0.1, true, false},
		{"latency off", []float64{100, 100, 100}, []float64{4, 5, 6.5}, 0.1, true, false},
		{"latency off, not checked", []float64{100, 100, 100}, []float64{4, 5, 6.5}, 0.1, false, true},
		{"only the last three count", []float64{1, 1000, 100, 100, 100}, []float64{50, 1, 5, 5, 5}, 0.1, true, true},
		{"a late outlier counts", []float64{100, 100, 100, 300}, []float64{5, 5, 5, 5}, 0.1, true, false},
		{"zero throughput", []float64{0, 0, 0}, []float64{0, 0, 0}, 0.1, true, false},
		{"one window without throughput", []float64{100, 0, 100}, []float64{5, 5, 5}, 10, true, false},
		{"wide band", []float64{80, 100, 120}, []float64{4, 5, 6}, 0.5, true, true},
		{"edge: exactly on the band", []float64{100, 105, 110}, []float64{5, 5, 5.5}, 0.1, true, true},
	} {
		if got := stable(c.tput, c.lat, c.threshold, c.latency); got != c.want {
			t.Errorf("%s: stable = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestMergeAndSplit(t *testing.T) {
	t.Parallel()
	before := &statsSnapshot{successCount: 10, successNS: 5e6, inferenceCount: 20, executionCount: 10,
		queueCount: 10, queueNS: 1e6, inputCount: 10, inputNS: 1e6, inferCount: 10, inferNS: 1e6, outputCount: 10, outputNS: 1e6}
	// Four more successes, but the compute phases were timed for two only
	// (say two were answered from a cache): each phase's average is over
	// its own count, as perf_analyzer's are.
	after := &statsSnapshot{successCount: 14, successNS: 5e6 + 4*150000, inferenceCount: 28, executionCount: 14,
		queueCount: 14, queueNS: 1e6 + 4000, inputCount: 12, inputNS: 1e6 + 8000, inferCount: 12, inferNS: 1e6 + 200000, outputCount: 12, outputNS: 1e6}
	ws := []*window{
		{dur: time.Second, lats: []int64{1000, 2000}, ok: 2, errs: 1, lastErr: "x", sendNS: 400, recvNS: 4000},
		{dur: time.Second, lats: []int64{3000, 4000}, ok: 2, late: 3, stats: after, sendNS: 400, recvNS: 4000},
	}
	r := merge(ws, before, 2, 50)
	// Population standard deviation of 1..4 µs; send and receive averaged
	// over the four successes.
	if math.Abs(r.StdDev-1.12) > 0.005 || r.ClientSendUS != 0.2 || r.ClientRecvUS != 2 {
		t.Errorf("std %v, send %v, recv %v", r.StdDev, r.ClientSendUS, r.ClientRecvUS)
	}
	if !reflect.DeepEqual(r.Percentiles, map[int]float64{50: 3, 90: 4, 95: 4, 99: 4}) {
		t.Errorf("percentiles %v", r.Percentiles)
	}
	// The tail past p99: 2,000 latencies of 1..2,000 µs.
	tail := &window{dur: time.Second}
	for i := range 2000 {
		tail.lats = append(tail.lats, int64(i+1)*1000)
		tail.ok++
	}
	if r := merge([]*window{tail}, nil, 1, 0); r.P999 != 1998 || r.Max != 2000 || r.P99 != 1980 {
		t.Errorf("p99 %v, p99.9 %v, max %v; want 1980, 1998, 2000", r.P99, r.P999, r.Max)
	}
	// An extra --percentile is reported beside perf_analyzer's four.
	if p := merge(ws, before, 2, 20).Percentiles; !reflect.DeepEqual(p, map[int]float64{20: 2, 50: 3, 90: 4, 95: 4, 99: 4}) {
		t.Errorf("percentiles with --percentile 20: %v", p)
	}
	if r.Throughput != 4 || r.Requests != 5 || r.Errors != 1 || r.Delayed != 3 || r.LastError != "x" {
		t.Errorf("merge: %+v", r)
	}
	if r.P50 != 3 || r.P99 != 4 || r.Avg != 2.5 || r.StabilityLatency != 3 {
		t.Errorf("latencies: %+v", r)
	}
	want := &serverSplit{Requests: 4, InferenceCount: 8, ExecutionCount: 4, RequestUS: 150, OverheadUS: 45, ComputeUS: 104,
		QueueUS: 1, ComputeInput: 4, ComputeInfer: 100, ComputeOutput: 0, AvgBatchSize: 2}
	if !reflect.DeepEqual(r.Server, want) {
		t.Errorf("split %+v, want %+v", r.Server, want)
	}
	if split(*after, *before) != nil {
		t.Error("counters going backwards must give no split")
	}
	if split(*before, *before) != nil {
		t.Error("no successes must give no split")
	}
	if merge(ws, nil, 1, 0).Server != nil {
		t.Error("a split without a start snapshot")
	}
}

func TestResolveShape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		model, given []int64
		count        int64
		want         []int64
		err          string
	}{
		{[]int64{16}, nil, -1, []int64{16}, ""},
		{[]int64{2, 3}, nil, 6, []int64{2, 3}, ""},
		{[]int64{-1}, []int64{5}, -1, []int64{5}, ""},
		{[]int64{-1, 4}, []int64{3, 4}, -1, []int64{3, 4}, ""},
		{[]int64{-1, 4}, nil, 12, []int64{3, 4}, ""},
		{[]int64{-1}, nil, 0, []int64{0}, ""},
		{[]int64{}, []int64{}, -1, []int64{}, ""},
		{[]int64{-1}, nil, -1, nil, "give --shape X"},
		{[]int64{-1, -1}, nil, 12, nil, "variable dims [-1,-1]"},
		{[]int64{-1, 4}, nil, 10, nil, "10 elements do not fill"},
		{[]int64{-1, 0}, nil, 10, nil, "do not fill"},
		{[]int64{-1, 4}, []int64{3, 5}, -1, nil, "does not match the model's [-1,4]"},
		{[]int64{-1, 4}, []int64{3}, -1, nil, "has 1 dims, the model has 2"},
	} {
		got, err := resolveShape("X", c.model, c.given, c.count)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %v %d: err %v, want %q", c.model, c.given, c.count, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v %v %d: %v %v, want %v", c.model, c.given, c.count, got, err, c.want)
		}
	}
}

func TestDataFile(t *testing.T) {
	t.Parallel()
	inputs := []tensorMeta{
		{Name: "I", Datatype: "INT32", Shape: []int64{-1}},
		{Name: "F", Datatype: "FP16", Shape: []int64{2}},
		{Name: "S", Datatype: "BYTES", Shape: []int64{-1}},
		{Name: "B", Datatype: "BOOL", Shape: []int64{2}},
	}
	df, err := parseDataFile([]byte(`{"data":[
		{"I":[[1,-2],[3,4]],"F":[1.5,-2],"S":["ab",""],"B":[true,0]},
		{"I":{"content":{"b64":"BwAAAA=="},"shape":[1]},"F":{"b64":"AD4AwA=="},"S":{"b64":"AwAAAHh5eg=="},"B":{"content":[false,true]}}],
		"validation_data":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := bindDataFile(df, inputs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]tensorData{
		{
			{raw: int32s(1, -2, 3, 4), shape: []int64{4}, count: 4},
			{raw: []byte{0x00, 0x3e, 0x00, 0xc0}, shape: []int64{2}, count: 2}, // 1.5 and -2 in binary16
			{raw: []byte{2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0}, shape: []int64{2}, count: 2},
			{raw: []byte{1, 0}, shape: []int64{2}, count: 2},
		},
		{
			{raw: int32s(7), shape: []int64{1}, count: 1},
			{raw: []byte{0x00, 0x3e, 0x00, 0xc0}, shape: []int64{2}, count: 2},
			{raw: []byte{3, 0, 0, 0, 'x', 'y', 'z'}, shape: []int64{1}, count: 1},
			{raw: []byte{0, 1}, shape: []int64{2}, count: 2},
		},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("bound\n%v\nwant\n%v", steps, want)
	}
	// --shape applies where the file gives none.
	df, _ = parseDataFile([]byte(`{"data":[{"I":[1,2,3,4,5,6],"F":[0,0],"S":["a"],"B":[1,1]}]}`))
	if _, err := bindDataFile(df, inputs, map[string][]int64{"I": {5}}); err == nil || !strings.Contains(err.Error(), "has 6 elements, shape [5] needs 5") {
		t.Errorf("--shape vs data: %v", err)
	}

	parseErrs := []struct{ doc, want string }{
		{`[]`, "data file"},
		{`{}`, `"data" is missing or empty`},
		{`{"data":[]}`, `"data" is missing or empty`},
		{`{"data":[[{"I":[1]}]]}`, "streams"},
		{`{"data":[1]}`, "want an object of inputs"},
		{`{"data":[{"I":5}]}`, "want an array"},
		{`{"data":[{"I":{"shape":[1]}}]}`, `needs "content" or "b64"`},
		{`{"data":[{"I":{"content":[1],"b64":"AA=="}}]}`, "not both"},
		{`{"data":[{"I":{"b64":"!"}}]}`, "b64"},
		{`{"data":[{"I":{"content":[1],"shape":[-1]}}]}`, "negative dimension"},
		{`{"data":[{"I":[null]}]}`, "unexpected element"},
		{`{"data":[{"I":[{"a":1}]}]}`, "unexpected element"},
		{`{"data":[{"I":{"content":5}}]}`, "must be an array"},
	}
	for _, c := range parseErrs {
		if _, err := parseDataFile([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.doc, err, c.want)
		}
	}

	one := func(dt string) []tensorMeta { return []tensorMeta{{Name: "X", Datatype: dt, Shape: []int64{-1}}} }
	bindErrs := []struct {
		doc, dt, want string
	}{
		{`{"data":[{"X":[1],"Y":[1]}]}`, "INT32", `no input "Y"`},
		{`{"data":[{"Z":[1]}]}`, "INT32", `no input "Z"`},
		{`{"data":[{"X":[128]}]}`, "INT8", "fits INT8"},
		{`{"data":[{"X":[-1]}]}`, "UINT8", "fits UINT8"},
		{`{"data":[{"X":[1.5]}]}`, "INT32", "not an integer"},
		{`{"data":[{"X":[18446744073709551616]}]}`, "UINT64", "fits UINT64"},
		{`{"data":[{"X":[1e39]}]}`, "FP32", "out of range for FP32"},
		{`{"data":[{"X":["a"]}]}`, "FP32", "wants a number"},
		{`{"data":[{"X":[2]}]}`, "BOOL", "BOOL wants"},
		{`{"data":[{"X":[1]}]}`, "BYTES", "BYTES wants a string"},
		{`{"data":[{"X":{"b64":"AAA="}}]}`, "INT32", "not a whole number"},
		// perf_analyzer's b64 for BYTES is the serialized tensor: each
		// element's 4-byte length, then its bytes.
		{`{"data":[{"X":{"b64":"BQAAAHh5"}}]}`, "BYTES", "not a whole number of length-prefixed BYTES elements"},
		{`{"data":[{"X":{"content":{"b64":"AA"}}}]}`, "INT32", "b64"},
		{`{"data":[{"X":[1]}]}`, "COMPLEX", "not supported"},
		{`{"data":[{"X":[1]},{"Y":[1]}]}`, "INT32", "step 1"},
	}
	for _, c := range bindErrs {
		df, err := parseDataFile([]byte(c.doc))
		if err == nil {
			_, err = bindDataFile(df, one(c.dt), nil)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s as %s: err %v, want %q", c.doc, c.dt, err, c.want)
		}
	}

	// 64-bit integers keep every digit (no float64 detour).
	df, _ = parseDataFile([]byte(`{"data":[{"X":[9223372036854775807,-9223372036854775808]}]}`))
	steps, err = bindDataFile(df, one("INT64"), nil)
	if err != nil || binary.LittleEndian.Uint64(steps[0][0].raw) != math.MaxInt64 || int64(binary.LittleEndian.Uint64(steps[0][0].raw[8:])) != math.MinInt64 {
		t.Errorf("INT64 extremes: %v %x", err, steps)
	}
}

func FuzzDataFile(f *testing.F) {
	for _, seed := range []string{
		`{"data":[{"INPUT0":[1,2,3,4],"INPUT1":{"content":[[1,2],[3,4]],"shape":[4]}}]}`,
		`{"data":[{"INPUT0":{"b64":"AQAAAA=="},"INPUT1":[5,6,7,8]},{"INPUT0":[1],"INPUT1":[0]}]}`,
		`{"data":[{"INPUT0":{"content":[],"shape":[0]},"INPUT1":[]}]}`,
		`{"data":[[{"INPUT0":[1]}]]}`,
		`{"data":[{"S":["a","b"]}]}`,
		`{"data":[{"INPUT0":[1e400]}]}`,
	} {
		f.Add([]byte(seed))
	}
	inputs := []tensorMeta{{Name: "INPUT0", Datatype: "INT32", Shape: []int64{-1}}, {Name: "INPUT1", Datatype: "FP16", Shape: []int64{-1}}}
	f.Fuzz(func(t *testing.T, doc []byte) {
		df, err := parseDataFile(doc)
		if err != nil {
			return
		}
		if len(df.steps) == 0 {
			t.Fatal("parsed a file without steps")
		}
		steps, err := bindDataFile(df, inputs, nil)
		if err != nil {
			return
		}
		// Whatever binds has as many bytes as its shape says.
		for _, step := range steps {
			for i, td := range step {
				n, err := elements(td.shape)
				if err != nil || n != td.count || int64(len(td.raw)) != n*int64(elemSize(inputs[i].Datatype)) {
					t.Fatalf("input %s: shape %v, count %d, %d bytes", inputs[i].Name, td.shape, td.count, len(td.raw))
				}
			}
		}
		// And it encodes into a request whose JSON header parses.
		tensors := make([]tensorData, len(inputs))
		for i := range inputs {
			tensors[i] = steps[0][i]
		}
		body, err := encodeRequest(inputs, tensors, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(body.header.Get("Inference-Header-Content-Length"))
		if err != nil || n > len(body.data) || !json.Valid(body.data[:n]) {
			t.Fatalf("bad request header %q", body.data)
		}
	})
}

func TestFloat16(t *testing.T) {
	t.Parallel()
	// Cross-check against the independent converter in onnxbuild, on
	// edge cases and random float32 bit patterns.
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -2, 0.1, 65504, 65519.99, 65520, 1e-8, 5.96e-8, 2.98e-8, 2.99e-8, 6.1e-5,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200000 {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, v := range vals {
		got, want := float64ToHalf(float64(v)), onnxbuild.Float32ToFloat16(v)
		if got != want {
			t.Fatalf("%g (%#x): half %#04x, want %#04x", v, math.Float32bits(v), got, want)
		}
		if b, w := float32ToBF16(v), onnxbuild.Float32ToBFloat16(v); b != w {
			t.Fatalf("%g: bf16 %#04x, want %#04x", v, b, w)
		}
	}
}

func TestSynthetic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []string{"BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "FP16", "BF16", "FP32", "FP64", "BYTES"} {
		td, err := synthetic(dt, []int64{2, 3}, false, 4, rng)
		if err != nil || td.count != 6 {
			t.Fatalf("%s: %v %+v", dt, err, td)
		}
		size := elemSize(dt)
		if size == 0 {
			size = 8 // 4-byte length + 4 characters
		}
		if len(td.raw) != 6*size {
			t.Errorf("%s: %d bytes", dt, len(td.raw))
		}
		switch dt {
		case "FP16":
			for i := 0; i < len(td.raw); i += 2 {
				h := binary.LittleEndian.Uint16(td.raw[i:])
				if f := onnxbuild.Float16ToFloat32(h); !(f >= 0 && f <= 1) {
					t.Errorf("FP16 random value %v (%#04x) outside [0,1]", f, h)
				}
			}
		case "BOOL":
			for _, b := range td.raw {
				if b > 1 {
					t.Errorf("BOOL byte %d", b)
				}
			}
		}
		zero, _ := synthetic(dt, []int64{2}, true, 3, rng)
		if dt != "BYTES" && !bytes.Equal(zero.raw, make([]byte, 2*elemSize(dt))) {
			t.Errorf("%s zero: %x", dt, zero.raw)
		}
		// Everything except the half types can travel as JSON.
		if js, err := appendJSONData(nil, dt, td.raw); (err == nil) == halfType(dt) || (err == nil && !json.Valid(js)) {
			t.Errorf("%s JSON: %s %v", dt, js, err)
		}
	}
	if _, err := synthetic("COMPLEX64", []int64{1}, false, 0, rng); err == nil {
		t.Error("unknown datatype accepted")
	}
}

func TestEncodeRequest(t *testing.T) {
	t.Parallel()
	in := []tensorMeta{{Name: "A", Datatype: "INT32"}, {Name: "S", Datatype: "BYTES"}}
	out := []tensorMeta{{Name: "O", Datatype: "INT32"}, {Name: "H", Datatype: "FP16"}}
	tensors := []tensorData{{raw: int32s(-1, 2), shape: []int64{1, 2}}, {raw: appendBytesElem(nil, []byte("q\"")), shape: []int64{1}}}

	b, err := encodeRequest(in, tensors, out, true)
	must(t, err)
	n := len(`{"inputs":[{"name":"A","shape":[1,2],"datatype":"INT32","parameters":{"binary_data_size":8}},{"name":"S","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}],"outputs":[{"name":"O","parameters":{"binary_data":true}},{"name":"H","parameters":{"binary_data":true}}]}`)
	if got := string(b.data[:n]); got != `{"inputs":[{"name":"A","shape":[1,2],"datatype":"INT32","parameters":{"binary_data_size":8}},{"name":"S","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}],"outputs":[{"name":"O","parameters":{"binary_data":true}},{"name":"H","parameters":{"binary_data":true}}]}` ||
		b.header.Get("Inference-Header-Content-Length") != strconv.Itoa(n) || !bytes.Equal(b.data[n:], append(int32s(-1, 2), tensors[1].raw...)) ||
		b.header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("binary request %q %v", b.data, b.header)
	}

	// JSON tensors; the FP16 output must still be asked for in binary.
	b, err = encodeRequest(in, tensors, out, false)
	must(t, err)
	want := `{"inputs":[{"name":"A","shape":[1,2],"datatype":"INT32","data":[-1,2]},{"name":"S","shape":[1],"datatype":"BYTES","data":["q\""]}],"outputs":[{"name":"O","parameters":{"binary_data":false}},{"name":"H","parameters":{"binary_data":true}}]}`
	if string(b.data) != want || b.header.Get("Inference-Header-Content-Length") != "" {
		t.Errorf("JSON request\n%s\nwant\n%s", b.data, want)
	}
	// Without half outputs, JSON requests leave "outputs" out.
	b, _ = encodeRequest(in, tensors, out[:1], false)
	if strings.Contains(string(b.data), "outputs") {
		t.Errorf("%s", b.data)
	}
	if _, err := encodeRequest([]tensorMeta{{Name: "H", Datatype: "FP16"}}, []tensorData{{raw: []byte{0, 0}, shape: []int64{1}}}, nil, false); err == nil || !strings.Contains(err.Error(), "drop --protocol-json") {
		t.Errorf("FP16 JSON input: %v", err)
	}
	for _, c := range []struct {
		dt   string
		raw  []byte
		want string
	}{
		{"BOOL", []byte{1, 0}, "[true,false]"},
		{"INT8", []byte{0xff, 1}, "[-1,1]"},
		{"UINT16", []byte{0xff, 0xff}, "[65535]"},
		{"INT64", binary.LittleEndian.AppendUint64(nil, 1<<63), "[-9223372036854775808]"},
		{"UINT64", binary.LittleEndian.AppendUint64(nil, 1<<63), "[9223372036854775808]"},
		{"FP32", binary.LittleEndian.AppendUint32(nil, math.Float32bits(0.1)), "[0.1]"},
		{"FP64", binary.LittleEndian.AppendUint64(nil, math.Float64bits(1e-7)), "[1e-07]"},
		{"BYTES", nil, "[]"},
	} {
		got, err := appendJSONData(nil, c.dt, c.raw)
		if err != nil || string(got) != c.want {
			t.Errorf("%s %x: %s %v, want %s", c.dt, c.raw, got, err, c.want)
		}
	}
	for _, c := range []struct {
		dt  string
		raw []byte
	}{
		{"INT32", []byte{1, 2, 3}},
		{"BYTES", []byte{5, 0, 0, 0, 'a'}},
		{"BYTES", []byte{5, 0}},
		{"FP32", binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(math.NaN())))},
	} {
		if _, err := appendJSONData(nil, c.dt, c.raw); err == nil {
			t.Errorf("%s %x: no error", c.dt, c.raw)
		}
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := &progress{w: &buf, tty: true}
	p.update("window 1 long line")
	p.update("window 2")
	p.println("warning")
	p.done()
	want := "\rwindow 1 long line" + "\rwindow 2" + strings.Repeat(" ", 10) + "\r" + strings.Repeat(" ", 8) + "\r" + "warning\n"
	if buf.String() != want {
		t.Errorf("tty progress %q, want %q", buf.String(), want)
	}
	buf.Reset()
	p = newProgress(&buf)
	p.update("a")
	p.update("b")
	p.done()
	if buf.String() != "a\nb\n" {
		t.Errorf("plain progress %q", buf.String())
	}
}

func TestCSV(t *testing.T) {
	t.Parallel()
	server := &serverSplit{Requests: 10, QueueUS: 10.9, ComputeInput: 5, ComputeInfer: 100.5, ComputeOutput: 4}
	slow := result{Concurrency: 2, Throughput: 1000.25, Avg: 200.7, ClientSendUS: 3.5, ClientRecvUS: 6.2,
		Percentiles: map[int]float64{50: 190.9, 85: 195, 90: 210, 95: 220, 99: 300}, Server: server}
	fast := result{Concurrency: 1, Throughput: 1409.873, Avg: 709, ClientSendUS: 1, ClientRecvUS: 2,
		Percentiles: map[int]float64{50: 700, 85: 705, 90: 710, 95: 720, 99: 800}, Server: server}
	for _, c := range []struct {
		name    string
		args    []string
		results []result
		want    string
	}{
		// perf_analyzer's columns and order, and its rows sorted by
		// throughput: concurrency 2 (1000 infer/s) before 1 (1409.87).
		// Network+Server Send/Recv is 200.7-3.5-6.2-10.9-109.5 = 70.6.
		{"default", nil, []result{fast, slow},
			"Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n" +
				"2,1000.25,3,70,10,5,100,4,6,190,210,220,300\n" +
				"1,1409.87,1,585,10,5,100,4,2,700,710,720,800\n"},
		{"an extra percentile, verbose", []string{"--percentile", "85", "--verbose-csv"}, []result{slow},
			"Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p85 latency,p90 latency,p95 latency,p99 latency,request/response,response wait\n" +
				"2,1000.25,3,70,10,5,100,4,6,190,195,210,220,300,9,191\n"},
		{"verbose with the average", []string{"--verbose-csv"}, []result{slow},
			"Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,request/response,response wait\n" +
				"2,1000.25,3,70,10,5,100,4,6,190,210,220,300,200,9,191\n"},
		// Without the server's statistics perf_analyzer leaves the server
		// columns out.
		{"no server statistics", []string{"--request-rate-range", "0.5"}, []result{{RequestRate: 0.5, Throughput: 0.5, Avg: 20,
			Percentiles: map[int]float64{50: 20, 90: 20, 95: 20, 99: 20}}},
			"Request Rate,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n" +
				"0.5,0.5,0,0,20,20,20,20\n"},
	} {
		o, err := parseArgs(append([]string{"-m", "m"}, c.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := writeCSV(&b, o, c.results); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, b.String(), c.want)
		}
	}
}

func TestStdout(t *testing.T) {
	t.Parallel()
	r := result{Concurrency: 4, Throughput: 1409.873, Requests: 2116, Errors: 1, Avg: 709.6, StdDev: 88.2, ClientSendUS: 10, ClientRecvUS: 20.5,
		StabilityLatency: 709.6, Percentiles: map[int]float64{50: 700, 90: 750, 95: 780, 99: 900}, P999: 1200, Max: 3400.5, Stable: true,
		Server: &serverSplit{Requests: 2115, InferenceCount: 2115, ExecutionCount: 2000, RequestUS: 500, OverheadUS: 20.1, ComputeUS: 449.9, QueueUS: 30, ComputeInput: 10, ComputeInfer: 430, ComputeOutput: 9.9}}
	o, err := parseArgs([]string{"-m", "m", "--concurrency-range", "1:4:3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeSettings(&b, o, &modelInfo{maxBatch: 8})
	writeSettingStart(&b, o, 4, 0)
	writeSettingReport(&b, o, r)
	writeSummary(&b, o, []result{r})
	want := `*** Measurement Settings ***
  Batch size: 1
  Service Kind: Triton
  Using "time_windows" mode for stabilization
  Stabilizing using average latency and throughput
  Measurement window: 5000 msec
  Latency limit: 0 msec
  Concurrency limit: 4 concurrent requests
  Using synchronous calls for inference
  Model: m (version: server's choice, max_batch_size 8) at http://localhost:8000
  Protocol: HTTP, binary tensors; input data: random

Request concurrency: 4
  Client: 
    Request count: 2115
    Throughput: 1409.87 infer/sec
    Avg latency: 709 usec (standard deviation 88 usec)
    p50 latency: 700 usec
    p90 latency: 750 usec
    p95 latency: 780 usec
    p99 latency: 900 usec
    Avg HTTP time: 709 usec (send/recv 30 usec + response wait 679 usec)
  Server: 
    Inference count: 2115
    Execution count: 2000
    Successful request count: 2115
    Avg request latency: 500 usec (overhead 21 usec + queue 30 usec + compute input 10 usec + compute infer 430 usec + compute output 9 usec)

Inferences/Second vs. Client Average Batch Latency
Concurrency: 4, throughput: 1409.87 infer/sec, latency 709 usec
`
	if b.String() != want {
		t.Errorf("stdout:\n%s\nwant\n%s", b.String(), want)
	}

	// -v: perf_analyzer's detailed client time.
	o.verbose = true
	b.Reset()
	writeSettingReport(&b, o, r)
	if !strings.Contains(b.String(), "    p99 latency: 900 usec\n    p99.9 latency: 1200 usec (max 3400 usec)\n    Avg HTTP time: 709 usec (send 10 usec + response wait 679 usec + receive 20 usec)\n") {
		t.Errorf("-v:\n%s", b.String())
	}

	// Request rate, count windows, a stabilising percentile, async, gRPC,
	// no server statistics.
	o, err = parseArgs([]string{"-m", "m", "-i", "grpc", "--request-rate-range", "10:20:10", "--request-distribution", "poisson",
		"--measurement-mode", "count_windows", "--percentile", "95", "--async"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r = result{RequestRate: 20, Throughput: 19.5, Requests: 100, Delayed: 5, Avg: 50, StabilityLatency: 70,
		Percentiles: map[int]float64{50: 40, 90: 60, 95: 70, 99: 80}}
	b.Reset()
	writeSettings(&b, o, &modelInfo{})
	writeSettingStart(&b, o, 0, 20)
	writeSettingReport(&b, o, r)
	writeSummary(&b, o, []result{r})
	for _, line := range []string{
		`  Using "count_windows" mode for stabilization`,
		"  Stabilizing using p95 throughput",
		"  Minimum number of samples in each window: 50",
		"  Request Rate limit: 20 requests per seconds",
		"  Using poisson distribution on request generation",
		"  Using asynchronous calls for inference",
		"Request Rate: 20 inference requests per second",
		"    [WARNING] Perf Analyzer was not able to keep up with the desired request rate. 5.00% of the requests were delayed. ",
		"    Throughput: 19.5 infer/sec",
		"    p95 latency: 70 usec",
		"    Avg gRPC time: 50 usec ((un)marshal request/response 0 usec + response wait 50 usec)",
		"Inferences/Second vs. Client p95 Batch Latency",
		"Request Rate: 20, throughput: 19.5 infer/sec, latency 70 usec",
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("no line %q in\n%s", line, b.String())
		}
	}
	for _, absent := range []string{"Avg latency", "Server:"} {
		if strings.Contains(b.String(), absent) {
			t.Errorf("%q in\n%s", absent, b.String())
		}
	}
}

func TestDataSources(t *testing.T) {
	t.Parallel()
	inputs := []tensorMeta{
		{Name: "I", Datatype: "INT32", Shape: []int64{2}},
		{Name: "S", Datatype: "BYTES", Shape: []int64{-1}},
	}
	dir := t.TempDir()
	// A directory as perf_analyzer reads one: a raw file per input, and
	// BYTES as text, one element a line.
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "d", "I"), int32s(7, 8), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "d", "S"), []byte("ab\ncde\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "one.json"), []byte(`{"data":[{"I":[1,2],"S":["x"]}]}`), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "two.json"), []byte(`{"data":[{"I":[3,4],"S":["y"]},{"I":[5,6],"S":["z"]}]}`), 0o644))
	must(t, os.Mkdir(filepath.Join(dir, "short"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "short", "I"), int32s(7), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "short", "S"), []byte("a\n"), 0o644))
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		name  string
		paths []string
		first []int32 // I of each step
		want  string  // error
	}{
		{"directory", []string{p("d")}, []int32{7}, ""},
		// Files given one after another add their steps in order.
		{"two files", []string{p("one.json"), p("two.json")}, []int32{1, 3, 5}, ""},
		{"file and directory", []string{p("two.json"), p("d")}, []int32{3, 5, 7}, ""},
		{"short raw file", []string{p("short")}, nil, "has 1 elements, shape [2] needs 2"},
		{"missing", []string{p("nope.json")}, nil, "--input-data"},
	} {
		steps, err := loadData(c.paths, inputs, nil)
		if c.want != "" {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var first []int32
		for _, s := range steps {
			first = append(first, int32(binary.LittleEndian.Uint32(s[0].raw)))
		}
		if !reflect.DeepEqual(first, c.first) {
			t.Errorf("%s: steps start %v, want %v", c.name, first, c.first)
		}
	}
	steps, err := loadData([]string{p("d")}, inputs, nil)
	if err != nil || !reflect.DeepEqual(steps[0][1], tensorData{raw: []byte{2, 0, 0, 0, 'a', 'b', 3, 0, 0, 0, 'c', 'd', 'e'}, shape: []int64{2}, count: 2}) {
		t.Errorf("BYTES from a directory: %v %v", steps, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--input-data", "a.json", "--input-data", "b.json"}, "a.json,b.json"},
		{[]string{"--input-data", "zero"}, "zero"},
		{nil, "random"},
	} {
		o, err := parseArgs(append([]string{"-m", "m"}, c.args...), io.Discard)
		if err != nil || o.inputData != c.want {
			t.Errorf("%v: %v %v", c.args, o, err)
		}
	}
	if _, err := parseArgs([]string{"-m", "m", "--input-data", "zero", "--input-data", "a.json"}, io.Discard); err == nil || !strings.Contains(err.Error(), "random and zero stand alone") {
		t.Errorf("zero and a file: %v", err)
	}
}

func TestStringData(t *testing.T) {
	t.Parallel()
	td := repeatedString("hi", []int64{2, 2})
	want := []byte{2, 0, 0, 0, 'h', 'i', 2, 0, 0, 0, 'h', 'i', 2, 0, 0, 0, 'h', 'i', 2, 0, 0, 0, 'h', 'i'}
	if !bytes.Equal(td.raw, want) || td.count != 4 || !reflect.DeepEqual(td.shape, []int64{2, 2}) {
		t.Errorf("%+v", td)
	}
}
