package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
)

// serveGuarded serves h as the binary does (NewHTTPServer) on a loopback
// listener until the test ends, and returns the base URL.
func serveGuarded(t testing.TB, h http.Handler, to Timeouts, log *slog.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hs := NewHTTPServer(h, to, log)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			_ = hs.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// TestRecover: a panic in a request's path answers that request 500 with
// the model's name, logs the stack once, and the server keeps serving.
func TestRecover(t *testing.T) {
	var logs servertest.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c := servertest.Start(t, servertest.Options{Repo: writeRepo(t, map[string]testModel{"simple": standardModels(t)["simple"]})})
	api := New(c, Options{Logger: log})
	// Test-only routes that fail the way a bug would.
	api.Router().HandleFunc("/v2/models/{model}/boom", func(_ http.ResponseWriter, r *http.Request) {
		var counts []int
		counts[len(r.URL.Path)]++ // a runtime panic: index out of range
	})
	api.Router().HandleFunc("/v2/models/{model}/late", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", sseContentType)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: {}\n\n")
		_ = http.NewResponseController(w).Flush()
		panic("after the first event")
	})
	api.Router().HandleFunc("/v2/boom", func(http.ResponseWriter, *http.Request) { panic(fmt.Errorf("no model here")) })
	api.Router().HandleFunc("/v2/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	base := serveGuarded(t, api, DefaultTimeouts(), log)

	stacks := func() int { return strings.Count(logs.String(), "panic serving a request") }
	t.Run("model route", func(t *testing.T) {
		status, h, rb := do(t, http.MethodPost, base+"/v2/models/simple/boom", http.Header{"X": {"y"}}, strings.NewReader("{}"))
		want := `{"error":"failed to process the request for model 'simple': internal error: runtime error: index out of range [22] with length 0"}`
		if status != 500 || string(rb) != want || h.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s (%s), want 500 %s", status, rb, h.Get("Content-Type"), want)
		}
		if n := stacks(); n != 1 || !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "goroutine ") {
			t.Fatalf("%d log entries, want one error with the stack:\n%s", n, logs.String())
		}
	})
	t.Run("route without a model", func(t *testing.T) {
		status, _, rb := do(t, http.MethodGet, base+"/v2/boom", nil, nil)
		if want := `{"error":"failed to process the request: internal error: no model here"}`; status != 500 || string(rb) != want {
			t.Fatalf("%d %s", status, rb)
		}
	})
	t.Run("reply already started", func(t *testing.T) {
		before := stacks()
		resp, err := http.Post(base+"/v2/models/simple/late", "application/json", nil)
		must(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || err == nil {
			t.Fatalf("%d %q %v: want the started reply cut short", resp.StatusCode, b, err)
		}
		if n := stacks() - before; n != 1 {
			t.Fatalf("%d log entries for one panic:\n%s", n, logs.String())
		}
	})
	t.Run("ErrAbortHandler is net/http's, not a failure", func(t *testing.T) {
		before := stacks()
		if _, err := http.Get(base + "/v2/abort"); err == nil {
			t.Fatal("aborted request got a reply")
		}
		if stacks() != before {
			t.Fatalf("abort logged as a panic:\n%s", logs.String())
		}
	})
	t.Run("still serving", func(t *testing.T) {
		body := `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":` + seqJSON(16) + `},{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":` + seqJSON(16) + `}]}`
		if status, _, rb := post(t, base+"/v2/models/simple/infer", body); status != 200 {
			t.Fatalf("%d %s", status, rb)
		}
	})
	t.Run("any handler behind NewHTTPServer", func(t *testing.T) {
		url := serveGuarded(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("metrics bug") }), DefaultTimeouts(), log)
		status, _, rb := do(t, http.MethodGet, url+"/metrics", nil, nil)
		if want := `{"error":"failed to process the request: internal error: metrics bug"}`; status != 500 || string(rb) != want {
			t.Fatalf("%d %s", status, rb)
		}
	})
}

func seqJSON(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func TestModelOfPath(t *testing.T) {
	for path, want := range map[string]string{
		"/v2/models/m/infer":                "m",
		"/v2/models/m/versions/2/generate":  "m",
		"/v2/models/m":                      "m",
		"/v2/models/stats":                  "",
		"/v2/models/stats/ready":            "stats",
		"/v2/repository/models/m/load":      "m",
		"/v2/repository/r1/models/m/unload": "m",
		"/v2/repository/index":              "",
		"/v2/health/ready":                  "",
	} {
		if got := ModelOfPath(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// closedWithin reports whether the server closes conn within d (a read
// returns EOF or a reset rather than timing out).
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

// TestTimeouts: a client that sends its headers slowly is cut after the
// header timeout, an idle kept-alive connection after the idle timeout, a
// stalled body after the body timeout and a trickling one by the minimum
// rate; a slow but steady upload much longer than all of them succeeds.
// Cuts are awaited for 3 s, several times the timeouts; the steady upload
// gets a longer body timeout of its own, far above its gaps.
func TestTimeouts(t *testing.T) {
	to := Timeouts{ReadHeader: 300 * time.Millisecond, Idle: 300 * time.Millisecond, Body: 400 * time.Millisecond, BodyMinRate: 64 << 10}
	c := servertest.Start(t, servertest.Options{Repo: writeRepo(t, map[string]testModel{"id1": standardModels(t)["id1"]})})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := serveGuarded(t, New(c, Options{Logger: quiet}), to, quiet)
	addr := strings.TrimPrefix(base, "http://")
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		must(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	t.Run("slow-loris headers", func(t *testing.T) {
		conn := dial()
		start := time.Now()
		go func() {
			_, _ = io.WriteString(conn, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")
			for i := 0; time.Since(start) < 5*time.Second; i++ {
				if _, err := fmt.Fprintf(conn, "X-%d: y\r\n", i); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		if !closedWithin(conn, 3*time.Second) {
			t.Fatal("a client sending headers forever is never cut")
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("cut after %v, before the header timeout", d)
		}
	})
	t.Run("idle keep-alive connection", func(t *testing.T) {
		conn := dial()
		_, _ = io.WriteString(conn, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("%d close=%v", resp.StatusCode, resp.Close)
		}
		start := time.Now()
		if !closedWithin(conn, 3*time.Second) {
			t.Fatal("an idle connection is kept forever")
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Fatalf("closed after %v, before the idle timeout", d)
		}
	})
	t.Run("stalled body", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() { _, _ = pw.Write([]byte(`{"inputs":[`)) }() // then nothing
		start := time.Now()
		r := servertest.SendBody(base+"/v2/models/id1/infer", nil, pr, 1000)
		pw.Close()
		if r.Status != 400 || !strings.Contains(r.Body, "failed to read the request body") || !strings.Contains(r.Body, "timeout") {
			t.Fatalf("%d %q (%v)", r.Status, r.Body, r.Err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("cut after %v", d)
		}
	})
	t.Run("trickling body", func(t *testing.T) {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		defer close(done)
		go func() {
			defer pw.Close()
			_, _ = pw.Write([]byte(`{"inputs":[`))
			for {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond): // well within Body each time
				}
				if _, err := pw.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		start := time.Now()
		r := servertest.SendBody(base+"/v2/models/id1/infer", nil, pr, 1<<20)
		if r.Status != 400 || !strings.Contains(r.Body, "timeout") {
			t.Fatalf("%d %q (%v)", r.Status, r.Body, r.Err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("cut after %v", d)
		}
	})
	t.Run("slow steady upload", func(t *testing.T) {
		// A server of its own with a 2 s body timeout: a 2 MiB raw FP32
		// tensor sent as 64 KiB every 125 ms (512 KiB/s, eight times
		// the minimum rate) takes 4 s in all, twice the body timeout,
		// while each gap is a sixteenth of it, so a busy machine that
		// stalls the sender for a while still stays well within it.
		steady := to
		steady.Body = 2 * time.Second
		url := serveGuarded(t, New(c, Options{Logger: quiet}), steady, quiet)
		const size, chunk = 2 << 20, 64 << 10
		pr, pw := io.Pipe()
		go func() {
			buf := make([]byte, chunk)
			for sent := 0; sent < size; sent += chunk {
				time.Sleep(125 * time.Millisecond)
				if _, err := pw.Write(buf); err != nil {
					return
				}
			}
			pw.Close()
		}()
		start := time.Now()
		r := servertest.SendBody(url+"/v2/models/id1/infer", hdrLen(0), pr, -1)
		if r.Status != 200 {
			t.Fatalf("%d %.200q (%v)", r.Status, r.Body, r.Err)
		}
		if d := time.Since(start); d < 2*steady.Body {
			t.Fatalf("upload took only %v", d)
		}
	})
	t.Run("a long handler after the body is not cut", func(t *testing.T) {
		// The read deadline is cleared once the body has ended: the
		// server's background read (which notices a client leaving)
		// must not time out during a long execution.
		var wg sync.WaitGroup
		slow := New(c, Options{Logger: quiet})
		slow.Router().HandleFunc("/v2/models/{model}/wait", func(w http.ResponseWriter, r *http.Request) {
			wg.Add(1)
			defer wg.Done()
			_, _ = io.ReadAll(r.Body)
			select {
			case <-time.After(3 * to.Body):
				_, _ = io.WriteString(w, "done")
			case <-r.Context().Done():
				http.Error(w, "cancelled", http.StatusServiceUnavailable)
			}
		})
		url := serveGuarded(t, slow, to, quiet)
		status, _, rb := do(t, http.MethodPost, url+"/v2/models/id1/wait", nil, strings.NewReader("{}"))
		if status != 200 || string(rb) != "done" {
			t.Fatalf("%d %s", status, rb)
		}
		wg.Wait()
	})
}
