package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// protocol is everything that differs between HTTP and gRPC: reading the
// model and the server's statistics, and sending one inference. Windows,
// stability, percentiles and reports are shared by both.
type protocol interface {
	model(ctx context.Context) (*modelInfo, error)
	// prepare encodes the requests the load sends, one per tensor set;
	// with shm (not nil) they name its regions instead of carrying data.
	prepare(info *modelInfo, sets [][]tensorData, shm *shmLayout) error
	// registerSystemShm and unregisterSystemShm are the shared-memory
	// extension's calls for one system region.
	registerSystemShm(ctx context.Context, name, key string, size int64) error
	unregisterSystemShm(ctx context.Context, name string) error
	// stats reads one model's cumulative statistics: the one measured,
	// or one of an ensemble's.
	stats(ctx context.Context, model modelRef) (statsSnapshot, error)
	// conn gives one sender goroutine what it sends with (a stream of its
	// own with --streaming); the goroutine closes it when done.
	conn() conn
	shutdown()
}

// conn sends one inference: prepared request i, answer read whole.
type conn interface {
	infer(ctx context.Context, i int) (ioTime, error)
	close()
}

// ioTime is what the client itself spent on one request, as perf_analyzer's
// "Client Send" and "Client Recv" columns count it: writing the request and
// reading the answer. A protocol that cannot tell leaves them zero.
type ioTime struct {
	send, recv time.Duration
}

// rejected tells whether err is the server refusing the request itself
// (so that every later one would fail too), on either protocol.
func rejected(err error) bool {
	var se *serverError
	if errors.As(err, &se) {
		return se.status/100 == 4
	}
	var sm *streamError
	if errors.As(err, &sm) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.FailedPrecondition,
		codes.OutOfRange, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// httpProtocol is the KServe v2 HTTP/REST protocol.
type httpProtocol struct {
	o      *options
	hc     *http.Client // metadata and statistics calls
	rt     http.RoundTripper
	ep     endpoints
	url    *url.URL
	bodies []reqBody
}

func newHTTPProtocol(o *options, conns int) (*httpProtocol, error) {
	ep := newEndpoints(o.baseURL, o.model, o.version)
	u, err := url.Parse(ep.infer)
	if err != nil {
		return nil, fmt.Errorf("infer URL: %w", err)
	}
	hc := newHTTPClient(conns)
	return &httpProtocol{o: o, hc: hc, rt: hc.Transport, ep: ep, url: u}, nil
}

func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 8,
		MaxIdleConnsPerHost: conns + 8, // one kept-alive connection per sender, plus the stats calls
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

func (h *httpProtocol) model(ctx context.Context) (*modelInfo, error) {
	return fetchModel(ctx, h.hc, h.ep, h.o.baseURL, h.o.model)
}

func (h *httpProtocol) prepare(info *modelInfo, sets [][]tensorData, shm *shmLayout) error {
	h.bodies = make([]reqBody, 0, len(sets))
	for k, tensors := range sets {
		var b reqBody
		var err error
		if shm != nil {
			b, err = encodeShmRequest(info.inputs, tensors, shm.inputs[k], info.outputs, shm.outputs)
		} else {
			b, err = encodeRequest(info.inputs, tensors, info.outputs, h.o.binary)
		}
		if err != nil {
			if fromFile(h.o) {
				return fmt.Errorf("data file: step %d: %w", k, err)
			}
			return err
		}
		for name, values := range h.o.headers { // -H
			b.header[name] = values
		}
		h.bodies = append(h.bodies, b)
	}
	return nil
}

func (h *httpProtocol) registerSystemShm(ctx context.Context, name, key string, size int64) error {
	body, err := json.Marshal(struct {
		Key      string `json:"key"`
		Offset   int64  `json:"offset"`
		ByteSize int64  `json:"byte_size"`
	}{key, 0, size})
	if err != nil {
		return err
	}
	return postJSON(ctx, h.hc, h.o.baseURL+"/v2/systemsharedmemory/region/"+url.PathEscape(name)+"/register", body)
}

func (h *httpProtocol) unregisterSystemShm(ctx context.Context, name string) error {
	return postJSON(ctx, h.hc, h.o.baseURL+"/v2/systemsharedmemory/region/"+url.PathEscape(name)+"/unregister", nil)
}

func (h *httpProtocol) stats(ctx context.Context, model modelRef) (statsSnapshot, error) {
	return fetchStats(ctx, h.hc, newEndpoints(h.o.baseURL, model.name, model.version).stats)
}

// conn: HTTP senders share the transport's pool of kept-alive connections.
func (h *httpProtocol) conn() conn { return httpConn{h} }

func (h *httpProtocol) shutdown() { h.hc.CloseIdleConnections() }

type httpConn struct{ h *httpProtocol }

func (httpConn) close() {}

// bodyReader lets one request's body be a plain bytes.Reader with Close,
// and notes when the transport has read all of it (atomically: the
// transport may read it on a goroutine of its own). The transport reads
// exactly ContentLength bytes, so the body's end is its last byte read, not
// an io.EOF.
type bodyReader struct {
	bytes.Reader
	eof atomic.Int64 // time.Now().UnixNano() when the last byte was read
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	b.mark()
	return n, err
}

// WriteTo keeps bytes.Reader's fast path from bypassing mark.
func (b *bodyReader) WriteTo(w io.Writer) (int64, error) {
	n, err := b.Reader.WriteTo(w)
	b.mark()
	return n, err
}

func (b *bodyReader) mark() {
	if b.Reader.Len() == 0 && b.eof.Load() == 0 {
		b.eof.Store(time.Now().UnixNano())
	}
}

func (*bodyReader) Close() error { return nil }

// infer sends one request and reads the whole answer: nil, a *serverError
// for a non-200 status, or the transport's error. Sending lasts until the
// transport has read the whole body, receiving from the answer's header to
// the end of its body.
func (c httpConn) infer(ctx context.Context, i int) (ioTime, error) {
	start := time.Now()
	h := c.h
	b := &h.bodies[i]
	body := &bodyReader{}
	body.Reset(b.data)
	// Built by hand rather than with http.NewRequest: the URL is parsed
	// once and the header map is shared (the transport only reads it).
	req := (&http.Request{
		Method:        http.MethodPost,
		URL:           h.url,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        b.header,
		Body:          body,
		ContentLength: int64(len(b.data)),
		Host:          h.url.Host,
	}).WithContext(ctx)
	// The transport itself, not the client: no redirects or cookies to
	// follow on infer calls, and the client's header copy for redirects
	// would cost allocations on every request.
	resp, err := h.rt.RoundTrip(req)
	if err != nil {
		return ioTime{}, err
	}
	defer resp.Body.Close()
	headers := time.Now()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return ioTime{}, errorFromBody(resp.StatusCode, msg)
	}
	// Draining lets the connection be reused.
	_, err = io.Copy(io.Discard, resp.Body)
	t := ioTime{recv: time.Since(headers)}
	if eof := body.eof.Load(); eof != 0 {
		t.send = time.Duration(eof - start.UnixNano())
	}
	return t, err
}
