package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
)

// infer is POST /v2/models/{m}[/versions/{v}]/infer, processed in Triton's
// order (http-api.md §9.1): lookup, decompression, header length, decode,
// core, encode.
func (s *Server) infer(w http.ResponseWriter, r *http.Request, name string, version int64) {
	mv, release, err := s.core.Acquire(name, version)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	if mv.Config.GetModelTransactionPolicy().GetDecoupled() {
		writeErrorStatus(w, http.StatusNotImplemented, "HTTP end point doesn't support models with decoupled transaction policy")
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
	env.Request.ModelName, env.Request.ModelVersion = name, mv.Version
	resp, err := mv.Infer(r.Context(), env.Request)
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeInferResponse(w, r, resp, env)
}

// decodeInfer reads and decodes an infer request body for model name. It is
// the seam platform frontends use to accept v2 bodies on their own routes.
func (s *Server) decodeInfer(r *http.Request, name string) (*codec.Envelope, error) {
	body, err := readAll(r.Body, r.ContentLength)
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArg, "failed to read the request body: %v", err)
	}
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip", "deflate":
		if body, err = decompress(body, s.opts.MaxInputSize); err != nil {
			return nil, err
		}
	default:
		return nil, core.Errorf(core.CodeUnsupported, "Unsupported compression type")
	}
	jsonLen := -1
	if hv, ok := r.Header["Inference-Header-Content-Length"]; ok && len(hv) > 0 {
		if jsonLen, err = codec.ParseHeaderLength(hv[0], len(body)); err != nil {
			return nil, err
		}
	}
	if jsonLen < 0 && len(body) == 0 {
		jsonLen = 0 // an empty body without the header is a raw request
	}
	headerSize := int64(jsonLen)
	if jsonLen < 0 {
		headerSize = int64(len(body))
	}
	if headerSize > s.opts.MaxInputSize {
		return nil, codec.JSONTooLargeError(headerSize, s.opts.MaxInputSize)
	}
	return codec.DecodeRequest(name, body, jsonLen, s.opts.MaxInputSize)
}

func (s *Server) writeInferResponse(w http.ResponseWriter, r *http.Request, resp *core.InferResponse, env *codec.Envelope) {
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
