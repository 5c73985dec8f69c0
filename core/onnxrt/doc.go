// Package onnxrt is the ONNX Runtime backend: it auto-completes model
// configurations from .onnx files, checks configurations against the graph
// when an instance loads, builds session options and execution providers
// from the config, and runs each execution's ConcatBatch (its ExecRequests
// concatenated along the batch dimension) through an ORT session, as Triton's
// backend does (triton-inference-server/onnxruntime_backend README.md,
// src/onnxruntime.cc).
//
// A sequence model's control inputs and implicit state need nothing special
// at run time: the sequence batcher feeds them as ordinary tensors after the
// config's inputs and asks for the state outputs by name. At load they
// count as graph inputs (and state outputs as graph outputs) and are checked
// against the graph; auto-complete leaves them out of the config's inputs.
//
// ORT is reached through github.com/yalue/onnxruntime_go over the shared
// library (see FindLibrary). The few C API calls that library lacks go
// through ORT's function table directly (ortapi.go). ORT keeps one
// environment per process, so every Backend in a process shares it; see New.
//
// By default each instance opens its own session; with the model parameter
// share_session_between_instances the instances of a version on one kind
// and device share one (share.go; docs/onnxruntime.md).
//
// Tensor data is little-endian on the wire and handed to ORT as is, so the
// backend assumes a little-endian host, like ORT's own builds.
package onnxrt
