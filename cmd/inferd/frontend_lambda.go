//go:build !inferd_sagemaker && !inferd_vertex

package main

import (
	"context"
	"log/slog"
	"net/http"

	lambdaplat "github.com/inferd/inferd/platforms/lambda"
	"github.com/inferd/inferd/platforms/serve"
)

// lambdaBuilt says the AWS Lambda adapter is built in; the SageMaker and
// Vertex builds leave it out (builds.go).
const lambdaBuilt = true

// lambdaActor runs the AWS Lambda runtime loop, which feeds events to the
// v2 router (inferd's Lambda mode; the runtime is
// https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html). The
// loop never returns and has no stop: the process's exit ends it.
func lambdaActor(api http.Handler, log *slog.Logger) serve.Actor {
	return serve.Actor{
		Name: "Lambda",
		Run: func() error {
			lambdaplat.Start(api, lambdaplat.Options{Logger: log})
			return nil
		},
		Stop: func(context.Context) error { return nil },
	}
}
