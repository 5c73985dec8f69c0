package vertex

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/repo/modelconfig"
)

// instancesWithParams is an instances body for id1 whose "parameters"
// object holds n members "<prefix><i>":<i>, then tail.
func instancesWithParams(n int, prefix, tail string) []byte {
	b := append([]byte(`{"instances":[[1]],"parameters":{`), servertest.ParamMembers(n, prefix)...)
	return append(append(b, tail...), "}}"...)
}

// TestPredictManyParameters: an instances request whose parameters object
// has 300,000 members (4.4 MB) is decoded in time linear in its size, its
// names cut at a NUL still finding the first member of their prefix. A
// scan of the object per member, as before, took minutes; the bound, a
// minute a request, is far beyond what a linear decoder needs on a slow
// machine.
func TestPredictManyParameters(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 4 MB requests")
	}
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Workers: 1})
	_, base := listen(t, c, api, "", true)
	const n = 300_000
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"distinct names", instancesWithParams(n, "p", ""), 200, `"predictions"`},
		{"NUL names finding the last member", instancesWithParams(n, `x\u0000`, `,"x":"last"`), 200, `"predictions"`},
		{"NUL name without its prefix, last", instancesWithParams(n, "p", `,"k\u0000":1`), 500, "parameter key 'k' was not found in the JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan servertest.Reply, 1)
			start := time.Now()
			go func() {
				done <- servertest.SendBody(base+predictRoute, nil, bytes.NewReader(tc.body), int64(len(tc.body)))
			}()
			select {
			case r := <-done:
				if r.Err != nil || r.Status != tc.status || !strings.Contains(r.Body, tc.want) {
					t.Fatalf("%d %.200q (%v), want %d %s", r.Status, r.Body, r.Err, tc.status, tc.want)
				}
				t.Logf("%d bytes answered in %v", len(tc.body), time.Since(start).Round(time.Millisecond))
			case <-time.After(time.Minute):
				t.Fatal("no reply after a minute")
			}
		})
	}
}

// TestDecodeGivesUpWhenCancelled: decoding a large instances body stops
// with CodeCancelled once the client has gone; a small one is decoded.
func TestDecodeGivesUpWhenCancelled(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`max_batch_size: 0
input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } ]`))
	must(t, err)
	batched, err := modelconfig.Parse([]byte(`max_batch_size: 100000
input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } ]`))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		cfg  *modelconfig.ModelConfig
		body string
	}{
		{"parameters", cfg, string(instancesWithParams(20000, "p", ""))},
		{"instances", batched, `{"instances":[` + strings.Repeat(`{"A":[1]},`, 20000) + `{"A":[1]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := parseInstances([]byte(tc.body))
			if !ok {
				t.Fatal("not an instances body")
			}
			if _, err := q.decode(context.Background(), "m", tc.cfg, 1<<30); err != nil {
				t.Fatalf("live decode: %v", err)
			}
			if _, err := q.decode(ctx, "m", tc.cfg, 1<<30); core.CodeOf(err) != core.CodeCancelled {
				t.Fatalf("cancelled decode: %v", err)
			}
		})
	}
	q, _ := parseInstances([]byte(`{"instances":[[1]],"parameters":{"p":1}}`))
	if _, err := q.decode(ctx, "m", cfg, 1<<30); err != nil {
		t.Fatalf("small body: %v", err)
	}
}

// TestReadManyParams: a large parameters object reads as a small one
// does: every model parameter once, names cut at a NUL finding the first
// member of their prefix, and no map when none is a model parameter.
func TestReadManyParams(t *testing.T) {
	nul := make([]string, 100)
	for i := range nul {
		nul[i] = `"priority\u0000` + strconv.Itoa(i) + `":"x"`
	}
	for _, tc := range []struct {
		name, body string
		check      func(*core.InferRequest) bool
	}{
		{"distinct names", string(instancesWithParams(100, "p", "")),
			func(r *core.InferRequest) bool { return len(r.Parameters) == 100 && r.Parameters["p99"] == int64(99) }},
		{"none a model parameter", `{"instances":[[1]],"parameters":{"priority":3,` + strings.Join(nul, ",") + `}}`,
			func(r *core.InferRequest) bool { return r.Parameters == nil && r.Priority == 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ok := parseInstances([]byte(tc.body))
			if !ok {
				t.Fatal("not an instances body")
			}
			req := &core.InferRequest{}
			if err := readParams(context.Background(), req, q.params); err != nil || !tc.check(req) {
				t.Fatalf("%v: %+v", err, req)
			}
		})
	}
}
