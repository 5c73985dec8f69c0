package protocol

import (
	"errors"

	"github.com/inferd/inferd/core"
)

// ClassOf is the Triton error class of err: the Code of a *core.Error in
// its chain, else INTERNAL (an error the core did not classify).
func ClassOf(err error) core.Code {
	var ce *core.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return core.CodeInternal
}

// GRPCCode is a gRPC status code number, as google.golang.org/grpc/codes
// numbers them; the gRPC transport converts it with codes.Code(c).
type GRPCCode uint32

// The gRPC codes Triton answers with (triton-inference-server/server
// src/grpc/grpc_utils.cc, GrpcStatusUtil::CodeToStatus).
const (
	GRPCCanceled        GRPCCode = 1
	GRPCUnknown         GRPCCode = 2
	GRPCInvalidArgument GRPCCode = 3
	GRPCNotFound        GRPCCode = 5
	GRPCAlreadyExists   GRPCCode = 6
	GRPCUnimplemented   GRPCCode = 12
	GRPCInternal        GRPCCode = 13
	GRPCUnavailable     GRPCCode = 14
)

// status is one row of statuses: a Triton error class and what
// each transport answers for it.
type status struct {
	http int
	grpc GRPCCode
}

// statuses maps each class as Triton does: gRPC as
// GrpcStatusUtil::CodeToStatus (src/grpc/grpc_utils.cc), HTTP as
// HttpCodeFromError (src/http_server.cc, Triton ≥ 2.42), both in
// triton-inference-server/server. It is indexed by class; a class
// outside it is UNKNOWN.
var statuses = [...]status{
	core.CodeUnknown:       {400, GRPCUnknown},
	core.CodeInternal:      {500, GRPCInternal},
	core.CodeNotFound:      {404, GRPCNotFound},
	core.CodeInvalidArg:    {400, GRPCInvalidArgument},
	core.CodeUnavailable:   {503, GRPCUnavailable},
	core.CodeUnsupported:   {501, GRPCUnimplemented},
	core.CodeAlreadyExists: {400, GRPCAlreadyExists},
	core.CodeCancelled:     {400, GRPCCanceled},
}

func statusOf(code core.Code) status {
	if code < 0 || int(code) >= len(statuses) {
		return statuses[core.CodeUnknown]
	}
	return statuses[code]
}

// HTTPStatus is the HTTP status of an error of class code.
func HTTPStatus(code core.Code) int { return statusOf(code).http }

// GRPCStatus is the gRPC code of an error of class code.
func GRPCStatus(code core.Code) GRPCCode { return statusOf(code).grpc }

// Errors both transports answer with the same text.
var (
	// ErrExiting answers health and readiness while the server drains.
	ErrExiting = core.Errorf(core.CodeUnavailable, "Server exiting")
	// ErrServerNotReady answers gRPC's ModelReady while the server is not
	// ready (triton-inference-server/core src/server.cc).
	ErrServerNotReady = core.Errorf(core.CodeUnavailable, "Server not ready")
	// ErrNotExplicit refuses load and unload outside explicit mode.
	ErrNotExplicit = core.Errorf(core.CodeUnavailable, "explicit model load / unload is not allowed if polling is enabled")
	// ErrRepositoryName refuses a named repository where Triton has none.
	ErrRepositoryName = core.Errorf(core.CodeUnsupported, "'repository_name' specification is not supported")
)
