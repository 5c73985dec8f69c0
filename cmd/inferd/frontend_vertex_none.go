//go:build inferd_sagemaker || inferd_lambda

package main

import (
	"log/slog"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/platforms/serve"
)

// vertexBuilt: see frontend_vertex.go.
const vertexBuilt = false

func newVertex(*config, listenSpec, *core.Server, *httpapi.Server, *metrics.Handler, *slog.Logger) (func() error, serve.Actor, string, error) {
	return nil, serve.Actor{}, "", notInBuild("the Vertex AI frontend")
}
