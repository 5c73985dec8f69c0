// Package codec is the KServe/Triton v2 inference wire format of the HTTP
// frontend, independent of net/http: the decoding of an infer request body
// (JSON header plus binary tensor data, triton-inference-server/server
// docs/protocol/extension_binary_data.md) into an Envelope, the core
// request with the way each output travels back; the encoding of a
// core.InferResponse into the JSON header and binary blobs of the reply;
// the generate extension's tensor values; and the
// Inference-Header-Content-Length rules the cloud containers share.
//
// JSON is read and written with platforms/tritonjson, so texts and numbers
// are Triton's byte for byte; request parameters are read by the protocol's
// one reader (protocol.ParamReader with protocol.HTTPRules) and response
// parameters written through protocol.ResponseParam, as gRPC reads and
// writes them.
//
// Every error this package returns is a *core.Error whose Code and message
// follow Triton's HTTP frontend (triton-inference-server/server
// src/http_server.cc, HttpCodeFromError and the infer handler): JSON parse
// and type errors are CodeInternal (HTTP 500), request validation errors
// CodeInvalidArg (400).
package codec
