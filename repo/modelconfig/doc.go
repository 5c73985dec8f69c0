// Package modelconfig holds the Triton model-configuration schema
// (inference.ModelConfig) and the server-side rules applied to it:
// parsing config.pbtxt and JSON overrides, rendering the configuration
// endpoint's JSON, normalisation, validation, version-policy selection and
// instance-group placement.
//
// The Go types in model_config.pb.go are generated from model_config.proto;
// regenerate them with `go generate` (needs protoc and protoc-gen-go on
// PATH) after editing the schema.
package modelconfig

//go:generate protoc --go_out=. --go_opt=paths=source_relative model_config.proto
