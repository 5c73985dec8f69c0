package sequence_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo"
)

// genBackend is accBackend whose instances know the copy (generation) of
// the model they belong to: every load makes a new generation. It records
// which generations ran each correlation id and which generations' instances
// were closed.
type genBackend struct {
	accBackend
	mu     sync.Mutex
	loads  map[string]int // VersionDir+instance name -> generation of the last instance made
	gen    int
	ranOn  map[uint64][]int
	closed map[int]int // generation -> instances closed
}

func (b *genBackend) NewInstance(ctx context.Context, spec core.InstanceSpec) (core.Instance, error) {
	inst, err := b.accBackend.NewInstance(ctx, spec)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.loads == nil {
		b.loads, b.ranOn, b.closed = map[string]int{}, map[uint64][]int{}, map[int]int{}
	}
	// The first instance of a load opens a new generation.
	if _, seen := b.loads[spec.Name]; seen || b.gen == 0 {
		clear(b.loads)
		b.gen++
	}
	b.loads[spec.Name] = b.gen
	return &genInstance{Instance: inst, b: b, gen: b.gen}, nil
}

type genInstance struct {
	core.Instance
	b   *genBackend
	gen int
}

func (i *genInstance) Execute(ctx context.Context, e *core.Execution) error {
	i.b.mu.Lock()
	for _, r := range e.Requests {
		id := r.Correlation.ID
		if runs := i.b.ranOn[id]; len(runs) == 0 || runs[len(runs)-1] != i.gen {
			i.b.ranOn[id] = append(runs, i.gen)
		}
	}
	i.b.mu.Unlock()
	return i.Instance.Execute(ctx, e)
}

func (i *genInstance) Close() error {
	i.b.mu.Lock()
	i.b.closed[i.gen]++
	i.b.mu.Unlock()
	return i.Instance.Close()
}

func (b *genBackend) generations(id uint64) []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.ranOn[id]...)
}

func (b *genBackend) closedOf(gen int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed[gen]
}

// waitClosed waits (generously) until n instances of generation gen are
// closed.
func (b *genBackend) waitClosed(t *testing.T, gen, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for b.closedOf(gen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("generation %d: %d instances closed, want %d", gen, b.closedOf(gen), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// reloadServer serves model "m" on b from a folder the test can change,
// returned as the model's config.pbtxt path.
func reloadServer(t *testing.T, b *genBackend, cfg string) (*core.Server, string) {
	t.Helper()
	root := t.TempDir()
	config := filepath.Join(root, "m", "config.pbtxt")
	if err := os.MkdirAll(filepath.Join(root, "m", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte("backend: \"acc\"\n"+cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	repos, err := repo.OpenAll(context.Background(), []string{root})
	if err != nil {
		t.Fatal(err)
	}
	b.started, b.gate = make(chan int, 64), make(chan struct{})
	s := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Sequences: sequence.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: []string{"m"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, config
}

// reload changes the model's files (a comment more in its configuration)
// and loads it again.
func reload(t *testing.T, s *core.Server, config string) {
	t.Helper()
	f, err := os.OpenFile(config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n# reloaded %d\n", time.Now().UnixNano())
	f.Close()
	if err := s.Load(context.Background(), "m", nil); err != nil {
		t.Fatal(err)
	}
}

// A long idle timeout: no sequence in these tests ends by idling unless
// the test says so.
// 4 instances of 8 slots: 32 sequences live at once.
const reloadInstances = 4

const reloadSeqConfig = `max_batch_size: 8
instance_group [ { kind: KIND_CPU count: 4 } ]
` + accIO + `sequence_batching { max_sequence_idle_microseconds: 600000000 ` + accState + ` }`

// seqStep sends one request of sequence id and checks its running sum.
func seqStep(ctx context.Context, s *core.Server, id uint64, flags uint32, x, want int32) error {
	resp, err := s.Infer(ctx, seqReq(core.Correlation{ID: id, Flags: flags}, x, true))
	if err != nil {
		return fmt.Errorf("sequence %d (flags %d): %w", id, flags, err)
	}
	if len(resp.Outputs) != 1 {
		return fmt.Errorf("sequence %d: outputs %+v, want y alone", id, resp.Outputs)
	}
	if got := int32(binary.LittleEndian.Uint32(resp.Outputs[0].Data)); got != want {
		return fmt.Errorf("sequence %d: y = %d, want %d", id, got, want)
	}
	return nil
}

// 32 interleaved sequences, a reload after each has run half its requests:
// they all finish on the old copy with their running sums, none failing;
// 32 sequences started after the reload run on the new copy; the old copy
// closes once its sequences ended.
func TestSequenceReloadFinishesLiveSequences(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, reloadSeqConfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const n, length = 32, 6
	var half, all sync.WaitGroup
	reloaded := make(chan struct{})
	errs := make(chan error, 2*n)
	run := func(id uint64, from, to int, sum *int32) error {
		for k := from; k < to; k++ {
			var flags uint32
			if k == 0 {
				flags |= core.FlagSequenceStart
			}
			if k == length-1 {
				flags |= core.FlagSequenceEnd
			}
			x := int32(id)*10 + int32(k)
			*sum += x
			if err := seqStep(ctx, s, id, flags, x, *sum); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range n {
		id := uint64(100 + i)
		half.Add(1)
		all.Add(1)
		go func() {
			defer all.Done()
			var sum int32
			err := run(id, 0, length/2, &sum)
			half.Done()
			if err != nil {
				errs <- err
				return
			}
			<-reloaded
			if err := run(id, length/2, length, &sum); err != nil {
				errs <- err
			}
		}()
	}
	half.Wait()
	reload(t, s, config)
	close(reloaded)
	// New sequences, side by side with the old copy's second halves.
	for i := range n {
		id := uint64(500 + i)
		all.Add(1)
		go func() {
			defer all.Done()
			var sum int32
			if err := run(id, 0, length, &sum); err != nil {
				errs <- err
			}
		}()
	}
	all.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if g := b.generations(uint64(100 + i)); len(g) != 1 || g[0] != 1 {
			t.Errorf("sequence %d ran on copies %v, want the old copy (1) alone", 100+i, g)
		}
		if g := b.generations(uint64(500 + i)); len(g) != 1 || g[0] != 2 {
			t.Errorf("sequence %d ran on copies %v, want the new copy (2) alone", 500+i, g)
		}
	}
	b.waitClosed(t, 1, reloadInstances)
	if c := b.closedOf(2); c != 0 {
		t.Errorf("%d instances of the new copy closed, want 0", c)
	}
}

// A START for an id that is live on the old copy starts the sequence over
// on the new copy, and the old copy need not wait for the old one.
func TestSequenceReloadStartMovesToNewCopy(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, reloadSeqConfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seqStep(ctx, s, 7, core.FlagSequenceStart, 5, 5); err != nil {
		t.Fatal(err)
	}
	if err := seqStep(ctx, s, 8, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	reload(t, s, config)
	// 8 goes on where it was; 7 starts over.
	if err := seqStep(ctx, s, 8, 0, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := seqStep(ctx, s, 7, core.FlagSequenceStart, 3, 3); err != nil {
		t.Fatal(err)
	}
	if err := seqStep(ctx, s, 7, core.FlagSequenceEnd, 4, 7); err != nil {
		t.Fatal(err)
	}
	if g := b.generations(7); len(g) != 2 || g[0] != 1 || g[1] != 2 {
		t.Errorf("sequence 7 ran on copies %v, want [1 2]", g)
	}
	if c := b.closedOf(1); c != 0 {
		t.Errorf("the old copy closed %d instances while sequence 8 lives on it", c)
	}
	if err := seqStep(ctx, s, 8, core.FlagSequenceEnd, 3, 6); err != nil {
		t.Fatal(err)
	}
	b.waitClosed(t, 1, reloadInstances)
}

// An old copy whose live sequence goes idle closes once the idle timeout
// ends it; the sequence's next request then needs a START, in Triton's
// words.
func TestSequenceReloadIdleSequenceEnds(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, `max_batch_size: 8
`+oneInstance+accIO+`sequence_batching { max_sequence_idle_microseconds: 200000 `+accState+` }`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seqStep(ctx, s, 9, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	reload(t, s, config)
	b.waitClosed(t, 1, 1)
	err := seqStep(ctx, s, 9, 0, 1, 2)
	if ce := (*core.Error)(nil); !errors.As(err, &ce) || ce.Code != core.CodeInvalidArg ||
		ce.Msg != "inference request for sequence 9 to model 'm' must specify the START flag on the first request of the sequence" {
		t.Fatalf("err = %v, want Triton's START error", err)
	}
}

// An unload does not wait for live sequences, on the serving copy nor on
// one a reload replaced (Triton's unload frees the model once its in-flight
// requests are done): both copies close, and a sequence's next request
// gets Triton's answer for a model with no version left.
func TestSequenceUnloadWithLiveSequences(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, reloadSeqConfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seqStep(ctx, s, 1, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	reload(t, s, config)
	if err := seqStep(ctx, s, 2, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Unload(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	for gen := 1; gen <= 2; gen++ {
		if c := b.closedOf(gen); c != reloadInstances {
			t.Errorf("copy %d: %d instances closed once the unload returned, want %d", gen, c, reloadInstances)
		}
	}
	for _, id := range []uint64{1, 2} {
		err := seqStep(ctx, s, id, core.FlagSequenceEnd, 1, 2)
		if ce := (*core.Error)(nil); !errors.As(err, &ce) || ce.Code != core.CodeNotFound ||
			ce.Msg != "Request for unknown model: 'm' has no available versions" {
			t.Errorf("sequence %d after the unload: err = %v, want Triton's unknown model error", id, err)
		}
	}
}

// An exit does not wait for a replaced copy's live sequences either.
func TestSequenceShutdownWithReplacedCopy(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, reloadSeqConfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seqStep(ctx, s, 1, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	reload(t, s, config)
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for gen := 1; gen <= 2; gen++ {
		if c := b.closedOf(gen); c != reloadInstances {
			t.Errorf("copy %d: %d instances closed once Shutdown returned, want %d", gen, c, reloadInstances)
		}
	}
}

// Two reloads in a row: a sequence of each copy goes on where it started,
// and each replaced copy closes once its sequence ended.
func TestSequenceReloadTwice(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, reloadSeqConfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(seqStep(ctx, s, 1, core.FlagSequenceStart, 1, 1))
	reload(t, s, config)
	must(seqStep(ctx, s, 2, core.FlagSequenceStart, 10, 10))
	reload(t, s, config)
	must(seqStep(ctx, s, 3, core.FlagSequenceStart, 100, 100))
	must(seqStep(ctx, s, 1, 0, 1, 2))
	must(seqStep(ctx, s, 2, core.FlagSequenceEnd, 10, 20))
	b.waitClosed(t, 2, reloadInstances)
	must(seqStep(ctx, s, 1, core.FlagSequenceEnd, 1, 3))
	must(seqStep(ctx, s, 3, core.FlagSequenceEnd, 100, 200))
	b.waitClosed(t, 1, reloadInstances)
	for id, want := range map[uint64]int{1: 1, 2: 2, 3: 3} {
		if g := b.generations(id); len(g) != 1 || g[0] != want {
			t.Errorf("sequence %d ran on copies %v, want [%d]", id, g, want)
		}
	}
	if c := b.closedOf(3); c != 0 {
		t.Errorf("%d instances of the serving copy closed, want 0", c)
	}
}

// A START that took the old copy just before a reload committed (it was
// acquired, not yet queued) starts its sequence where its later requests
// find it: on the old copy while a live sequence keeps that one open, else
// (the old copy having retired) on the new one. Either way the sequence
// goes on, and the old copy closes once nothing runs there.
func TestSequenceReloadStartRacesCommit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		live    bool // a sequence live on the old copy keeps it from retiring
		copyGen int  // the copy sequence 9 runs on
	}{
		{"old copy still open", true, 1},
		{"old copy retired", false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &genBackend{}
			s, config := reloadServer(t, b, reloadSeqConfig)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.live {
				if err := seqStep(ctx, s, 1, core.FlagSequenceStart, 1, 1); err != nil {
					t.Fatal(err)
				}
			}
			old, release, err := s.Acquire("m", core.LatestVersion)
			if err != nil {
				t.Fatal(err)
			}
			reload(t, s, config)
			if !tc.live {
				deadline := time.Now().Add(30 * time.Second)
				for {
					if sequence.Retired(old) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the old copy, with no live sequence, did not retire")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			resp, err := old.Infer(ctx, seqReq(core.Correlation{ID: 9, Flags: core.FlagSequenceStart}, 4, true))
			release()
			if err != nil || yOf(t, resp) != 4 {
				t.Fatalf("START on the copy acquired before the reload: %v, %v", resp, err)
			}
			if err := seqStep(ctx, s, 9, 0, 5, 9); err != nil {
				t.Fatal(err)
			}
			if err := seqStep(ctx, s, 9, core.FlagSequenceEnd, 6, 15); err != nil {
				t.Fatal(err)
			}
			if tc.live {
				if err := seqStep(ctx, s, 1, core.FlagSequenceEnd, 1, 2); err != nil {
					t.Fatal(err)
				}
			}
			b.waitClosed(t, 1, reloadInstances)
			if g := b.generations(9); len(g) != 1 || g[0] != tc.copyGen {
				t.Errorf("sequence 9 ran on copies %v, want [%d]", g, tc.copyGen)
			}
		})
	}
}
