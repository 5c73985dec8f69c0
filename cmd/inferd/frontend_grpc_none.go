//go:build inferd_sagemaker || inferd_lambda

package main

import (
	"log/slog"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/serve"
)

// grpcBuilt: see frontend_grpc.go.
const grpcBuilt = false

// grpcListener is never reached (checkBuild turns --allow-grpc off and
// refuses the gRPC options), but says why if it were.
func grpcListener(*config, listenSpec, *core.Server, *orca.Reporter, *slog.Logger) (serve.Actor, string, func(), error) {
	return serve.Actor{}, "", nil, notInBuild("the gRPC frontend")
}
