package core

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/inferd/inferd/core/cache"
)

// cachedEcho starts model "m" (echo backend, executions never wait) with
// the given config body on a server whose response cache is store.
func cachedEcho(t *testing.T, cfg string, store cache.Store) (*Server, *echoBackend) {
	t.Helper()
	return cachedEchoGated(t, cfg, store, true)
}

// cachedEchoGated is cachedEcho whose executions wait at the backend's
// gate unless open.
func cachedEchoGated(t *testing.T, cfg string, store cache.Store, open bool) (*Server, *echoBackend) {
	t.Helper()
	s, b, err := startEchoWith(t, cfg, open, nil, Options{ResponseCache: store})
	if err != nil {
		t.Fatal(err)
	}
	return s, b
}

const (
	echoIO = `input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
` + oneInstance
	cacheOn = "max_batch_size: 8\nresponse_cache { enable: true }\n" + echoIO
)

func TestResponseCacheHitsSkipTheModel(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		cfg       string
		store     cache.Store
		second    *InferRequest // sent after batchReq(1, 2, 3)
		execs     int64
		hits      uint64
		misses    uint64
		streaming bool
	}{
		{"same request hits", cacheOn, cache.NewLocalSize(1 << 20), batchReq(1, 2, 3), 1, 1, 1, false},
		{"same request hits a stream", cacheOn, cache.NewLocalSize(1 << 20), batchReq(1, 2, 3), 1, 1, 1, true},
		{"other bytes miss", cacheOn, cache.NewLocalSize(1 << 20), batchReq(2, 2, 3), 2, 0, 2, false},
		{"same bytes in another shape miss", cacheOn, cache.NewLocalSize(1 << 20), batchReq(1, 3, 2), 2, 0, 2, false},
		{"an entry larger than the cache is not stored", cacheOn, cache.NewLocalSize(8), batchReq(1, 2, 3), 2, 0, 2, false},
		{"a model without response_cache never caches", "max_batch_size: 8\n" + echoIO, cache.NewLocalSize(1 << 20), batchReq(1, 2, 3), 2, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, b := cachedEcho(t, tc.cfg, tc.store)
			infer := func(req *InferRequest) *InferResponse {
				mv, release, err := s.Acquire("m", LatestVersion)
				if err != nil {
					t.Fatal(err)
				}
				defer release()
				if !tc.streaming {
					resp, err := mv.Infer(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					return resp
				}
				var got []*InferResponse
				err = mv.InferStream(ctx, req, func(r *InferResponse, final bool) error {
					if r != nil {
						got = append(got, r)
					}
					return nil
				})
				if err != nil || len(got) != 1 {
					t.Fatalf("stream: %v, %d responses", err, len(got))
				}
				return got[0]
			}
			first := infer(batchReq(1, 2, 3))
			second := tc.second
			second.ID = "second"
			got := infer(second)
			if n := b.execs.Load(); n != tc.execs {
				t.Errorf("executions = %d, want %d", n, tc.execs)
			}
			if tc.hits > 0 {
				if !bytes.Equal(got.Outputs[0].Data, first.Outputs[0].Data) || !reflect.DeepEqual(got.Outputs[0].Shape, first.Outputs[0].Shape) {
					t.Errorf("cached answer %v %v differs from %v %v", got.Outputs[0].Shape, got.Outputs[0].Data, first.Outputs[0].Shape, first.Outputs[0].Data)
				}
				if got.ID != "second" || got.ModelName != "m" || got.ModelVersion != 1 {
					t.Errorf("cached answer names %q %q %d", got.ID, got.ModelName, got.ModelVersion)
				}
			}
			st := stats(t, s)
			if st.CacheHit.Count != tc.hits || st.CacheMiss.Count != tc.misses {
				t.Errorf("cache hit/miss = %d/%d, want %d/%d", st.CacheHit.Count, st.CacheMiss.Count, tc.hits, tc.misses)
			}
			if st.Success.Count != 2 || st.ExecutionCount != uint64(tc.execs) {
				t.Errorf("success %d executions %d, want 2 and %d (a hit is a success without an execution)", st.Success.Count, st.ExecutionCount, tc.execs)
			}
			if tc.misses > 0 && st.CacheMiss.Ns == 0 {
				t.Error("misses took no time")
			}
		})
	}
}

func TestCacheEntryRoundTrip(t *testing.T) {
	resp := &InferResponse{
		Parameters: map[string]any{"s": "text", "i": int64(-7), "b": true, "f": 0.5},
		Outputs: []*Tensor{
			{Name: "y", DataType: TypeFP32, Shape: []int64{2, 1}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			{Name: "s", DataType: TypeBytes, Shape: []int64{1}, Data: []byte{1, 0, 0, 0, 'a'}},
			{Name: "empty", DataType: TypeInt64, Shape: []int64{0}, Data: []byte{}},
		},
	}
	entry, err := encodeCached(resp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeCached(entry)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, resp) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, resp)
	}
	for n := range len(entry) {
		if _, err := decodeCached(entry[:n]); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte entry decoded", n, len(entry))
		}
	}
	if _, err := encodeCached(&InferResponse{Parameters: map[string]any{"x": []int{1}}}); err == nil {
		t.Error("a parameter of another type was encoded")
	}
}

func TestCacheKey(t *testing.T) {
	x := func(name string, shape []int64, data ...byte) *Tensor {
		return &Tensor{Name: name, DataType: TypeUint8, Shape: shape, Data: data}
	}
	base := cacheKey("m", 1, []*Tensor{x("a", []int64{2}, 1, 2), x("b", []int64{1}, 3)}, []string{"y"}, nil)
	if again := cacheKey("m", 1, []*Tensor{x("b", []int64{1}, 3), x("a", []int64{2}, 1, 2)}, []string{"y"}, nil); again != base {
		t.Error("the key depends on the inputs' order")
	}
	for name, other := range map[string]string{
		"model":    cacheKey("n", 1, []*Tensor{x("a", []int64{2}, 1, 2), x("b", []int64{1}, 3)}, []string{"y"}, nil),
		"version":  cacheKey("m", 2, []*Tensor{x("a", []int64{2}, 1, 2), x("b", []int64{1}, 3)}, []string{"y"}, nil),
		"bytes":    cacheKey("m", 1, []*Tensor{x("a", []int64{2}, 1, 9), x("b", []int64{1}, 3)}, []string{"y"}, nil),
		"shape":    cacheKey("m", 1, []*Tensor{x("a", []int64{1, 2}, 1, 2), x("b", []int64{1}, 3)}, []string{"y"}, nil),
		"split":    cacheKey("m", 1, []*Tensor{x("a", []int64{1}, 1), x("b", []int64{2}, 2, 3)}, []string{"y"}, nil),
		"name":     cacheKey("m", 1, []*Tensor{x("c", []int64{2}, 1, 2), x("b", []int64{1}, 3)}, []string{"y"}, nil),
		"outputs":  cacheKey("m", 1, []*Tensor{x("a", []int64{2}, 1, 2), x("b", []int64{1}, 3)}, []string{"z"}, nil),
		"classify": cacheKey("m", 1, []*Tensor{x("a", []int64{2}, 1, 2), x("b", []int64{1}, 3)}, []string{"y"}, []RequestedOutput{{Name: "y", ClassCount: 2}}),
	} {
		if other == base {
			t.Errorf("another %s gives the same key", name)
		}
	}
	dt := []*Tensor{x("a", []int64{2}, 1, 2), x("b", []int64{1}, 3)}
	dt[0].DataType = TypeInt8
	if cacheKey("m", 1, dt, []string{"y"}, nil) == base {
		t.Error("another datatype gives the same key")
	}
}

// Under preserve_ordering a hit is answered after the requests already
// taken for execution, as Triton's dynamic batcher orders it.
func TestResponseCacheHitKeepsPreservedOrder(t *testing.T) {
	ctx := context.Background()
	s, b := cachedEchoGated(t, cacheOn+"dynamic_batching { preserve_ordering: true }\n", cache.NewLocalSize(1<<20), false)
	infer := func(req *InferRequest) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.Infer(ctx, req)
			done <- err
		}()
		return done
	}
	primed := infer(batchReq(1, 1, 3))
	<-b.started
	b.gate <- struct{}{}
	if err := <-primed; err != nil {
		t.Fatal(err)
	}
	running := infer(batchReq(7, 1, 3)) // a miss, held at the gate
	<-b.started
	hit := infer(batchReq(1, 1, 3))
	select {
	case err := <-hit:
		t.Fatalf("the hit was answered (%v) before the request taken ahead of it", err)
	case <-time.After(200 * time.Millisecond):
	}
	b.gate <- struct{}{}
	if err := <-running; err != nil {
		t.Fatal(err)
	}
	if err := <-hit; err != nil {
		t.Fatal(err)
	}
	if st := stats(t, s); st.CacheHit.Count != 1 || st.ExecutionCount != 2 {
		t.Errorf("hits %d, executions %d; want 1 and 2", st.CacheHit.Count, st.ExecutionCount)
	}
}
