package onnxrt

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

// inferd_malloc_trim calls glibc's malloc_trim(0) where the C library has
// it (looked up, so that a libc without it links and skips the call).
static int inferd_malloc_trim(void) {
	int (*trim)(size_t) = (int (*)(size_t))dlsym(RTLD_DEFAULT, "malloc_trim");
	return trim == NULL ? -1 : trim(0);
}
*/
import "C"

// trimHeap hands the C heap's free pages back to the system. Loading a
// model allocates several times its weights only for the while: the
// protobuf ORT parses, the throw-away session that reads the graph's
// inputs and outputs (modelfile.go), the initializers before ORT prepacks
// them. ORT frees them, but glibc keeps freed pages in the arena of the
// thread that freed them (one per thread, up to 8 per core), where a
// session opened on another thread does not reuse them, so they stayed
// resident: inferd serving one instance of a 200 MB model held 440-485 MiB
// (PSS) instead of 270-290, four instances sharing its session up to 856,
// varying with which threads the loads ran on (BENCHMARKS.md, "One ONNX
// Runtime session for many instances"). malloc_trim(0) releases the free
// pages of every arena (glibc malloc_trim(3)). It runs once a session is
// built, not after the throw-away one, whose pages the session then reuses
// where it can; it took 35 to 200 ms per session of the 200 MB model on a
// busy 2-core VM.
func trimHeap() { C.inferd_malloc_trim() }
