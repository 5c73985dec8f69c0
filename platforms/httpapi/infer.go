package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

// infer is POST /v2/models/{m}[/versions/{v}]/infer, processed in Triton's
// order (http-api.md §9.1): lookup, decompression, header length, decode,
// core, encode. The body is read between a lookup that only reports the
// lookup errors and the acquisition for the execution, so a slow upload
// never holds the model (an unload or reload waits for held models).
func (s *Server) infer(w http.ResponseWriter, r *http.Request, name string, version int64) {
	if err := s.lookup(name, version, true); err != nil {
		writeError(w, err)
		return
	}
	env, err := s.decodeInfer(r, name)
	if err != nil {
		if ce, ok := err.(*core.Error); ok && ce.Code == core.CodeUnsupported && ce.Msg == "Unsupported compression type" {
			w.Header().Set("Accept-Encoding", "gzip, deflate")
		}
		writeError(w, err)
		return
	}
	mv, release, err := s.acquire(name, version, true)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	env.Request.ModelName, env.Request.ModelVersion = name, mv.Version
	resp, err := mv.Infer(r.Context(), env.Request)
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeInferResponse(w, r, resp, env)
}

// errDecoupled is /infer's refusal of a decoupled model.
var errDecoupled = core.Errorf(core.CodeUnsupported, "HTTP end point doesn't support models with decoupled transaction policy")

// acquire holds (name, version) for an execution, answering the lookup
// errors of http-api.md §2.2 and, for /infer, the decoupled refusal.
func (s *Server) acquire(name string, version int64, refuseDecoupled bool) (*core.ModelVersion, func(), error) {
	mv, release, err := s.core.Acquire(name, version)
	if err != nil {
		return nil, nil, err
	}
	if refuseDecoupled && mv.Config.GetModelTransactionPolicy().GetDecoupled() {
		release()
		return nil, nil, errDecoupled
	}
	return mv, release, nil
}

// lookup reports the errors acquire would, without holding the model: the
// lookup comes first in Triton's order, before the body is read.
func (s *Server) lookup(name string, version int64, refuseDecoupled bool) error {
	_, release, err := s.acquire(name, version, refuseDecoupled)
	if err == nil {
		release()
	}
	return err
}

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
