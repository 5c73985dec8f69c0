// Package inferencepb holds the Go types and gRPC bindings generated from
// grpc_service.proto: the KServe v2 / Triton GRPCInferenceService
// (protobuf package "inference"), wire-compatible with tritonclient.grpc.
//
// ModelConfig is not redefined here; the generated code refers to
// github.com/inferd/inferd/repo/modelconfig, whose model_config.proto is the
// same protobuf package and is imported by grpc_service.proto.
//
// The standard health service (grpc.health.v1.Health) is not generated here;
// use google.golang.org/grpc/health and its grpc_health_v1 package.
//
// Regenerate with `make generate` (or `go generate` in this directory) after
// editing grpc_service.proto. Both plugins are built into a temporary
// directory at pinned versions, so the output does not depend on whatever
// happens to be on PATH: protoc-gen-go from the google.golang.org/protobuf
// version in go.mod, protoc-gen-go-grpc at the version named in the go:generate
// line below. Only protoc itself must be installed.
package inferencepb

// go generate expands $NAME itself before the shell sees the line, so the
// shell's own variable is written ${DOLLAR}d (go generate turns $DOLLAR into $).
//go:generate sh -c "set -e; d=$(mktemp -d); trap 'rm -rf ${DOLLAR}d' EXIT; go build -o ${DOLLAR}d/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go; GOBIN=${DOLLAR}d go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2; protoc -I ../../../repo/modelconfig -I . --plugin=protoc-gen-go=${DOLLAR}d/protoc-gen-go --plugin=protoc-gen-go-grpc=${DOLLAR}d/protoc-gen-go-grpc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grpc_service.proto"
