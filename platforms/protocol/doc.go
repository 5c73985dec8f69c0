// Package protocol is the transport-neutral part of the KServe v2 / Triton
// protocol: what every frontend (HTTP in platforms/httpapi, gRPC in
// platforms/grpcapi) answers, as plain Go values, and the errors it answers
// with, each carrying its Triton error class (core.Code). A transport only
// decodes its request into these calls and renders their results; it maps
// an error's class to its own status in one place, with HTTPStatus or
// GRPCCode.
//
// The package imports neither net/http nor gRPC: statuses are plain
// numbers (HTTP status codes, and gRPC code numbers as in
// google.golang.org/grpc/codes).
package protocol
