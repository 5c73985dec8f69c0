package lambda

import (
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// streamHead is the status and headers, sent once before the body.
type streamHead struct {
	status int
	header http.Header
}

// streamWriter is the http.ResponseWriter of RESPONSE_STREAM Function URL
// invocations: the status and headers go out at the first Write,
// WriteHeader or Flush, the body through a pipe the runtime client reads
// while the handler is still running.
type streamWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	head   chan streamHead // buffered: the first send never blocks
	sent   bool
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	checkStatus(code)
	if code < 200 {
		return // informational: only the final status goes in the prelude
	}
	w.once.Do(func() {
		w.sent = true
		w.head <- streamHead{status: code, header: w.header.Clone()}
	})
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush sends the head; io.Pipe has no buffer, so written bytes are
// already with the reader.
func (w *streamWriter) Flush() { w.WriteHeader(http.StatusOK) }

// stream runs the handler in the background and returns as soon as the
// head is known; the body follows through the returned reader. The Lambda
// payload limit does not apply (streamed responses may reach 200 MB).
func (a *Handler) stream(r *http.Request) *events.LambdaFunctionURLStreamingResponse {
	pr, pw := io.Pipe()
	w := &streamWriter{header: http.Header{}, pw: pw, head: make(chan streamHead, 1)}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				a.log.Error("lambda: handler failed", "method", r.Method, "path", r.URL.Path, "err", fmt.Sprint(p))
				if w.sent {
					// Only an early end of the stream can signal a
					// failure once the head is out.
					_ = pw.CloseWithError(fmt.Errorf("handler panic: %v", p))
					return
				}
				w.header = http.Header{"Content-Type": {"application/json"}}
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(pw, `{"error":"internal error: handler panic"}`)
				_ = pw.Close()
				return
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing still answers 200
			_ = pw.Close()
		}()
		a.h.ServeHTTP(w, r)
	}()
	head := <-w.head
	h, cookies := flatten(head.header, true)
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: head.status, Headers: h, Cookies: cookies, Body: pr}
}
