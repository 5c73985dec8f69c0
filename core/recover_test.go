package core

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/repo"
)

// lockedBuffer is a log sink safe for the scheduler's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A backend that panics fails the batch's requests with INTERNAL naming the
// model, logs the stack once, and the instance serves the next request.
func TestPanicInExecutionIsRecovered(t *testing.T) {
	for _, cfg := range []string{
		"max_batch_size: 4\n",                       // default scheduler
		"max_batch_size: 4\ndynamic_batching { }\n", // dynamic batcher
	} {
		t.Run(strings.Fields(cfg)[len(strings.Fields(cfg))-1], func(t *testing.T) {
			root := t.TempDir()
			must(t, os.MkdirAll(filepath.Join(root, "m", "1"), 0o755))
			must(t, os.WriteFile(filepath.Join(root, "m", "config.pbtxt"), []byte(`backend: "echo"
`+cfg+`input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]`), 0o644))
			repos, err := repo.OpenAll(context.Background(), []string{root})
			must(t, err)
			logs := &lockedBuffer{}
			b := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
			b.panicOn.Store(-7)
			s := newTestServer(Options{Repos: repos, Backends: []Backend{b}, ControlMode: ModeExplicit, StartupModels: []string{"m"},
				Logger: slog.New(slog.NewTextHandler(logs, nil))})
			must(t, s.Start(context.Background()))
			defer s.Shutdown(context.Background())

			_, err = s.Infer(context.Background(), batchReq(-7, 1, 1))
			if CodeOf(err) != CodeInternal || Rejected(err) || !strings.Contains(err.Error(), "model 'm'") || !strings.Contains(err.Error(), "echo: x = -7") {
				t.Fatalf("panicking execution answered %v (code %v)", err, CodeOf(err))
			}
			if n := strings.Count(logs.String(), "recovered from a panic"); n != 1 || !strings.Contains(logs.String(), "runtime/debug.Stack") {
				t.Fatalf("want the stack logged once, got %d records:\n%s", n, logs.String())
			}
			// A request that fails validation is rejected, not executed.
			if _, err := s.Infer(context.Background(), batchReq(5, 1, 2)); CodeOf(err) != CodeInvalidArg || !Rejected(err) {
				t.Fatalf("invalid request answered %v (rejected %v)", err, Rejected(err))
			}
			resp, err := s.Infer(context.Background(), batchReq(5, 1, 1))
			if err != nil || len(resp.Outputs) != 1 {
				t.Fatalf("the instance stopped serving after a panic: %v", err)
			}
			mv, release, err := s.Acquire("m", LatestVersion)
			must(t, err)
			defer release()
			if st := mv.Stats.Snapshot(); st.Fail.Count != 1 || st.Success.Count != 1 {
				t.Fatalf("statistics after one panic and one success: %+v", st)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
