package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/repo/modelconfig"
)

// infer is POST /v2/models/{m}[/versions/{v}]/infer: decoded and
// rendered here, run by the pipeline (platforms/infer) in Triton's order
// (HandleInfer in triton-inference-server/server src/http_server.cc). Its
// errors are rendered by the pipeline's Render step, with RenderError, and
// not returned: an error's reply is written before the call ends, as a
// response's is, so that the trace's send stamps frame it.
func (s *Server) infer(w http.ResponseWriter, r *http.Request, name string, version int64) error {
	var env *codec.Envelope
	s.pipe.Run(r.Context(), &infer.Call{
		Protocol: infer.HTTP, Route: r.URL.Path, Model: name, Version: version,
		Decoupled: ErrDecoupled, Meta: header(r.Header),
	}, func(_ *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		var err error
		if env, err = s.decodeInfer(r, name); err != nil {
			return nil, nil, err
		}
		if fh != nil {
			// After the body, as in Triton (HandleInfer calls
			// ForwardHeaders once the body is parsed).
			err = fh.Apply(env.Request)
		}
		// The outputs' regions are held until the response is written.
		return env.Request, &env.Holds, err
	}, infer.Reply{Report: s.inferLoadReport(w, r), Render: func(resp *core.InferResponse, err error) {
		if err == nil {
			err = s.writeInferResponse(w, r, resp, env)
		}
		if err != nil {
			RenderError(w, err)
		}
	}}, nil)
	return nil
}

// inferLoadReport is the pipeline's load report step for an /infer call: the
// ORCA figures in the reply's headers when the request asks for them. Beyond
// Triton, which reports on /generate only: a load balancer wants the
// figures of a refused request too. Nil when load reports are off.
func (s *Server) inferLoadReport(w http.ResponseWriter, r *http.Request) infer.Report {
	if s.opts.LoadReports == nil {
		return nil
	}
	return func(mv *core.ModelVersion) { s.opts.LoadReports.SetHeaders(w.Header(), r.Header, mv) }
}

// header is an HTTP request's headers as the pipeline reads them.
type header http.Header

func (h header) Carrier(context.Context) propagation.TextMapCarrier {
	return propagation.HeaderCarrier(h)
}
func (h header) Headers(context.Context) map[string][]string { return h }

// ErrDecoupled is /infer's refusal of a decoupled model, which platform
// frontends that run /infer's requests in their own format share.
var ErrDecoupled = core.Errorf(core.CodeUnsupported, "HTTP end point doesn't support models with decoupled transaction policy")

// writeInferResponse writes resp, or returns the error that keeps it from
// being rendered (nothing written then).
func (s *Server) writeInferResponse(w http.ResponseWriter, r *http.Request, resp *core.InferResponse, env *codec.Envelope) error {
	release := s.work()
	defer release()
	box := replyBuffer()
	header, blobs, err := codec.AppendResponse((*box)[:0], resp, env)
	if err != nil {
		return err
	}
	// Written (copied out: an io.Writer keeps nothing) before it returns,
	// the header's buffer serves the next reply.
	defer putReplyBuffer(box, header)
	h := w.Header()
	if len(blobs) > 0 {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	} else {
		h.Set("Content-Type", "application/json")
	}
	if enc := responseEncoding(r.Header.Get("Accept-Encoding")); enc != "" {
		parts := make([][]byte, 0, 1+len(blobs))
		parts = append(parts, header)
		parts = append(parts, blobs...)
		if body, err := compress(enc, parts); err == nil {
			h.Set("Content-Encoding", enc)
			h.Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
			return nil
		}
	}
	total := len(header)
	for _, b := range blobs {
		total += len(b)
	}
	h.Set("Content-Length", strconv.Itoa(total))
	if _, err := w.Write(header); err != nil {
		return nil // the client has gone: nothing more to write
	}
	for _, b := range blobs {
		if _, err := w.Write(b); err != nil {
			return nil
		}
	}
	return nil
}

// replyPool holds the buffers /infer renders its JSON headers into, so
// that a reply's header costs no allocation once the pool is warm.
var replyPool sync.Pool // of *[]byte

// maxPooledReply bounds the buffers kept in replyPool: the header of a
// large JSON tensor is left to the collector rather than kept resident.
const maxPooledReply = 64 << 10

// replyBuffer is a buffer from replyPool, or an empty one.
func replyBuffer() *[]byte {
	if box, ok := replyPool.Get().(*[]byte); ok {
		return box
	}
	return new([]byte)
}

// putReplyBuffer gives back box, which now holds header's array (the
// buffer as AppendResponse grew it).
func putReplyBuffer(box *[]byte, header []byte) {
	if cap(header) > maxPooledReply {
		return
	}
	*box = header[:0]
	replyPool.Put(box)
}
