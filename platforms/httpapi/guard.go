package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
)

// Timeouts bound how long an HTTP connection may take to send a request
// and how long it may sit idle (--http-read-header-timeout,
// --http-idle-timeout, --http-body-read-timeout, --http-body-min-rate).
// There is no write timeout and no timeout on a whole request: streams
// (generate_stream) and SageMaker's asynchronous inferences may run for an
// hour, and a large upload takes as long as the client's bandwidth needs.
type Timeouts struct {
	// ReadHeader bounds reading a request's line and headers, from its
	// first byte (or from the accept for a new connection).
	ReadHeader time.Duration
	// Idle bounds the wait for the next request on a kept-alive
	// connection.
	Idle time.Duration
	// Body is the longest wait for more bytes of a request body: every
	// read that brings data restarts it, so an upload of any size at a
	// steady rate is never cut while a stalled one is.
	Body time.Duration
	// BodyMinRate (bytes per second, 0: off) is the rate a body must
	// average from its first byte on, once the first Body period is
	// spent: a client that trickles bytes just often enough to beat Body
	// is cut too.
	BodyMinRate int64
}

// Default timeouts (docs/flags.md, "Timeouts").
const (
	DefaultReadHeaderTimeout = 30 * time.Second
	DefaultIdleTimeout       = 620 * time.Second
	DefaultBodyReadTimeout   = 60 * time.Second
	DefaultBodyMinRate       = 1024
)

// DefaultTimeouts are the flags' defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: DefaultReadHeaderTimeout, Idle: DefaultIdleTimeout, Body: DefaultBodyReadTimeout, BodyMinRate: DefaultBodyMinRate}
}

// NewHTTPServer returns the http.Server of one listener: h behind Recover
// and the body timeouts, with the header and idle timeouts set. Every
// listener the binary opens (v2 API, metrics, SageMaker, Vertex AI) is
// built here.
func NewHTTPServer(h http.Handler, t Timeouts, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           Recover(BodyTimeouts(h, t), log, nil),
		ReadHeaderTimeout: t.ReadHeader,
		IdleTimeout:       t.Idle,
		// ReadTimeout and WriteTimeout stay 0: see Timeouts.
	}
}

// BodyTimeouts applies t.Body and t.BodyMinRate to the request bodies h
// reads, through the connection's read deadline. The deadline is set when
// the request starts (so a body h leaves unread is still bounded while the
// server discards it), pushed back as data arrives, and cleared when the
// body ends, since the server then reads the connection in the background
// for the whole of the handler.
func BodyTimeouts(h http.Handler, t Timeouts) http.Handler {
	if t.Body <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), t: t, start: time.Now()}
			b.extend(b.start)
			r.Body = b
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody moves the connection's read deadline along a request body.
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	t        Timeouts
	start    time.Time
	received int64
	deadline time.Time // last deadline set
	off      bool      // cleared (body ended) or unsupported
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.received += int64(n)
	switch {
	case b.off:
	case err == io.EOF:
		// The body ended: nothing more to time, and the server's
		// background read must not time out during the handler.
		b.off = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// A failed read (a timeout among others) keeps the deadline:
		// the server would otherwise wait without limit while it
		// discards the rest of the body.
		b.off = true
	case n > 0:
		b.extend(time.Now())
	}
	return n, err
}

// extend sets the deadline for the next bytes: Body after now and, with a
// minimum rate, no later than the body's start plus Body plus the time
// the bytes received so far earn at that rate. Both bounds only grow, so
// the deadline is moved only when it gains more than a sixteenth of Body.
func (b *deadlineBody) extend(now time.Time) {
	d := now.Add(b.t.Body)
	if rate := b.t.BodyMinRate; rate > 0 {
		earned := time.Duration(float64(b.received) / float64(rate) * float64(time.Second))
		d = minTime(d, b.start.Add(b.t.Body+earned))
	}
	if !b.deadline.IsZero() && d.Sub(b.deadline) < b.t.Body/16 {
		return
	}
	if err := b.rc.SetReadDeadline(d); err != nil {
		b.off = true // a writer without deadlines (not a network connection)
		return
	}
	b.deadline = d
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Recover serves h and answers a panic in a request's path instead of
// letting it end the process or drop the connection: the request gets a
// 500 {"error":"failed to process the request for model '<m>': internal
// error: <panic>"} (without the model part when the route has none), the
// panic and its stack go to log once at error level, and the server goes
// on serving. When the reply had already started, the connection is
// aborted instead (http.ErrAbortHandler, which net/http does not log
// again), so the client cannot take a cut reply for a whole one.
//
// modelOf names the request's model; nil reads it from a v2 path
// (/v2/models/{m}/..., /v2/repository/models/{m}/...). Frontends wrap
// their handlers with it; nested wrappers are harmless (the innermost
// answers).
func Recover(h http.Handler, log *slog.Logger, modelOf func(*http.Request) string) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	if modelOf == nil {
		modelOf = func(r *http.Request) string { return ModelOfPath(r.URL.Path) }
	}
	return &recoverer{h: h, log: log, modelOf: modelOf}
}

type recoverer struct {
	h       http.Handler
	log     *slog.Logger
	modelOf func(*http.Request) string
}

func (rc *recoverer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &trackingWriter{ResponseWriter: w}
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v) // net/http's own way to abort: not a failure to report
		}
		model := rc.modelOf(r)
		msg := fmt.Sprintf("internal error: %v", v)
		if model != "" {
			msg = "failed to process the request for model '" + model + "': " + msg
		} else {
			msg = "failed to process the request: " + msg
		}
		rc.log.Error("panic serving a request; answered 500", "method", r.Method, "path", r.URL.Path, "model", model,
			"panic", fmt.Sprint(v), "reply_started", tw.wrote, "stack", string(debug.Stack()))
		if tw.wrote {
			panic(http.ErrAbortHandler)
		}
		for k := range tw.Header() {
			delete(tw.Header(), k) // whatever the handler had set for its reply
		}
		WriteError(tw, http.StatusInternalServerError, msg)
	}()
	rc.h.ServeHTTP(tw, r)
}

// trackingWriter records whether the reply has started.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(status int) {
	if status >= 200 {
		t.wrote = true
	}
	t.ResponseWriter.WriteHeader(status)
}

func (t *trackingWriter) Write(p []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// ModelOfPath is the model a v2 route path names: {m} of /v2/models/{m}/...
// and of /v2/repository[/{repo}]/models/{m}/...; "" for other paths.
func ModelOfPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/v2/models/"); ok {
		name, _, _ := strings.Cut(rest, "/")
		if name == "stats" && !strings.Contains(rest, "/") {
			return ""
		}
		return name
	}
	if rest, ok := strings.CutPrefix(p, "/v2/repository/"); ok {
		if i := strings.Index(rest, "models/"); i >= 0 && (i == 0 || rest[i-1] == '/') {
			name, _, _ := strings.Cut(rest[i+len("models/"):], "/")
			return name
		}
	}
	return ""
}
