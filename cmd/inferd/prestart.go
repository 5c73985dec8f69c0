package main

// ONNX Runtime's load begins when the process does. Mapping the library
// and creating its environment (OrtEnv) take 40–50 ms of one core, longer
// than the Go runtime's start and every package's init together (about
// 20 ms for the Lambda build, BENCHMARKS.md "Per-cloud builds"), and the
// server needs both before its first model loads. A constructor that the C
// loader runs before the Go runtime starts hands them to a thread of their
// own; when core/onnxrt later loads the same file, dlopen returns the
// mapped library and CreateEnv the environment already made (ORT keeps one
// OrtEnv a process, counted by reference: onnxruntime/core/session/ort_env.cc
// in microsoft/onnxruntime), whose log level onnxruntime_go then sets as
// before. On a host with a core to spare, start-up shortens by the Go side's
// part; on one core it costs nothing but the thread.
//
// It starts only where the server will load that same library: ORT_LIB_PATH
// is set, no --backend-config=onnxruntime,library-path names another one,
// the command is the server (not perf, --help, --version or a test binary)
// and ORT's telemetry is off (unset or 1). INFERD_ORT_PRESTART=0 turns it
// off (docs/environment.md).

/*
#cgo LDFLAGS: -ldl -lpthread
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The OrtApiBase and the position of CreateEnv in struct OrtApi
// (onnxruntime_c_api.h; the table only grows), at the API version
// onnxruntime_go v1.27 asks for (core/onnxrt/ortapi.go).
typedef struct {
	const void* (*GetApi)(uint32_t version);
	const char* (*GetVersionString)(void);
} inferdPrestartApiBase;

enum { inferdPrestartApiVersion = 24, inferdPrestartCreateEnv = 3, inferdPrestartLogError = 3 };

// 1 once the thread is started, 2 once the environment exists, -1 when it
// failed (core/onnxrt then reports the failure itself).
static int inferd_prestart_state;

static void* inferd_prestart_run(void* path) {
	// RTLD_LAZY as onnxruntime_go opens it; the handle is never closed, so
	// the library stays mapped for the process's life, as it does anyway.
	void* h = dlopen((const char*)path, RTLD_LAZY);
	free(path);
	const inferdPrestartApiBase* (*base)(void) = h == NULL ? NULL :
		(const inferdPrestartApiBase* (*)(void))dlsym(h, "OrtGetApiBase");
	const void* api = base == NULL ? NULL : base()->GetApi(inferdPrestartApiVersion);
	if (api == NULL) {
		__atomic_store_n(&inferd_prestart_state, -1, __ATOMIC_RELEASE);
		return NULL;
	}
	void* env = NULL;
	void* (*create)(int, const char*, void**) =
		(void* (*)(int, const char*, void**))((void* const*)api)[inferdPrestartCreateEnv];
	// A failed status is left unreleased: core/onnxrt's own CreateEnv
	// meets the same failure and reports it.
	int ok = create(inferdPrestartLogError, "inferd", &env) == NULL;
	__atomic_store_n(&inferd_prestart_state, ok ? 2 : -1, __ATOMIC_RELEASE);
	return NULL;
}

static int inferd_prestart_is(const char* arg, const char* name) {
	return strcmp(arg, name) == 0;
}

// Run by the C loader before the Go runtime starts, with main's arguments
// (glibc passes argc, argv and envp to .init_array functions).
__attribute__((constructor)) static void inferd_prestart(int argc, char** argv, char** envp) {
	(void)envp;
	const char* off = getenv("INFERD_ORT_PRESTART");
	const char* lib = getenv("ORT_LIB_PATH");
	if ((off != NULL && strcmp(off, "0") == 0) || lib == NULL || lib[0] == '\0') return;
	if (argc > 1 && inferd_prestart_is(argv[1], "perf")) return;
	for (int i = 1; i < argc; i++) {
		const char* a = argv[i];
		if (strncmp(a, "-test.", 6) == 0 || strstr(a, "library-path") != NULL ||
			inferd_prestart_is(a, "--version") || inferd_prestart_is(a, "-version") ||
			inferd_prestart_is(a, "--help") || inferd_prestart_is(a, "-help") || inferd_prestart_is(a, "-h")) {
			return;
		}
	}
	// Only with telemetry off, as core/onnxrt's defaultTelemetryOff sets it
	// unless the user set it: ORT 1.29.0's CreateEnv crashes with telemetry
	// on in an image without a shell, and that crash is better met on the
	// Go side, whose traceback names CreateOrtEnv (deploy's TestImage).
	const char* telemetry = getenv("ORT_DISABLE_TELEMETRY");
	if (telemetry != NULL && strcmp(telemetry, "1") != 0) return;
	setenv("ORT_DISABLE_TELEMETRY", "1", 0);
	// The file itself, so that a relative value means what it means to
	// core/onnxrt (resolved against the working directory).
	char* path = realpath(lib, NULL);
	if (path == NULL) return;
	pthread_attr_t attr;
	pthread_t t;
	if (pthread_attr_init(&attr) != 0) {
		free(path);
		return;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, inferd_prestart_run, path) == 0) {
		// Before the thread could finish: it only ever moves the state on.
		__atomic_compare_exchange_n(&inferd_prestart_state, &(int){0}, 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	} else {
		free(path);
	}
	pthread_attr_destroy(&attr);
}

static int inferd_prestart_get(void) { return __atomic_load_n(&inferd_prestart_state, __ATOMIC_ACQUIRE); }
*/
import "C"

// ortPrestart says whether ONNX Runtime's load began at process start:
// "started" (still running), "done", "failed" or "" (not started).
func ortPrestart() string {
	switch C.inferd_prestart_get() {
	case 1:
		return "started"
	case 2:
		return "done"
	case -1:
		return "failed"
	}
	return ""
}
