package vertex

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/repo/modelconfig"
)

// predictInstances serves an "instances" request on model through the
// inference pipeline (platforms/infer) as the base route path would serve
// its v2 equivalent, decoded and rendered by the instances translator
// (platforms/instances), in Vertex's {"predictions": [...]} envelope.
func (h *Handler) predictInstances(w http.ResponseWriter, r *http.Request, model, path string, q *instances.Request) error {
	if h.api.Restricted(w, r, "inference") {
		return nil
	}
	pipe := h.api.Pipeline()
	if pipe.Logs.Verbose() > 0 {
		// The base route's request line (httpapi.LogRequests), as when the
		// translation ran through it.
		pipe.Logs.LogHTTP(r.Context(), pipe.Log, http.MethodPost, (&url.URL{Path: path}).EscapedPath())
	}
	var batching bool
	pipe.Run(r.Context(), &infer.Call{
		Protocol: infer.HTTP, Route: path, Model: model, Version: core.LatestVersion,
		Decoupled: httpapi.ErrDecoupled, Meta: instances.Header(r.Header),
	}, func(cfg *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		batching = cfg.GetMaxBatchSize() > 0
		release := h.api.Work() // --http-thread-count bounds decoding, as on /infer
		req, err := q.Decode(r.Context(), model, cfg, instances.Options{MaxInputSize: h.api.MaxInputSize()})
		release()
		if err == nil && fh != nil {
			err = fh.Apply(req) // after the body, as the base route does
		}
		return req, nil, err
	}, infer.Reply{Report: h.api.InferLoadReport(w, r), Render: func(resp *core.InferResponse, err error) {
		// The error is written here, not returned to the handler: Render
		// runs before the call ends, so the trace's send stamps frame the
		// reply, error or predictions, as on /infer.
		if err == nil {
			err = h.writePredictions(w, resp, q.Len(), batching)
		}
		if err != nil {
			writeError(w, err)
		}
	}}, nil)
	return nil
}

// writePredictions renders and writes resp's predictions in a worker slot,
// as /infer writes its response.
func (h *Handler) writePredictions(w http.ResponseWriter, resp *core.InferResponse, n int, batching bool) error {
	release := h.api.Work()
	defer release()
	out, err := instances.AppendPredictions(append(make([]byte, 0, 256), `{"predictions":`...), resp.Outputs, n, batching)
	if err != nil {
		return err
	}
	out = append(out, '}')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	_, _ = w.Write(out)
	return nil
}
