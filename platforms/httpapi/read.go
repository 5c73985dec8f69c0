package httpapi

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"math"
	"net/http"
	"sync/atomic"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

// errUnsupportedEncoding refuses a Content-Encoding other than gzip and
// deflate (Triton's text); the handler then advertises what it accepts.
var errUnsupportedEncoding = core.Errorf(core.CodeUnsupported, "Unsupported compression type")

// Request bodies are read only as far as a limit: --http-max-input-size
// for JSON texts, raw and decompressed bodies, and the JSON header plus
// the binary blobs it announces for binary infer requests (the limit is
// Triton's, triton-inference-server/server src/http_server.cc; stopping at
// the announced blobs is inferd's rule). What the buffer commits grows with what the client has
// actually sent (at most twice it), so neither a large Content-Length nor
// a large announcement costs memory by itself.
const (
	// presize is the most a body buffer is sized for up front from
	// Content-Length; bodies up to it are read with one allocation.
	presize = 1 << 20
	// minBuffer is the first buffer of a body of unknown length.
	minBuffer = 4 << 10
)

// bodyReader reads a request body into one growing buffer.
type bodyReader struct {
	r    io.Reader
	size int64 // Content-Length, or -1 when unknown
	buf  []byte
	eof  bool
	err  error // read failure other than EOF
}

func newBodyReader(r io.Reader, size int64) *bodyReader {
	return &bodyReader{r: r, size: size}
}

// fill reads until the buffer holds n bytes or the body ends.
func (b *bodyReader) fill(n int64) {
	for !b.eof && b.err == nil && int64(len(b.buf)) < n {
		if len(b.buf) == cap(b.buf) && !b.grow(n) {
			// The body should have ended at Content-Length: look for
			// its end (or, from an unusual reader, one more byte).
			var one [1]byte
			k, err := b.r.Read(one[:])
			b.buf = append(b.buf, one[:k]...)
			b.done(err)
			continue
		}
		k, err := b.r.Read(b.buf[len(b.buf):min(int64(cap(b.buf)), n)])
		b.buf = b.buf[:len(b.buf)+k]
		b.done(err)
	}
}

func (b *bodyReader) done(err error) {
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.err = err
	}
}

// grow enlarges the buffer towards n bytes, to at most twice what it holds
// (plus one byte), never past Content-Length or n. The first buffer of a
// body with a Content-Length is sized for the whole body when that is
// small (up to twice presize), else presize, even if this fill wants less
// (a binary request's JSON header comes first, its blobs next). It reports
// false when the buffer cannot grow (Content-Length reached).
func (b *bodyReader) grow(n int64) bool {
	limit := n
	if b.size >= 0 {
		limit = min(limit, b.size)
	}
	have := int64(len(b.buf))
	if have >= limit {
		return false
	}
	want := max(2*have, minBuffer)
	if have == 0 && b.size >= 0 {
		want, limit = max(want, presize), b.size
	}
	if want > limit/2 {
		// The next doubling would pass the limit: go there at once
		// rather than through a copy one byte short of it.
		want = limit
	}
	nb := make([]byte, have, want)
	copy(nb, b.buf)
	b.buf = nb
	return true
}

// readError is the 400 for a body that could not be read (the client went
// away, or stalled past --http-body-read-timeout).
func readError(err error) error {
	return core.Errorf(core.CodeInvalidArg, "failed to read the request body: %v", err)
}

// BodyTooLarge reports a body longer than the limit it was read with.
// Size is its Content-Length when the client sent one, else the bytes read
// before stopping (the limit plus one).
type BodyTooLarge struct{ Size int64 }

func (e *BodyTooLarge) Error() string { return "request body too large" }

// ReadBody reads r's body, at most limit bytes of it: a longer body is a
// *BodyTooLarge error, found from Content-Length before reading when the
// client sent one. A failed read is a 400 *core.Error. The SageMaker and
// Vertex frontends read their bodies with it.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &BodyTooLarge{Size: r.ContentLength}
	}
	b := newBodyReader(r.Body, r.ContentLength)
	b.fill(limit + 1)
	if b.err != nil {
		return nil, readError(b.err)
	}
	if n := int64(len(b.buf)); n > limit {
		return nil, &BodyTooLarge{Size: n}
	}
	return b.buf, nil
}

// readJSONBody reads a JSON request body, enforcing --http-max-input-size
// on the JSON text (every endpoint, as EVBufferToJson in
// triton-inference-server/server src/http_server.cc).
func (s *Server) readJSONBody(r *http.Request) ([]byte, error) {
	body, err := ReadBody(r, s.opts.MaxInputSize)
	var tl *BodyTooLarge
	if errors.As(err, &tl) {
		return nil, codec.JSONTooLargeError(tl.Size, s.opts.MaxInputSize)
	}
	return body, err
}

// decodeInfer reads and decodes an infer request body for model name in
// Triton's order (HandleInfer in triton-inference-server/server
// src/http_server.cc: decompression, body length, header length, then JSON
// or raw input), reading no further than
// the limits allow: --http-max-input-size bounds a JSON body, a raw body and
// a decompressed one; a binary request is read up to its JSON header plus
// the blobs that header announces, and one byte more to tell that the body
// goes on (an error whatever follows). Bodies are read before a worker
// slot is taken, and inflated and decoded in one; decoding stops once the
// client has gone (r's context is done).
func (s *Server) decodeInfer(r *http.Request, name string) (*codec.Envelope, error) {
	headerValue, hasHeader := "", false
	if hv, ok := r.Header[codec.HeaderLengthName]; ok && len(hv) > 0 {
		headerValue, hasHeader = hv[0], true
	}
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip", "deflate":
		return s.decodeCompressed(r, name, headerValue, hasHeader)
	default:
		return nil, errUnsupportedEncoding
	}
	if !hasHeader {
		return s.decodeJSON(r, name)
	}
	return s.decodeBinary(r, name, headerValue)
}

// decodeCompressed reads a gzip or deflate body whole, then inflates and
// decodes it in a worker slot.
func (s *Server) decodeCompressed(r *http.Request, name, headerValue string, hasHeader bool) (*codec.Envelope, error) {
	ctx := r.Context()
	limit := s.opts.MaxInputSize
	compressed, err := readCompressed(r, limit)
	if err != nil {
		return nil, err
	}
	return s.decode(ctx, func() (*codec.Envelope, error) {
		body, err := s.inflate(compressed, limit)
		if err != nil {
			return nil, err
		}
		jsonLen := -1
		if hasHeader {
			if jsonLen, err = codec.ParseHeaderLength(headerValue, len(body)); err != nil {
				return nil, err
			}
		}
		if jsonLen < 0 && len(body) == 0 {
			jsonLen = 0 // an empty body without the header is a raw request
		}
		return codec.DecodeRequest(ctx, name, body, jsonLen, limit, s.opts.SharedMemory)
	})
}

// decodeJSON decodes a body without Inference-Header-Content-Length: the
// whole body is JSON; empty, it is a raw request.
func (s *Server) decodeJSON(r *http.Request, name string) (*codec.Envelope, error) {
	ctx := r.Context()
	limit := s.opts.MaxInputSize
	body, err := ReadBody(r, limit)
	var tl *BodyTooLarge
	if errors.As(err, &tl) {
		return nil, codec.JSONTooLargeError(tl.Size, limit)
	}
	if err != nil {
		return nil, err
	}
	jsonLen := -1
	if len(body) == 0 {
		jsonLen = 0
	}
	return s.decode(ctx, func() (*codec.Envelope, error) {
		return codec.DecodeRequest(ctx, name, body, jsonLen, limit, s.opts.SharedMemory)
	})
}

// decodeBinary decodes a body whose Inference-Header-Content-Length
// (headerValue) announces a JSON header followed by binary tensor data,
// reading no more of the body than the header asks for.
func (s *Server) decodeBinary(r *http.Request, name, headerValue string) (*codec.Envelope, error) {
	ctx := r.Context()
	limit := s.opts.MaxInputSize
	jsonLen, ok, inRange := codec.Stoi(headerValue)
	if !ok || !inRange {
		_, err := codec.ParseHeaderLength(headerValue, 0)
		return nil, err
	}
	size := r.ContentLength
	if size >= 0 {
		// Content-Length is the body length (GetContentLength in Triton's
		// src/http_server.cc): check the
		// header against it before reading.
		if _, err := codec.ParseHeaderLength(headerValue, int(min(size, math.MaxInt32))); err != nil {
			return nil, err
		}
	}
	b := newBodyReader(r.Body, size)
	switch {
	case jsonLen < 0:
		// Out of range whatever the length; the message names it.
		b.fill(limit + 1)
		if b.err != nil {
			return nil, readError(b.err)
		}
		_, err := codec.ParseHeaderLength(headerValue, len(b.buf))
		return nil, err
	case jsonLen == 0:
		// Raw binary request (Inference-Header-Content-Length 0).
		if size > limit {
			return nil, codec.RawTooLargeError(size, limit)
		}
		b.fill(limit + 1)
		if b.err != nil {
			return nil, readError(b.err)
		}
		return s.decode(ctx, func() (*codec.Envelope, error) {
			return codec.DecodeRequest(ctx, name, b.buf, 0, limit, s.opts.SharedMemory)
		})
	case jsonLen > limit:
		// Without Content-Length only reading jsonLen bytes would tell
		// that the body is shorter than the header; too large either way.
		return nil, codec.JSONTooLargeError(jsonLen, limit)
	}
	b.fill(jsonLen)
	if b.err != nil {
		return nil, readError(b.err)
	}
	if int64(len(b.buf)) < jsonLen {
		_, err := codec.ParseHeaderLength(headerValue, len(b.buf))
		return nil, err
	}
	if size == jsonLen {
		return s.decode(ctx, func() (*codec.Envelope, error) {
			return codec.DecodeRequest(ctx, name, b.buf, int(jsonLen), limit, s.opts.SharedMemory)
		})
	}
	var header *codec.Envelope
	_, err := s.decode(ctx, func() (*codec.Envelope, error) {
		var err error
		header, err = codec.ParseRequestHeader(name, b.buf[:jsonLen], limit, s.opts.SharedMemory)
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	end := jsonLen + header.BinarySize()
	if end < jsonLen || end == math.MaxInt64 {
		end = math.MaxInt64 - 1 // announced sizes beyond any body
	}
	b.fill(end + 1)
	if b.err != nil {
		return nil, readError(b.err)
	}
	return s.decode(ctx, func() (*codec.Envelope, error) { return header.Decode(ctx, b.buf) })
}

// Compressed bodies are read whole before they are inflated, so that a
// slow client holds no worker slot while it sends, as Triton receives a
// body before its handler decompresses it (HandleInfer and DataCompressor
// in triton-inference-server/server src/http_server.cc and
// src/data_compressor.h). A compressed body is read only as far as one
// could be that inflates within --http-max-input-size. Deflate's least
// expansion is its stored blocks' (5 bytes a block of up to 64 KiB, RFC
// 1951 section 3.2.4), which encoders fall back to for incompressible
// data; the bound allows blocks down to 320 bytes, plus room for the gzip
// or zlib wrapper and its optional header fields.
const (
	storedOverheadDivisor = 64
	wrapperAllowance      = 128 << 10
)

// compressedLimit is the most compressed bytes read for a body that may
// inflate to limit bytes.
func compressedLimit(limit int64) int64 {
	if limit > math.MaxInt64/2 {
		return math.MaxInt64 - 1
	}
	return limit + limit/storedOverheadDivisor + wrapperAllowance
}

// errDecompressedTooLarge is the --http-max-input-size failure of a
// compressed body (Triton's text).
func errDecompressedTooLarge(limit int64) error {
	return core.Errorf(core.CodeInvalidArg, "Decompressed data size exceeds the maximum allowed value of %d bytes. Use --http-max-input-size to increase the limit.", limit)
}

// readCompressed reads a Content-Encoding gzip or deflate body whole,
// without inflating it: one longer than compressedLimit cannot inflate
// within limit and is refused as if it had.
func readCompressed(r *http.Request, limit int64) ([]byte, error) {
	body, err := ReadBody(r, compressedLimit(limit))
	var tl *BodyTooLarge
	switch {
	case errors.As(err, &tl):
		return nil, errDecompressedTooLarge(limit)
	case err != nil:
		return nil, err
	case len(body) == 0:
		return nil, core.Errorf(core.CodeInvalidArg, "nothing to be decompressed")
	}
	return body, nil
}

// inflate decompresses a gzip or deflate body into a buffer that grows as
// the output does, stopping once it passes limit. Triton's decoder
// auto-detects the gzip or zlib wrapper for both names. Callers hold a
// worker slot: Server.inflating counts the bodies being inflated.
func (s *Server) inflate(compressed []byte, limit int64) ([]byte, error) {
	defer s.inflating.enter()()
	br := bytes.NewReader(compressed)
	var zr io.Reader
	var err error
	if len(compressed) >= 2 && compressed[0] == 0x1f && compressed[1] == 0x8b {
		zr, err = gzip.NewReader(br)
	} else {
		zr, err = zlib.NewReader(br)
	}
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArg, "failed to decompress the request body: %v", err)
	}
	out := newBodyReader(zr, -1)
	out.fill(limit + 1)
	switch {
	case out.err != nil:
		return nil, core.Errorf(core.CodeInvalidArg, "failed to decompress the request body: %v", out.err)
	case int64(len(out.buf)) > limit:
		return nil, errDecompressedTooLarge(limit)
	}
	return out.buf, nil
}

// gauge counts the calls in a section of code, and the most there have
// been at once.
type gauge struct {
	now, peak atomic.Int64
}

// enter counts one more call in the section; the function returned counts
// it out.
func (g *gauge) enter() (leave func()) {
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	return func() { g.now.Add(-1) }
}
