package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	v2 "github.com/inferd/inferd/platforms/v2"
)

// infer is POST /v2/models/{m}[/versions/{v}]/infer, processed in Triton's
// order (HandleInfer in triton-inference-server/server src/http_server.cc):
// lookup, decompression, header length, decode,
// core, encode. The body is read between a lookup that only reports the
// lookup errors and the acquisition for the execution, so a slow upload
// never holds the model (an unload or reload waits for held models).
func (s *Server) infer(w http.ResponseWriter, r *http.Request, name string, version int64) {
	recv := s.traceClock()
	if err := v2.Lookup(s.core, name, version, errDecoupled); err != nil {
		writeError(w, err)
		return
	}
	env, err := s.decodeInfer(r, name)
	if err != nil {
		if errors.Is(err, errUnsupportedEncoding) {
			w.Header().Set("Accept-Encoding", "gzip, deflate")
		}
		writeError(w, err)
		return
	}
	if s.opts.HeaderForward != nil {
		// After the body, as in Triton (HandleInfer calls ForwardHeaders once
		// the body is parsed).
		fh := s.opts.HeaderForward.Select(r.Header)
		if err := fh.Apply(env.Request); err != nil {
			writeError(w, err)
			return
		}
	}
	mv, release, err := v2.Acquire(s.core, name, version, errDecoupled)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	env.Request.ModelName, env.Request.ModelVersion = name, mv.Version
	s.logs.LogRequest(r.Context(), s.log, "HTTP", r.URL.Path, env.Request)
	tr := s.startTrace(r, name, recv, env.Request)
	resp, err := mv.Infer(r.Context(), env.Request)
	if tr != nil {
		defer sendTrace(tr)()
	}
	if s.opts.LoadReports != nil {
		// Beyond Triton, which reports on /generate only: a load balancer
		// wants the figures of a refused request too.
		s.opts.LoadReports.SetHeaders(w.Header(), r.Header, mv)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeInferResponse(w, r, resp, env)
}

// errDecoupled is /infer's refusal of a decoupled model.
var errDecoupled = core.Errorf(core.CodeUnsupported, "HTTP end point doesn't support models with decoupled transaction policy")

func (s *Server) writeInferResponse(w http.ResponseWriter, r *http.Request, resp *core.InferResponse, env *codec.Envelope) {
	release := s.work()
	defer release()
	header, blobs, binary, err := codec.EncodeResponse(resp, env)
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	if binary {
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Inference-Header-Content-Length", strconv.Itoa(len(header)))
	} else {
		h.Set("Content-Type", "application/json")
	}
	parts := make([][]byte, 0, 1+len(blobs))
	parts = append(parts, header)
	parts = append(parts, blobs...)
	if enc := responseEncoding(r.Header.Get("Accept-Encoding")); enc != "" {
		if body, err := compress(enc, parts); err == nil {
			h.Set("Content-Encoding", enc)
			h.Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
			return
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	h.Set("Content-Length", strconv.Itoa(total))
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return
		}
	}
}
