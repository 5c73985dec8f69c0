package core_test

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/core/cache/redis"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/redistest"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/sidebyside"
)

// BenchmarkResponseCacheCore is BenchmarkResponseCache (cmd/inferd)
// without HTTP: 16 callers of the core's Infer, 9 of 10 requests repeating
// one of 16 inputs already answered, figure 1's MLP without a cache, with
// the local cache and with Redis. It shows what the cache does where the
// frontend costs nothing (BENCHMARKS.md, "Response cache"):
//
//	go test ./core -run '^$' -bench BenchmarkResponseCacheCore -benchtime 3s
func BenchmarkResponseCacheCore(b *testing.B) {
	mlp := onnxbuild.Must(onnxbuild.MLP(sidebyside.MLPIn, sidebyside.MLPHidden, sidebyside.MLPLayers))
	root := servertest.WriteRepo(b, map[string]servertest.Model{
		"mlp_batched": {Config: sidebyside.MLPConfig("mlp_batched", true), ONNX: mlp},
		"mlp_cached":  {Config: sidebyside.MLPConfig("mlp_cached", true) + "response_cache { enable: true }\n", ONNX: mlp},
	})
	local := servertest.Start(b, servertest.Options{Repo: root, ResponseCache: cache.NewLocalSize(256 << 20)})
	rsrv := redistest.Start(b)
	rc, err := redis.New(context.Background(), map[string]string{"host": rsrv.Host, "port": strconv.Itoa(rsrv.Port)}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rc.Close() })
	remote := servertest.Start(b, servertest.Options{Repo: root, Mode: core.ModeExplicit, Startup: []string{"mlp_cached"}, ResponseCache: rc})

	rs := sidebyside.Results{}
	var fresh atomic.Int64
	for _, c := range []struct {
		name, model string
		srv         *core.Server
	}{
		{"no-cache", "mlp_batched", local},
		{"local", "mlp_cached", local},
		{"redis", "mlp_cached", remote},
	} {
		call := hitRateInfer(c.srv, c.model, &fresh)
		for range 16 {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
		rs.Run(b, c.name, sidebyside.MLPConc, 1, call)
	}
	rs.Report(b,
		sidebyside.Ratio{Unit: "local/none-thru", Num: "local", Den: "no-cache", Of: sidebyside.InferOf},
		sidebyside.Ratio{Unit: "redis/none-thru", Num: "redis", Den: "no-cache", Of: sidebyside.InferOf},
	)
}

// hitRateInfer: the first 16 calls send the hot inputs; after them nine
// calls of ten send a hot input and the tenth a new one.
func hitRateInfer(srv *core.Server, model string, fresh *atomic.Int64) func() error {
	x := sidebyside.MLPInput()
	input := func(first float32) []byte {
		d := append([]byte(nil), x...)
		binary.LittleEndian.PutUint32(d, math.Float32bits(first))
		return d
	}
	hot := make([][]byte, 16)
	for i := range hot {
		hot[i] = input(float32(-1 - i))
	}
	var n atomic.Int64
	return func() error {
		i := n.Add(1) - 1
		data := hot[i%16]
		if i >= 16 && i%10 == 9 {
			data = input(float32(fresh.Add(1)))
		}
		_, err := srv.Infer(context.Background(), &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{{Name: "x", DataType: core.TypeFP32, Shape: []int64{1, sidebyside.MLPIn}, Data: data}}})
		return err
	}
}
