// Package tritonjson is a JSON reader and writer that behave like the
// TritonJson layer of Triton Inference Server (triton-inference-server/common
// include/triton/common/triton_json.h) and the RapidJSON build under it:
// the reader accepts the same language (NaN and Infinity included, a NUL
// byte ending the input, strings not checked as UTF-8) with the same error
// texts and offsets, and the typed accessors fail with TritonJson's texts;
// the writer formats numbers and strings byte for byte as Triton's replies
// do (Grisu2 doubles, raw non-ASCII bytes).
//
// Parsing builds one flat node list per document that refers to the source
// bytes, with no allocation per value; ArrayWalk, Pos and End let a reader
// convert a large array (a tensor's "data") in one pass over it.
//
// Every error is a *status.Error of class CodeInternal, as Triton's HTTP
// frontend reports JSON failures (HTTP 500). The infer wire format built on
// this package is platforms/codec; logging, tracing, ORCA reports and the
// cloud containers write their JSON with it too.
package tritonjson
