package core

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/repo/modelconfig"
)

// intoBackend echoes x as y, into the batch's destination for y when it
// has one that fits, and records the destinations it was given.
type intoBackend struct {
	mu   sync.Mutex
	seen [][][]byte // each execution's ConcatBatch.Into
}

func (*intoBackend) Name() string { return "into" }
func (*intoBackend) AutoComplete(context.Context, VersionFiles, *modelconfig.ModelConfig) error {
	return nil
}
func (b *intoBackend) NewInstance(_ context.Context, spec InstanceSpec) (Instance, error) {
	return Concatenated(spec.Config, intoInstance{b}), nil
}

type intoInstance struct{ b *intoBackend }

func (i intoInstance) Execute(_ context.Context, batch *ConcatBatch) error {
	i.b.mu.Lock()
	i.b.seen = append(i.b.seen, batch.Into)
	i.b.mu.Unlock()
	x := batch.Inputs[0]
	data := slices.Clone(x.Data)
	if len(batch.Into) == 1 && len(batch.Into[0]) >= len(x.Data) {
		data = batch.Into[0][:copy(batch.Into[0], x.Data)]
	}
	batch.Results = []*Tensor{{Name: "y", DataType: x.DataType, Shape: x.Shape, Data: data}}
	return nil
}

func (intoInstance) Close() error { return nil }

func startInto(t *testing.T, cfg string, store cache.Store) (*Server, *intoBackend) {
	t.Helper()
	repos := testRepo(t, map[string]string{"m": "backend: \"into\"\n" + cfg})
	b := &intoBackend{}
	s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ResponseCache: store})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, b
}

// TestRequestedOutputInto: a one-request execution hands the backend the
// caller's destination, and a backend that writes there answers a prefix
// of it; a model whose responses are cached never gets one, so that a
// cached response never lies in the caller's memory.
func TestRequestedOutputInto(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    string
		direct bool
	}{
		{"plain", "max_batch_size: 8\n" + echoIO, true},
		{"response cache", cacheOn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, b := startInto(t, tc.cfg, cache.NewLocalSize(1<<20))
			mv, release, err := s.Acquire("m", LatestVersion)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			req := batchReq(1, 1, 4)
			into := make([]byte, 32)
			req.Outputs = []RequestedOutput{{Name: "y", Into: into}}
			resp, err := mv.Infer(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			y := resp.Outputs[0].Data
			if !slices.Equal(y, req.Inputs[0].Data) {
				t.Fatalf("y % x", y)
			}
			if aliased := unsafe.SliceData(y) == unsafe.SliceData(into); aliased != tc.direct {
				t.Fatalf("y in the destination: %v, want %v", aliased, tc.direct)
			}
			if got := b.seen[0] != nil; got != tc.direct {
				t.Fatalf("the backend got destinations %v", b.seen[0])
			}
		})
	}
}

func TestDestinations(t *testing.T) {
	a, c := make([]byte, 1), make([]byte, 2)
	for _, tc := range []struct {
		name      string
		requested []RequestedOutput
		names     []string
		want      [][]byte
	}{
		{"none", []RequestedOutput{{Name: "a"}}, []string{"a"}, nil},
		{"all outputs", nil, []string{"a", "b"}, nil},
		{"in name order", []RequestedOutput{{Name: "c", Into: c}, {Name: "b"}, {Name: "a", Into: a}}, []string{"a", "b", "c"}, [][]byte{a, nil, c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := destinations(tc.requested, tc.names)
			if len(got) != len(tc.want) {
				t.Fatalf("%d destinations, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if unsafe.SliceData(got[i]) != unsafe.SliceData(tc.want[i]) {
					t.Fatalf("destination %d differs", i)
				}
			}
		})
	}
}
