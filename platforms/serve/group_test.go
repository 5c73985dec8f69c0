package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// blocker is an actor whose Run blocks until its Stop, which records the
// actor's name in order and returns err.
func blocker(name string, order *[]string, err error) Actor {
	done := make(chan struct{})
	return Actor{Name: name,
		Run: func() error { <-done; return nil },
		Stop: func(context.Context) error {
			*order = append(*order, name)
			close(done)
			return err
		},
	}
}

// TestGroupStopsAllOnFirstError: an actor that fails stops every other
// one, the last added first, and its error, named, is the group's.
func TestGroupStopsAllOnFirstError(t *testing.T) {
	boom := errors.New("boom")
	var order []string
	g, _ := NewGroup(context.Background(), NewDeadline(time.Second), nil)
	g.Go(blocker("a", &order, nil))
	g.Go(Actor{Name: "fails", Run: func() error { return boom }, Stop: func(context.Context) error { order = append(order, "fails"); return nil }})
	g.Go(blocker("c", &order, nil))
	err := g.Wait()
	if !errors.Is(err, boom) || err.Error() != "fails: boom" {
		t.Fatalf("Wait = %v, want fails: boom", err)
	}
	if want := []string{"c", "fails", "a"}; !slices.Equal(order, want) {
		t.Fatalf("stopped %v, want %v", order, want)
	}
}

// TestGroupErrors: what Wait and Stop return, by precedence: the error of
// an actor that returned, then the caller's cause, then the stop errors.
func TestGroupErrors(t *testing.T) {
	actorErr, cause, stopErr := errors.New("actor"), errors.New("cause"), errors.New("stop")
	for _, tt := range []struct {
		name             string
		actorErr, stop   error
		cause            error
		useStop, returns bool // Stop(cause) instead of Wait; an actor returns first
		want             error
	}{
		{name: "signal", want: nil},
		{name: "signal, stop fails", stop: stopErr, want: stopErr},
		{name: "actor returns nil", returns: true, want: nil},
		{name: "actor fails, stop fails", returns: true, actorErr: actorErr, stop: stopErr, want: actorErr},
		{name: "start-up fails", useStop: true, cause: cause, stop: stopErr, want: cause},
		{name: "start-up fails after an actor", useStop: true, returns: true, actorErr: actorErr, cause: cause, want: actorErr},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var order []string
			g, gctx := NewGroup(ctx, NewDeadline(time.Second), nil)
			g.Go(blocker("stops", &order, tt.stop))
			if tt.returns {
				g.Go(Actor{Name: "returns", Run: func() error { return tt.actorErr }, Stop: func(context.Context) error { return nil }})
				<-gctx.Done()
			}
			var err error
			if tt.useStop {
				err = g.Stop(tt.cause)
			} else {
				cancel()
				err = g.Wait()
			}
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			if !slices.Equal(order, []string{"stops"}) {
				t.Errorf("stopped %v", order)
			}
		})
	}
}

// TestGroupContext: the group's context ends when an actor returns, so
// the start-up steps between two actors give up, and with the parent.
func TestGroupContext(t *testing.T) {
	g, ctx := NewGroup(context.Background(), NewDeadline(time.Second), nil)
	release := make(chan struct{})
	g.Go(Actor{Name: "dies", Run: func() error { <-release; return errors.New("dead") }, Stop: func(context.Context) error { return nil }})
	if ctx.Err() != nil {
		t.Fatal("the group's context ended before any actor returned")
	}
	close(release)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the group's context did not end when an actor returned")
	}
	if err := g.Stop(nil); err == nil || err.Error() != "dies: dead" {
		t.Fatalf("Stop = %v, want the actor's error", err)
	}

	parent, cancel := context.WithCancel(context.Background())
	_, ctx = NewGroup(parent, NewDeadline(time.Second), nil)
	cancel()
	if ctx.Err() == nil {
		t.Fatal("the group's context outlived its parent")
	}
}

// TestGroupStopsOnce: a second Stop stops nothing, so a start-up failure
// after an earlier stop does not stop an actor twice.
func TestGroupStopsOnce(t *testing.T) {
	var order []string
	g, _ := NewGroup(context.Background(), NewDeadline(time.Second), nil)
	g.Go(OnStop("once", func(context.Context) error { order = append(order, "once"); return nil }))
	_ = g.Stop(nil)
	_ = g.Stop(nil)
	if !slices.Equal(order, []string{"once"}) {
		t.Fatalf("stopped %v, want once", order)
	}
}

// TestOnStop: the actor's Run holds its place until Stop, whose error is
// the stop function's.
func TestOnStop(t *testing.T) {
	boom := errors.New("boom")
	a := OnStop("x", func(context.Context) error { return boom })
	ran := make(chan error, 1)
	go func() { ran <- a.Run() }()
	select {
	case <-ran:
		t.Fatal("Run returned before Stop")
	case <-time.After(50 * time.Millisecond):
	}
	if err := a.Stop(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("Stop = %v, want boom", err)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Stop")
	}
}

// TestLoop: Stop cancels the loop's context and waits for it to return; a
// loop that ends by itself does not end the group; a loop that ignores
// its context is given up at the stop's deadline.
func TestLoop(t *testing.T) {
	t.Run("stopped", func(t *testing.T) {
		var ended atomic.Bool
		g, gctx := NewGroup(context.Background(), NewDeadline(5*time.Second), nil)
		g.Go(Loop("loop", func(ctx context.Context) { <-ctx.Done(); ended.Store(true) }))
		if err := g.Stop(nil); err != nil {
			t.Fatal(err)
		}
		if !ended.Load() {
			t.Fatal("Stop returned before the loop did")
		}
		if gctx.Err() == nil {
			t.Fatal("the group's context outlived the stop")
		}
	})
	t.Run("ends by itself", func(t *testing.T) {
		g, gctx := NewGroup(context.Background(), NewDeadline(5*time.Second), nil)
		g.Go(Loop("done", func(context.Context) {}))
		select {
		case <-gctx.Done():
			t.Fatal("a loop that ended by itself ended the group")
		case <-time.After(50 * time.Millisecond):
		}
		if err := g.Stop(nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		block := make(chan struct{})
		defer close(block)
		g, _ := NewGroup(context.Background(), NewDeadline(50*time.Millisecond), nil)
		g.Go(Loop("stuck", func(context.Context) { <-block }))
		stopped := make(chan struct{})
		go func() { _ = g.Stop(nil); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Fatal("Stop waited for a stuck loop past the deadline")
		}
	})
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
		g, _ := NewGroup(ctx, NewDeadline(5*time.Second), nil)
		g.Go(HTTP("http", ln, &http.Server{Handler: h, ReadHeaderTimeout: time.Second}))
		groupDone <- g.Wait()
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
	record := func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			t.Error("a stop without a deadline")
		}
		deadlines = append(deadlines, d)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := time.Now()
	g, _ := NewGroup(ctx, stop, nil)
	g.Go(OnStop("a", record))
	g.Go(OnStop("b", record))
	if err := g.Wait(); err != nil {
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
