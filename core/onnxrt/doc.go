// Package onnxrt is the ONNX Runtime backend: it auto-completes model
// configurations from .onnx files (spec §6.3), checks configurations against
// the graph when an instance loads (§17.6), builds session options and
// execution providers from the config (§17.1-17.4), and runs batches
// through ORT sessions.
//
// ORT is reached through github.com/yalue/onnxruntime_go over the shared
// library (see FindLibrary). The few C API calls that library lacks go
// through ORT's function table directly (ortapi.go). ORT keeps one
// environment per process, so every Backend in a process shares it; see New.
//
// Tensor data is little-endian on the wire and handed to ORT as is, so the
// backend assumes a little-endian host, like ORT's own builds.
package onnxrt
