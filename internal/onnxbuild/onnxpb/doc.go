// Package onnxpb holds the Go types generated from onnx.proto, a minimal
// wire-compatible subset of the ONNX model format.
//
// The generator is built from the google.golang.org/protobuf version pinned in
// go.mod, so regenerating never depends on whatever protoc-gen-go happens to
// be on PATH; only protoc itself must be installed.
package onnxpb

// go generate expands $NAME itself before the shell runs, so the shell's
// variable is written ${DOLLAR}d.
//
//go:generate sh -c "set -e; d=$(mktemp -d); trap 'rm -rf ${DOLLAR}d' EXIT; go build -o ${DOLLAR}d/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go; protoc --plugin=protoc-gen-go=${DOLLAR}d/protoc-gen-go --go_out=. --go_opt=paths=source_relative onnx.proto"
