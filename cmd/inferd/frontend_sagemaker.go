//go:build !inferd_vertex && !inferd_lambda

package main

import (
	"log/slog"
	"net/http"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/sagemaker"
)

// sageMakerBuilt says the SageMaker frontend (`inferd serve`, the
// /ping and /invocations listener) is built in; the Vertex and Lambda
// builds leave it out (builds.go).
const sageMakerBuilt = true

// sageMakerServeArgs turns SageMaker's environment into flags, as
// Triton's serve script does (triton-inference-server/server
// docker/sagemaker/serve), with the variables to export.
func sageMakerServeArgs(env environment) ([]string, map[string]string, error) {
	return sagemaker.ServeArgs(env.get, sagemaker.ServeConfig{ModelDir: env.get("INFERD_SAGEMAKER_MODEL_DIR")})
}

// sageMakerHandler is the SageMaker listener's handler over api.
func sageMakerHandler(cfg *config, srv *core.Server, api *httpapi.Server, metricsHandler http.Handler, log *slog.Logger) (http.Handler, error) {
	opts := sagemaker.OptionsFromEnv(cfg.env.get)
	opts.Logger, opts.UnloadTimeout, opts.Metrics = log, cfg.sageMakerUnload, metricsHandler
	return sagemaker.New(srv, api, opts), nil
}
