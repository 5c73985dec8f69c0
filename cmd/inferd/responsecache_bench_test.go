package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/redistest"
	"github.com/inferd/inferd/internal/sidebyside"
)

// BenchmarkResponseCache measures, in one run, figure 1's compute-bound
// MLP (sidebyside.MLPConfig, dynamic batching) served over HTTP (binary
// tensors, batch-1 requests, concurrency 16) when 9 of 10 requests repeat
// one of 16 inputs already answered and the tenth is new: without a cache,
// with the local cache and with Redis (a redis-server started here). The
// "ratio" sub-benchmark reports each cache's throughput over no cache
// (BENCHMARKS.md, "Response cache"):
//
//	go test ./cmd/inferd -run '^$' -bench BenchmarkResponseCache -benchtime 3s
func BenchmarkResponseCache(b *testing.B) {
	root := b.TempDir()
	model := onnxbuild.Must(onnxbuild.MLP(sidebyside.MLPIn, sidebyside.MLPHidden, sidebyside.MLPLayers))
	for name, cfg := range map[string]string{
		"mlp_batched": sidebyside.MLPConfig("mlp_batched", true),
		"mlp_cached":  sidebyside.MLPConfig("mlp_cached", true) + "response_cache { enable: true }\n",
	} {
		dir := filepath.Join(root, name)
		mustB(b, os.MkdirAll(filepath.Join(dir, "1"), 0o755))
		mustB(b, os.WriteFile(filepath.Join(dir, "config.pbtxt"), []byte(cfg), 0o644))
		mustB(b, os.WriteFile(filepath.Join(dir, "1", "model.onnx"), model, 0o644))
	}
	srv := redistest.Start(b)
	local := benchServer(b, "--model-repository="+root, "--cache-config=local,size=268435456")
	redis := benchServer(b, "--model-repository="+root, "--model-control-mode=explicit", "--load-model=mlp_cached",
		"--cache-config=redis,host="+srv.Host, "--cache-config=redis,port="+strconv.Itoa(srv.Port))

	rs := sidebyside.Results{}
	var fresh atomic.Int64 // distinct new inputs across every side
	for _, c := range []struct{ name, url string }{
		{"no-cache", local + "/v2/models/mlp_batched/infer"},
		{"local", local + "/v2/models/mlp_cached/infer"},
		{"redis", redis + "/v2/models/mlp_cached/infer"},
	} {
		call := hitRateCaller(c.url, &fresh)
		for range hotInputs { // the hot inputs are answered once before measuring
			mustB(b, call())
		}
		rs.Run(b, c.name, sidebyside.MLPConc, 1, call)
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "local/none-thru", Num: "local", Den: "no-cache", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "redis/none-thru", Num: "redis", Den: "no-cache", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "local/none-p50", Num: "local", Den: "no-cache", Of: sidebyside.P50Of},
	)
}

const hotInputs = 16

// hitRateCaller posts MLP inputs to url: calls 0..hotInputs-1 post the hot
// inputs, and after them nine calls of ten post a hot input and the tenth
// a new one (its first value from fresh).
func hitRateCaller(url string, fresh *atomic.Int64) func() error {
	x := sidebyside.MLPInput()
	header := sidebyside.MLPBinaryHeader()
	body := func(first float32) []byte {
		b := append([]byte(header), x...)
		binary.LittleEndian.PutUint32(b[len(header):], math.Float32bits(first))
		return b
	}
	hot := make([][]byte, hotInputs)
	for i := range hot {
		hot[i] = body(float32(-1 - i))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	var n atomic.Int64
	return func() error {
		i := n.Add(1) - 1
		data := hot[i%hotInputs]
		if i >= hotInputs && i%10 == 9 {
			data = body(float32(fresh.Add(1)))
		}
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(data))
		if err != nil {
			return err
		}
		req.Header.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// benchServer runs the server in-process and returns its HTTP base URL.
func benchServer(b *testing.B, args ...string) string {
	b.Helper()
	cfg, err := parseFlags(append([]string{"--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1"}, args...), io.Discard)
	mustB(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		done <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), func(addrs map[string]string) { ready <- "http://" + addrs["HTTP"] })
	}()
	b.Cleanup(func() { cancel(); <-done })
	select {
	case url := <-ready:
		return url
	case err := <-done:
		done <- err
		b.Fatalf("server did not start: %v", err)
	case <-time.After(60 * time.Second):
		b.Fatal("server did not start")
	}
	return ""
}

func mustB(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
