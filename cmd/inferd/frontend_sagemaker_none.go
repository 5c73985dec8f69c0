//go:build inferd_vertex || inferd_lambda

package main

import (
	"log/slog"
	"net/http"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
)

// sageMakerBuilt: see frontend_sagemaker.go.
const sageMakerBuilt = false

func sageMakerServeArgs(environment) ([]string, map[string]string, error) {
	return nil, nil, notInBuild("`serve` (the SageMaker frontend)")
}

func sageMakerHandler(*config, *core.Server, *httpapi.Server, http.Handler, *slog.Logger) (http.Handler, error) {
	return nil, notInBuild("the SageMaker frontend")
}
