//go:build inferd_sagemaker || inferd_vertex

package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/inferd/inferd/platforms/serve"
)

// lambdaBuilt: see frontend_lambda.go.
const lambdaBuilt = false

// lambdaActor is never reached (checkBuild refuses AWS_LAMBDA_RUNTIME_API
// here), but fails the start with the reason if it were.
func lambdaActor(http.Handler, *slog.Logger) serve.Actor {
	return serve.Actor{Name: "Lambda", Run: func() error { return notInBuild("the AWS Lambda adapter") },
		Stop: func(context.Context) error { return nil }}
}
