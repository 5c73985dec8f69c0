package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

func TestGroupStopsAllOnFirstError(t *testing.T) {
	boom := errors.New("boom")
	var stopped atomic.Int32
	block := make(chan struct{})
	actors := []Actor{
		{Name: "blocks", Run: func() error { <-block; return nil }, Stop: func(context.Context) { stopped.Add(1); close(block) }},
		{Name: "fails", Run: func() error { return boom }, Stop: func(context.Context) { stopped.Add(1) }},
	}
	if err := Group(context.Background(), NewDeadline(time.Second), actors...); !errors.Is(err, boom) {
		t.Fatalf("Group = %v, want boom", err)
	}
	if stopped.Load() != 2 {
		t.Fatalf("%d actors stopped, want 2", stopped.Load())
	}
}

// TestHTTPDrain cancels the group while a request is in flight: the request
// completes, and new connections are refused.
func TestHTTPDrain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inHandler := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	groupDone := make(chan error, 1)
	go func() {
		groupDone <- Group(ctx, NewDeadline(5*time.Second), HTTP("http", ln, &http.Server{Handler: h, ReadHeaderTimeout: time.Second}))
	}()
	url := "http://" + ln.Addr().String()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-inHandler
	cancel()
	// Shutdown closes the listener at once; poll briefly for it.
	refused := false
	for i := 0; i < 200 && !refused; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			refused = true
			break
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	if !refused {
		t.Error("listener still accepts during the drain")
	}
	close(release)
	if b := <-got; b != "done" {
		t.Fatalf("in-flight request got %q", b)
	}
	if err := <-groupDone; err != nil {
		t.Fatalf("Group = %v", err)
	}
}

// TestGroupSharesOneDeadline: every actor's stop gets the same deadline,
// started when the stop begins, and it is the one the caller's later steps
// read from the Deadline, so a slow stop leaves the next ones less time
// instead of each taking the whole timeout again.
func TestGroupSharesOneDeadline(t *testing.T) {
	stop := NewDeadline(time.Hour)
	defer stop.Release()
	var deadlines []time.Time
	record := func(ctx context.Context) {
		d, ok := ctx.Deadline()
		if !ok {
			t.Error("a stop without a deadline")
		}
		deadlines = append(deadlines, d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := time.Now()
	block := func() error { <-ctx.Done(); return nil }
	if err := Group(ctx, stop, Actor{Name: "a", Run: block, Stop: record}, Actor{Name: "b", Run: block, Stop: record}); err != nil {
		t.Fatal(err)
	}
	later, _ := stop.Context().Deadline()
	if len(deadlines) != 2 || !deadlines[0].Equal(deadlines[1]) || !deadlines[0].Equal(later) {
		t.Fatalf("stop deadlines %v, then %v: want one shared deadline", deadlines, later)
	}
	if later.Before(before.Add(time.Hour)) {
		t.Errorf("deadline %v started before the stop began (%v)", later, before)
	}
}

// TestDeadlineRelease: a released deadline's context is done, whether or
// not its clock had started.
func TestDeadlineRelease(t *testing.T) {
	for _, started := range []bool{false, true} {
		d := NewDeadline(time.Hour)
		if started {
			d.Context()
		}
		d.Release()
		select {
		case <-d.Context().Done():
		default:
			t.Errorf("started %v: the released deadline's context is not done", started)
		}
	}
}
