package sequence_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/sequence"
)

// exitServer serves the sequence model "m" (configuration seq) and the
// plain model "plain" on b.
func exitServer(t *testing.T, b *accBackend, seq string) *core.Server {
	t.Helper()
	repos := testRepo(t, map[string]string{"m": "backend: \"acc\"\n" + seq, "plain": "backend: \"acc\"\nmax_batch_size: 4\n" + oneInstance + accIO})
	s := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Sequences: sequence.Batchers{}, Repos: repos, Backends: []core.Backend{b}, ControlMode: core.ModeExplicit, StartupModels: []string{"*"},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// stoppingText is Triton's refusal of new work during an exit.
const stoppingText = "Server is stopping, scheduler for model has stopped accepting new inference requests"

// Stop, as Triton's exit, refuses new work but lets the live sequences go
// on: a new START and any request to a model without sequences are
// refused (UNAVAILABLE, in Triton's words), as is a load; the requests of
// the live sequence run, with its state, and Stop returns once it ended.
func TestSequenceStopLetsLiveSequencesFinish(t *testing.T) {
	s := exitServer(t, &accBackend{}, "max_batch_size: 4\n"+oneInstance+accIO+
		"sequence_batching { max_sequence_idle_microseconds: 600000000 "+accState+" }")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seqStep(ctx, s, 1, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctx) }()

	// Stop runs in the background: STARTs are taken until it begins.
	var err error
	for id := uint64(100); err == nil; id++ {
		_, err = s.Infer(ctx, seqReq(core.Correlation{ID: id, Flags: core.FlagSequenceStart | core.FlagSequenceEnd}, 1, true))
		if ctx.Err() != nil {
			t.Fatal("STARTs still taken after a minute")
		}
	}
	if err.Error() != stoppingText || core.CodeOf(err) != core.CodeUnavailable || !core.Rejected(err) {
		t.Fatalf("START while stopping: %v (%v), want UNAVAILABLE %q", err, core.CodeOf(err), stoppingText)
	}
	plain := &core.InferRequest{ModelName: "plain", ModelVersion: core.LatestVersion, ID: "p1", Inputs: seqReq(core.Correlation{}, 1, true).Inputs}
	if _, err := s.Infer(ctx, plain); err == nil || err.Error() != "[request id: p1] "+stoppingText || core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("a model without sequences while stopping: %v (%v), want UNAVAILABLE %q", err, core.CodeOf(err), stoppingText)
	}
	if err := s.Load(ctx, "plain", nil); err == nil || err.Error() != "Server not ready" || core.CodeOf(err) != core.CodeUnavailable {
		t.Fatalf("load while stopping: %v, want UNAVAILABLE Server not ready", err)
	}
	if err := seqStep(ctx, s, 1, 0, 2, 3); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with sequence 1 live", err)
	default:
	}
	if err := seqStep(ctx, s, 1, core.FlagSequenceEnd, 3, 6); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop after the last sequence ended: %v", err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// A live sequence that does not end holds Stop until the idle timeout ends
// it, or until the exit deadline, which is Triton's exit timeout error.
func TestSequenceStopEndsLiveSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		idleUs  string
		timeout time.Duration
		want    string
	}{
		{"idle timeout", "100000", time.Minute, ""},
		{"exit deadline", "600000000", 200 * time.Millisecond, "Exit timeout expired. Exiting immediately."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := exitServer(t, &accBackend{}, "max_batch_size: 4\n"+oneInstance+accIO+
				"sequence_batching { max_sequence_idle_microseconds: "+tc.idleUs+" "+accState+" }")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := seqStep(ctx, s, 1, core.FlagSequenceStart, 1, 1); err != nil {
				t.Fatal(err)
			}
			stopCtx, stopCancel := context.WithTimeout(ctx, tc.timeout)
			defer stopCancel()
			err := s.Stop(stopCtx)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Stop = %v, want nil once the idle sequence ended", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || core.CodeOf(err) != core.CodeInternal):
				t.Fatalf("Stop = %v, want INTERNAL %q", err, tc.want)
			}
			var ce *core.Error
			if err != nil && !errors.As(err, &ce) {
				t.Fatalf("Stop's error %T is not a *core.Error", err)
			}
		})
	}
}

// A sequence live on a copy a reload replaced goes on there during the
// exit too: a START for its id is refused without ending it, and Stop
// waits for it.
func TestSequenceStopWaitsForReplacedCopy(t *testing.T) {
	b := &genBackend{}
	s, config := reloadServer(t, b, reloadSeqConfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := seqStep(ctx, s, 8, core.FlagSequenceStart, 1, 1); err != nil {
		t.Fatal(err)
	}
	reload(t, s, config)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctx) }()
	var err error
	for id := uint64(100); err == nil; id++ {
		_, err = s.Infer(ctx, seqReq(core.Correlation{ID: id, Flags: core.FlagSequenceStart | core.FlagSequenceEnd}, 1, true))
		if ctx.Err() != nil {
			t.Fatal("STARTs still taken after a minute")
		}
	}
	if _, err := s.Infer(ctx, seqReq(core.Correlation{ID: 8, Flags: core.FlagSequenceStart}, 1, true)); err == nil || err.Error() != stoppingText {
		t.Fatalf("START for the live id while stopping: %v, want %q", err, stoppingText)
	}
	if err := seqStep(ctx, s, 8, 0, 2, 3); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) with sequence 8 live on the replaced copy", err)
	default:
	}
	if err := seqStep(ctx, s, 8, core.FlagSequenceEnd, 3, 6); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop after the last sequence ended: %v", err)
	}
	if g := b.generations(8); len(g) != 1 || g[0] != 1 {
		t.Errorf("sequence 8 ran on copies %v, want [1]", g)
	}
}
