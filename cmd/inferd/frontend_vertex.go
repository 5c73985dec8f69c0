//go:build !inferd_sagemaker && !inferd_lambda

package main

import (
	"log/slog"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/platforms/serve"
	"github.com/inferd/inferd/vertex"
)

// vertexBuilt says the Vertex AI frontend is built in; the SageMaker and
// Lambda builds leave it out (builds.go).
const vertexBuilt = true

// newVertex builds the Vertex AI frontend over api, with the options of
// its environment, and binds its listener; resolve settles its default
// model once the models have loaded (health reads 400 until then).
func newVertex(cfg *config, spec listenSpec, srv *core.Server, api *httpapi.Server, metricsHandler *metrics.Handler,
	log *slog.Logger) (resolve func() error, _ serve.Actor, addr string, _ error) {
	opts, err := vertex.OptionsFromEnv(cfg.env.get, cfg.vertexDefaultModel, cfg.vertexInvoke)
	if err != nil {
		return nil, serve.Actor{}, "", err
	}
	opts.Logger, opts.Metrics = log, metricsHandler
	h := vertex.New(srv, api, opts)
	actor, addr, err := listen(spec, h, cfg.timeouts(), log)
	return h.Resolve, actor, addr, err
}
