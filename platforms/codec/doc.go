// Package codec is the KServe/Triton v2 inference wire format, independent of
// net/http: a JSON reader that behaves like the RapidJSON build Triton parses
// with (same accepted language, same error texts and offsets), a JSON writer
// that formats numbers and strings byte-for-byte like Triton, the decoding of
// infer request bodies (JSON header plus binary tensor data) into a
// core.InferRequest, and the encoding of core.InferResponse into the JSON
// header and binary blobs of the reply.
//
// Every error this package returns is a *core.Error whose Code and message
// follow Triton's HTTP frontend (triton-inference-server/server
// src/http_server.cc, HttpCodeFromError and the infer handler): JSON parse
// and type errors are
// CodeInternal (HTTP 500), request validation errors CodeInvalidArg (400).
package codec
