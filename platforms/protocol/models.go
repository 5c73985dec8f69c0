package protocol

import (
	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Acquire holds the version of name that serves version (core.LatestVersion:
// the highest READY one) until release is called, or answers the lookup
// errors of Triton's core (triton-inference-server/core
// src/model_repository_manager/model_repository_manager.cc and
// model_lifecycle.cc): NOT_FOUND for an unknown model or version,
// UNAVAILABLE for a version not at ready state. A decoupled model is
// refused with decoupled when it is not nil; each transport words that
// refusal itself (HTTP's /infer and gRPC's ModelInfer differ).
func Acquire(c *core.Server, name string, version int64, decoupled error) (*core.ModelVersion, func(), error) {
	mv, release, err := c.Acquire(name, version)
	if err != nil {
		return nil, nil, err
	}
	if decoupled != nil && mv.Config.GetModelTransactionPolicy().GetDecoupled() {
		release()
		return nil, nil, decoupled
	}
	return mv, release, nil
}

// Lookup reports the error Acquire would, without holding the model, and
// the configuration of the version it found: a transport that looks the
// model up before it reads the request body (Triton's order) keeps a slow
// upload from holding the model, and decodes against the configuration as
// Triton's generate handler does (triton-inference-server/server
// src/http_server.cc, HandleGenerate reads the model's configuration first).
func Lookup(c *core.Server, name string, version int64, decoupled error) (*modelconfig.ModelConfig, error) {
	mv, release, err := Acquire(c, name, version, decoupled)
	if err != nil {
		return nil, err
	}
	release()
	return mv.Config, nil
}

// ServerLive is the liveness answer: ErrExiting while the server drains.
func ServerLive(c *core.Server, exiting bool) (bool, error) {
	if exiting {
		return false, ErrExiting
	}
	return c.Live(), nil
}

// ServerReady is the readiness answer: ErrExiting while the server drains,
// else whether the core is ready (triton-inference-server/core src/server.cc).
func ServerReady(c *core.Server, exiting bool) (bool, error) {
	if exiting {
		return false, ErrExiting
	}
	return c.Ready(), nil
}

// ModelReady reports whether (name, version) can serve. An unknown model or
// version is simply not ready, as in every released Triton
// (TRITONSERVER_ServerModelIsReady, triton-inference-server/core
// src/tritonserver.cc).
func ModelReady(c *core.Server, name string, version int64) bool {
	return c.ModelReady(name, version)
}

// ModelReadiness is gRPC's ModelReady answer (triton-inference-server/server
// src/grpc/grpc_server.cc, RegisterModelReady): a server
// that is not ready — inferd's only such state once serving is exiting —
// is ErrServerNotReady; with model namespacing a name that resolves to no
// one model is its error (core.Server.Resolve), as Triton's model lookup
// answers it; otherwise ModelReady. HTTP answers every other not-ready case
// 400 (src/http_server.cc, HandleModelReady) and uses ModelReady.
func ModelReadiness(c *core.Server, name string, version int64, exiting bool) (bool, error) {
	if exiting {
		return false, ErrServerNotReady
	}
	if err := c.Resolve(name); err != nil {
		return false, err
	}
	return ModelReady(c, name, version), nil
}
