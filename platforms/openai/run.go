package openai

import (
	"net/http"
	"sync"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/repo/modelconfig"
)

// run takes one core request for t through the inference pipeline, as
// /infer's requests go (lookup, acquire, request log, trace, run, end), so
// that the metrics and traces count it the same way. use reads the
// response inside the pipeline's Render, while the outputs are the
// model's; its error is run's. The forwarded headers
// (--http-header-forward-pattern) are applied as on /infer. A decoupled
// model is refused as /infer refuses it.
func (s *Server) run(r *http.Request, t target, req *core.InferRequest, use func(*core.InferResponse) error) error {
	var result error
	s.api.Pipeline().Run(r.Context(), &infer.Call{
		Protocol: infer.HTTP, Route: r.URL.Path, Model: t.name, Version: t.version,
		Decoupled: httpapi.ErrDecoupled, Meta: instances.Header(r.Header), Buffered: true,
	}, func(_ *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		if fh != nil {
			if err := fh.Apply(req); err != nil {
				return nil, nil, err
			}
		}
		return req, nil, nil
	}, infer.Reply{Render: func(resp *core.InferResponse, err error) {
		if err == nil {
			err = use(resp)
		}
		result = err
	}}, nil)
	return result
}

// runAll runs the requests at once, each on its own goroutine (the rows
// of a call that outnumber max_batch_size), and returns the first error.
// use(i, resp) reads request i's response.
func (s *Server) runAll(r *http.Request, t target, reqs []*core.InferRequest, use func(i int, resp *core.InferResponse) error) error {
	if len(reqs) == 1 {
		return s.run(r, t, reqs[0], func(resp *core.InferResponse) error { return use(0, resp) })
	}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			errs[i] = s.run(r, t, req, func(resp *core.InferResponse) error { return use(i, resp) })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
