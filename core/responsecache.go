package core

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The response cache (triton-inference-server/server
// docs/user_guide/response_cache.md): a version whose config enables
// response_cache, on a server started with a cache, answers a request
// whose key it holds from the cache without running the model. As in
// Triton the lookup happens once the request is queued for its model
// (triton-inference-server/core src/dynamic_batch_scheduler.cc, and
// src/ensemble_scheduler/ensemble_scheduler.cc for an ensemble, cached at
// its top level), and the response of a miss is inserted once it is
// complete. Decoupled and sequence models are refused when their config
// is validated.

// cacheProbe is one request's cache lookup: its key and how long the lookup
// took (counted into a miss's duration with the insertion).
type cacheProbe struct {
	key      string
	lookupNs int64
}

// cacheKey hashes what determines a response: the model name and version,
// and each input's name, datatype, shape and bytes in name order, as
// Triton's TritonCache::Hash (triton-inference-server/core
// src/cache_manager.cc) hashes the name, version, input names and bytes.
// inferd also hashes the datatype and shape, so that the same bytes sent
// as another shape never share an entry, and the requested outputs and
// classification counts, since a response holds only those. Parameters are
// not part of the key, as in Triton. The key is a SHA-256, so that one
// Redis serves many servers with the same keys and a collision is out of
// reach.
func cacheKey(model string, version int64, inputs []*Tensor, outputs []string, classes []RequestedOutput) string {
	h := sha256.New()
	var num [8]byte
	writeInt := func(v int64) {
		binary.LittleEndian.PutUint64(num[:], uint64(v))
		h.Write(num[:])
	}
	writeStr := func(s string) {
		writeInt(int64(len(s)))
		h.Write([]byte(s))
	}
	writeStr(model)
	writeInt(version)
	sorted := slices.Clone(inputs)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Name < sorted[b].Name })
	writeInt(int64(len(sorted)))
	for _, t := range sorted {
		writeStr(t.Name)
		writeStr(t.DataType.String())
		writeInt(int64(len(t.Shape)))
		for _, d := range t.Shape {
			writeInt(d)
		}
		writeInt(int64(len(t.Data)))
		h.Write(t.Data)
	}
	writeInt(int64(len(outputs)))
	for _, o := range outputs {
		writeStr(o)
	}
	for _, o := range classes {
		if o.ClassCount > 0 {
			writeStr(o.Name)
			writeInt(int64(o.ClassCount))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// serveCached looks j's request up in the cache. On a hit it delivers the
// cached response, records the hit and reports served; on a miss it returns
// the probe that insertCached completes once the model answered.
func (mv *ModelVersion) serveCached(j *Job) (probe cacheProbe, served bool, err error) {
	probe.key = cacheKey(mv.key(), mv.Version, j.req.Inputs, j.req.Outputs, j.orig.Outputs)
	start := time.Now()
	entry, ok := mv.cache.Lookup(j.ctx, probe.key)
	var resp *InferResponse
	if ok {
		var derr error
		if resp, derr = decodeCached(entry); derr != nil {
			mv.log.Error("Failed to read the response cache entry: treating it as a miss", "key", probe.key, "error", derr)
			ok = false
		}
	}
	end := time.Now()
	probe.lookupNs = end.Sub(start).Nanoseconds()
	if !ok {
		return probe, false, nil
	}
	resp.ID, resp.ModelName, resp.ModelVersion = j.orig.ID, mv.Name, mv.Version
	var order *TakenOrder
	if mv.batch != nil {
		order = mv.batch.Order()
	}
	if order != nil {
		// As Triton's dynamic batcher delegates a hit's response under
		// preserve_ordering: it is answered once the requests already
		// taken for execution are.
		j.runner = mv.batch
		j.held = append(j.held, heldResponse{resp, true}) // until the job's turn
		order.Taken(j)
		order.Finish(j, nil)
		err = <-j.done
	} else {
		err = j.hand(resp, true)
		j.TraceEnd(err)
	}
	mv.Stats.recordCacheHit(j.times.req, j.times.queue, start, time.Now(), probe.lookupNs)
	return probe, true, err
}

// insertCached stores the response of a miss under its probe's key and
// records the miss (lookup and insertion), as Triton's response delegator
// does. A key another request inserted meanwhile is no miss.
func (mv *ModelVersion) insertCached(ctx context.Context, probe cacheProbe, resp *InferResponse) {
	if resp == nil {
		return
	}
	entry, err := encodeCached(resp)
	start := time.Now()
	if err == nil {
		err = mv.cache.Insert(ctx, probe.key, entry)
	}
	insertNs := time.Since(start).Nanoseconds()
	if errors.Is(err, cache.ErrExists) {
		return
	}
	mv.Stats.recordCacheMiss(probe.lookupNs + insertNs)
	if err != nil {
		mv.log.Error(fmt.Sprintf("Failed to insert key [%s] into response cache: %v", probe.key, err))
	}
}

// Entry layout: a version byte, the parameters, then the outputs (name,
// datatype, shape, bytes); lengths and numbers are little-endian uint64s.
const cacheEntryVersion = 1

// Parameter kinds in an entry.
const (
	paramString byte = iota
	paramInt64
	paramBool
	paramFloat64
)

var errEntry = errors.New("malformed response cache entry")

func encodeCached(resp *InferResponse) ([]byte, error) {
	size := 1 + 16
	for _, t := range resp.Outputs {
		size += 32 + len(t.Name) + 8*len(t.Shape) + len(t.Data)
	}
	b := make([]byte, 0, size)
	b = append(b, cacheEntryVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(resp.Parameters)))
	for _, k := range slices.Sorted(maps.Keys(resp.Parameters)) {
		b = appendStr(b, k)
		switch v := resp.Parameters[k].(type) {
		case string:
			b = appendStr(append(b, paramString), v)
		case int64:
			b = binary.LittleEndian.AppendUint64(append(b, paramInt64), uint64(v))
		case bool:
			p := byte(0)
			if v {
				p = 1
			}
			b = append(b, paramBool, p)
		case float64:
			b = binary.LittleEndian.AppendUint64(append(b, paramFloat64), math.Float64bits(v))
		default:
			return nil, fmt.Errorf("response parameter %q of type %T cannot be cached", k, v)
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(resp.Outputs)))
	for _, t := range resp.Outputs {
		b = appendStr(b, t.Name)
		b = binary.LittleEndian.AppendUint64(b, uint64(t.DataType))
		b = binary.LittleEndian.AppendUint64(b, uint64(len(t.Shape)))
		for _, d := range t.Shape {
			b = binary.LittleEndian.AppendUint64(b, uint64(d))
		}
		b = appendStr(b, string(t.Data))
	}
	return b, nil
}

func appendStr(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}

// entryReader reads an entry; the first malformed read sets err and every
// later read returns zero values.
type entryReader struct {
	b   []byte
	err error
}

func (r *entryReader) next(n uint64) []byte {
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errEntry
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *entryReader) u64() uint64 {
	if p := r.next(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (r *entryReader) bytes() []byte { return r.next(r.u64()) }

// decodeCached rebuilds a response from an entry. The tensors' data are
// copies: a local cache's entry stays shared with later hits.
func decodeCached(b []byte) (*InferResponse, error) {
	if len(b) == 0 || b[0] != cacheEntryVersion {
		return nil, errEntry
	}
	r := &entryReader{b: b[1:]}
	resp := &InferResponse{}
	if n := r.u64(); n > 0 && n <= uint64(len(b)) {
		resp.Parameters = make(map[string]any, n)
		for range n {
			k := string(r.bytes())
			kind := r.next(1)
			if kind == nil {
				break
			}
			switch kind[0] {
			case paramString:
				resp.Parameters[k] = string(r.bytes())
			case paramInt64:
				resp.Parameters[k] = int64(r.u64())
			case paramBool:
				p := r.next(1)
				resp.Parameters[k] = p != nil && p[0] == 1
			case paramFloat64:
				resp.Parameters[k] = math.Float64frombits(r.u64())
			default:
				r.err = errEntry
			}
		}
	}
	n := r.u64()
	if n > uint64(len(b)) {
		return nil, errEntry
	}
	for range n {
		t := &Tensor{Name: string(r.bytes()), DataType: DataType(r.u64())}
		dims := r.u64()
		if dims > uint64(len(b)) {
			return nil, errEntry
		}
		t.Shape = make([]int64, dims)
		for i := range t.Shape {
			t.Shape[i] = int64(r.u64())
		}
		t.Data = slices.Clone(r.bytes())
		resp.Outputs = append(resp.Outputs, t)
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, errEntry
	}
	return resp, nil
}

// responseCache is the cache a version with cfg uses: the server's when
// the config enables response_cache, else nil.
func (s *Server) responseCache(cfg *modelconfig.ModelConfig) cache.Store {
	if s.opts.ResponseCache == nil || !cfg.GetResponseCache().GetEnable() {
		return nil
	}
	return s.opts.ResponseCache
}

// CacheEnabled reports whether this version answers from the response
// cache (the nv_cache_*_per_model metrics exist only then, as in Triton).
func (mv *ModelVersion) CacheEnabled() bool { return mv.cache != nil }
