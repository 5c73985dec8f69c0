package main

import (
	"os"
	"strings"
)

// environment is the process environment, read once when the command
// starts (processEnv) and handed down: the command's own settings read it
// here, and the packages below get what they need as options (a getenv
// function or fields), so that no library package reads the process
// environment itself. docs/environment.md lists every variable, its
// meaning and who reads it.
//
// Some reads stay outside it, on purpose:
//   - the Python workers start from the process environment as it is when
//     each one starts (workerEnviron), so that what the server sets after
//     start (ORT_DISABLE_TELEMETRY, set before ONNX Runtime loads, and the
//     exports of `inferd serve`) reaches them as it always did;
//   - the cloud SDKs' own discovery (the AWS default credential chain, GCS
//     Application Default Credentials, the Azure default credential) reads
//     the environment itself, as each SDK documents;
//   - prestart.go's constructor reads ORT_LIB_PATH and INFERD_ORT_PRESTART
//     before the Go runtime starts, to begin ONNX Runtime's load then;
//   - core/onnxrt reads ORT_LIB_PATH when it is given no library path
//     (tests and benchmarks; this command always passes one, from Locate)
//     and sets ORT_DISABLE_TELEMETRY unless it is set, the variable ONNX
//     Runtime itself reads.
type environment map[string]string

// processEnv reads the process environment. As with os.Getenv, the first
// entry of a name wins.
func processEnv() environment {
	e := environment{}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if _, seen := e[k]; !seen {
			e[k] = v
		}
	}
	return e
}

// get is os.Getenv over e: "" for a variable that is not set.
func (e environment) get(key string) string { return e[key] }

// lookup is os.LookupEnv over e.
func (e environment) lookup(key string) (string, bool) {
	v, ok := e[key]
	return v, ok
}

// workerEnviron is the environment a Python worker starts from: the
// process's as it is at the worker's start (see environment).
func workerEnviron() []string { return os.Environ() }
