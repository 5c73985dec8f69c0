package onnxrt

// Direct ORT C API calls for what onnxruntime_go v1.27 does not offer:
// registering custom-op libraries, run-options config entries, and running a
// session whose ORT-allocated outputs include FLOAT16/BFLOAT16 (the library
// copies those short; see execute.go). They go through the OrtApi function
// table of the library onnxruntime_go has loaded. ORT's ABI promise makes
// that table append-only, so the indices below (positions in struct OrtApi,
// onnxruntime_c_api.h) never move.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const void* (*GetApi)(uint32_t version);
	const char* (*GetVersionString)(void);
} inferdOrtApiBase;

enum {
	inferdApiVersion = 24, // what onnxruntime_go v1.27 itself asks for
	inferdGetErrorMessage = 2,
	inferdRun = 9,
	inferdCreateTensorWithDataAsOrtValue = 49,
	inferdGetTensorMutableData = 51,
	inferdGetStringTensorDataLength = 53,
	inferdGetStringTensorContent = 54,
	inferdGetDimensionsCount = 61,
	inferdGetDimensions = 62,
	inferdGetTensorShapeElementCount = 64,
	inferdGetTensorTypeAndShape = 65,
	inferdCreateMemoryInfo = 68,
	inferdReleaseStatus = 93,
	inferdReleaseMemoryInfo = 94,
	inferdReleaseValue = 96,
	inferdReleaseTensorTypeAndShapeInfo = 99,
	inferdAddRunConfigEntry = 165,
	inferdRegisterCustomOpsLibraryV2 = 228,
};

typedef void* (*inferdFnPS)(void*, const char*);
typedef void* (*inferdFnPSS)(void*, const char*, const char*);
typedef void* (*inferdFnPP)(const void*, void*);
typedef void* (*inferdFnPPZ)(const void*, void*, size_t);
typedef void* (*inferdFnPPZPZ)(const void*, void*, size_t, size_t*, size_t);
typedef void* (*inferdRunFn)(void*, const void*, const char* const*, const void* const*, size_t,
	const char* const*, size_t, void**);
typedef const char* (*inferdMessageFn)(const void*);
typedef void (*inferdReleaseFn)(void*);

// inferd_ort_api finds the OrtApi table of an already loaded library.
// RTLD_NOLOAD guarantees no second copy of ORT is ever mapped; the table
// outlives the handle closed here because onnxruntime_go holds its own.
static const void* inferd_ort_api(const char* lib) {
	void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	if (h == NULL) return NULL;
	const inferdOrtApiBase* (*base)(void) = (const inferdOrtApiBase* (*)(void))dlsym(h, "OrtGetApiBase");
	const void* api = base == NULL ? NULL : base()->GetApi(inferdApiVersion);
	dlclose(h);
	return api;
}

#define FN(api, i) (((void* const*)(api))[i])

// inferd_status turns an OrtStatus into a malloc'ed message (NULL for OK).
static char* inferd_status(const void* api, void* st) {
	if (st == NULL) return NULL;
	char* out = strdup(((inferdMessageFn)FN(api, inferdGetErrorMessage))(st));
	((inferdReleaseFn)FN(api, inferdReleaseStatus))(st);
	return out;
}

static char* inferd_register_custom_ops(const void* api, void* so, const char* path) {
	return inferd_status(api, ((inferdFnPS)FN(api, inferdRegisterCustomOpsLibraryV2))(so, path));
}

static char* inferd_add_run_config_entry(const void* api, void* ro, const char* k, const char* v) {
	return inferd_status(api, ((inferdFnPSS)FN(api, inferdAddRunConfigEntry))(ro, k, v));
}

static char* inferd_run(const void* api, void* session, const void* ro,
		const char* const* in_names, const void* const* ins, size_t nin,
		const char* const* out_names, void** outs, size_t nout) {
	return inferd_status(api, ((inferdRunFn)FN(api, inferdRun))(session, ro, in_names, ins, nin, out_names, nout, outs));
}

// inferd_shape reads a tensor's rank and, when it fits in cap, its dims.
static char* inferd_shape(const void* api, void* v, int64_t* dims, size_t cap, size_t* rank) {
	void* info = NULL;
	char* err = inferd_status(api, ((inferdFnPP)FN(api, inferdGetTensorTypeAndShape))(v, &info));
	if (err != NULL) return err;
	err = inferd_status(api, ((inferdFnPP)FN(api, inferdGetDimensionsCount))(info, rank));
	if (err == NULL && *rank <= cap)
		err = inferd_status(api, ((inferdFnPPZ)FN(api, inferdGetDimensions))(info, dims, *rank));
	((inferdReleaseFn)FN(api, inferdReleaseTensorTypeAndShapeInfo))(info);
	return err;
}

// inferd_copy_data copies a fixed-size tensor's n bytes into dst.
static char* inferd_copy_data(const void* api, void* v, void* dst, size_t n) {
	void* src = NULL;
	char* err = inferd_status(api, ((inferdFnPP)FN(api, inferdGetTensorMutableData))(v, &src));
	if (err == NULL && n > 0) memcpy(dst, src, n);
	return err;
}

static char* inferd_string_length(const void* api, void* v, size_t* n) {
	return inferd_status(api, ((inferdFnPP)FN(api, inferdGetStringTensorDataLength))(v, n));
}

static char* inferd_string_content(const void* api, void* v, void* buf, size_t n, size_t* offsets, size_t count) {
	return inferd_status(api, ((inferdFnPPZPZ)FN(api, inferdGetStringTensorContent))(v, buf, n, offsets, count));
}

// inferd_tensor_at wraps n bytes at data, in the memory named mem ("Cuda"
// on device id, or "Cpu"), as a tensor: ORT reads them where they are.
static char* inferd_tensor_at(const void* api, const char* mem, int id, uintptr_t data, size_t n,
		const int64_t* shape, size_t rank, int type, void** out) {
	void* info = NULL;
	// OrtDeviceAllocator (0), OrtMemTypeDefault (0)
	char* err = inferd_status(api, ((void* (*)(const char*, int, int, int, void**))FN(api, inferdCreateMemoryInfo))(
		mem, 0, id, 0, &info));
	if (err != NULL) return err;
	err = inferd_status(api, ((void* (*)(const void*, void*, size_t, const int64_t*, size_t, int, void**))
		FN(api, inferdCreateTensorWithDataAsOrtValue))(info, (void*)data, n, shape, rank, type, out));
	((inferdReleaseFn)FN(api, inferdReleaseMemoryInfo))(info);
	return err;
}

static void inferd_release_value(const void* api, void* v) {
	((inferdReleaseFn)FN(api, inferdReleaseValue))(v);
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/inferd/inferd/core"
)

// capi is the OrtApi table of the loaded library, set with the environment.
var capi struct {
	sync.Mutex
	table unsafe.Pointer
	err   error
}

// loadAPI finds the OrtApi table in lib, which onnxruntime_go has loaded.
func loadAPI(lib string) {
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	capi.Lock()
	defer capi.Unlock()
	capi.table, capi.err = C.inferd_ort_api(clib), nil
	if capi.table == nil {
		capi.err = fmt.Errorf("cannot reach the ONNX Runtime C API in %s", lib)
	}
}

func unloadAPI() {
	capi.Lock()
	capi.table, capi.err = nil, errors.New("ONNX Runtime is not loaded")
	capi.Unlock()
}

func api() (unsafe.Pointer, error) {
	capi.Lock()
	defer capi.Unlock()
	if capi.table == nil && capi.err == nil {
		return nil, errors.New("ONNX Runtime is not loaded")
	}
	return capi.table, capi.err
}

// status converts a message from the C helpers into an error.
func status(msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// registerCustomOpsLibrary is OrtApi::RegisterCustomOpsLibrary_V2.
func registerCustomOpsLibrary(so *ort.SessionOptions, path string) error {
	a, err := api()
	if err != nil {
		return err
	}
	p, err := handle(so)
	if err != nil {
		return err
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	return status(C.inferd_register_custom_ops(a, p, cpath))
}

// addRunConfigEntry is OrtApi::AddRunConfigEntry.
func addRunConfigEntry(ro *ort.RunOptions, key, value string) error {
	a, err := api()
	if err != nil {
		return err
	}
	p, err := handle(ro)
	if err != nil {
		return err
	}
	ck, cv := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cv))
	return status(C.inferd_add_run_config_entry(a, p, ck, cv))
}

// cNames is a list of C strings, for the raw run's name arrays.
type cNames []*C.char

func newCNames(names []string) cNames {
	c := make(cNames, len(names))
	for i, n := range names {
		c[i] = C.CString(n)
	}
	return c
}

func (c cNames) free() {
	for _, p := range c {
		C.free(unsafe.Pointer(p))
	}
}

// rawOutput is an output ORT allocated during a raw run, copied to Go.
type rawOutput struct {
	shape []int64
	data  []byte // fixed-size types: raw bytes; STRING: the BYTES layout
}

// runRaw is OrtApi::Run with the given session, run options and
// OrtValues. The nil outputs (auto) are allocated by ORT, then copied into
// raw (indexed like outs) and released: elemSize gives each output's
// element size (0 for STRING), and a fixed-size output that fits its
// destination in into (nil: none) is copied there instead of into new Go
// memory.
func runRaw(session *ort.DynamicAdvancedSession, ro *ort.RunOptions, inNames, outNames cNames,
	ins, outs []unsafe.Pointer, auto []bool, elemSize []int, into [][]byte, raw []rawOutput) error {
	a, err := api()
	if err != nil {
		return err
	}
	err = runValues(session, ro, inNames, outNames, ins, outs)
	// Copy and release every value ORT allocated, even after a failure.
	for i, v := range outs {
		if v == nil || !auto[i] {
			continue
		}
		if err == nil {
			raw[i], err = readRaw(a, v, elemSize[i], into[i])
		}
		C.inferd_release_value(a, v)
	}
	return err
}

// tensorAt wraps the bytes of a tensor held by address (core.DeviceData)
// as an OrtValue of type onnx and shape: on the GPU that holds them, or in
// host memory (id -1). Release it with releaseValue.
func tensorAt(d core.DeviceData, shape []int64, onnx ort.TensorElementDataType) (unsafe.Pointer, error) {
	a, err := api()
	if err != nil {
		return nil, err
	}
	mem, id := "Cuda", C.int(d.DeviceID())
	if id < 0 {
		mem, id = "Cpu", 0
	}
	cmem := C.CString(mem)
	defer C.free(unsafe.Pointer(cmem))
	var dims *C.int64_t
	if len(shape) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	var v unsafe.Pointer
	err = status(C.inferd_tensor_at(a, cmem, id, C.uintptr_t(d.Addr()), C.size_t(d.Size()), dims, C.size_t(len(shape)), C.int(onnx), &v))
	return v, err
}

// releaseValue releases an OrtValue made by tensorAt.
func releaseValue(v unsafe.Pointer) {
	if a, err := api(); err == nil && v != nil {
		C.inferd_release_value(a, v)
	}
}

// runValues is OrtApi::Run over the given OrtValues; a nil output is
// allocated by ORT and left in outs. Unlike onnxruntime_go's Run it
// allocates nothing in Go.
func runValues(session *ort.DynamicAdvancedSession, ro *ort.RunOptions, inNames, outNames cNames, ins, outs []unsafe.Pointer) error {
	a, err := api()
	if err != nil {
		return err
	}
	sess, err := sessionHandle(session)
	if err != nil {
		return err
	}
	rop, err := handle(ro)
	if err != nil {
		return err
	}
	var inPtr, inNamePtr, outPtr, outNamePtr unsafe.Pointer
	if len(ins) > 0 {
		inPtr, inNamePtr = unsafe.Pointer(&ins[0]), unsafe.Pointer(&inNames[0])
	}
	if len(outs) > 0 {
		outPtr, outNamePtr = unsafe.Pointer(&outs[0]), unsafe.Pointer(&outNames[0])
	}
	return status(C.inferd_run(a, sess, rop,
		(**C.char)(inNamePtr), (*unsafe.Pointer)(inPtr), C.size_t(len(ins)),
		(**C.char)(outNamePtr), (*unsafe.Pointer)(outPtr), C.size_t(len(outs))))
}

// maxRank bounds the dims read back from ORT; ONNX tensors stay far below.
const maxRank = 64

func readRaw(a, v unsafe.Pointer, elemSize int, into []byte) (rawOutput, error) {
	var dims [maxRank]C.int64_t
	var rank C.size_t
	if err := status(C.inferd_shape(a, v, &dims[0], maxRank, &rank)); err != nil {
		return rawOutput{}, err
	}
	if rank > maxRank {
		return rawOutput{}, fmt.Errorf("output of rank %d", rank)
	}
	out := rawOutput{shape: make([]int64, rank)}
	count := int64(1)
	for i := range out.shape {
		out.shape[i] = int64(dims[i])
		count *= max(out.shape[i], 0)
	}
	if elemSize == 0 {
		return out, readStrings(a, v, count, &out)
	}
	n := count * int64(elemSize)
	buf := into
	if n == 0 || int64(len(buf)) < n {
		buf = make([]byte, max(n, 1))
	}
	if err := status(C.inferd_copy_data(a, v, unsafe.Pointer(&buf[0]), C.size_t(n))); err != nil {
		return out, err
	}
	out.data = buf[:n]
	return out, nil
}

func readStrings(a, v unsafe.Pointer, count int64, out *rawOutput) error {
	var n C.size_t
	if err := status(C.inferd_string_length(a, v, &n)); err != nil {
		return err
	}
	buf := make([]byte, max(int(n), 1))
	offsets := make([]C.size_t, max(count, 1))
	if count > 0 {
		if err := status(C.inferd_string_content(a, v, unsafe.Pointer(&buf[0]), n, &offsets[0], C.size_t(count))); err != nil {
			return err
		}
	}
	out.data = make([]byte, 0, int(n)+4*int(count))
	for i := range count {
		end := int(n)
		if i+1 < count {
			end = int(offsets[i+1])
		}
		s := buf[offsets[i]:end]
		out.data = binary.LittleEndian.AppendUint32(out.data, uint32(len(s)))
		out.data = append(out.data, s...)
	}
	return nil
}

// layoutErr records whether onnxruntime_go's structs still look as the
// handle readers below expect: SessionOptions, RunOptions and
// ValueInternalData are one unexported pointer field each, and a
// DynamicAdvancedSession points to an AdvancedSession whose first field is
// the OrtSession. A library upgrade that changes this fails loudly instead
// of passing garbage to C.
var layoutErr = checkLayouts()

func checkLayouts() error {
	for _, t := range []reflect.Type{
		reflect.TypeFor[ort.SessionOptions](), reflect.TypeFor[ort.RunOptions](),
		reflect.TypeFor[ort.ValueInternalData](), reflect.TypeFor[ort.DynamicAdvancedSession](),
	} {
		if t.Kind() != reflect.Struct || t.NumField() != 1 || t.Field(0).Type.Kind() != reflect.Pointer {
			return fmt.Errorf("onnxruntime_go %s layout changed; update core/onnxrt/ortapi.go", t.Name())
		}
	}
	adv := reflect.TypeFor[ort.DynamicAdvancedSession]().Field(0).Type.Elem()
	if adv.Kind() != reflect.Struct || adv.NumField() == 0 || adv.Field(0).Type.Kind() != reflect.Pointer {
		return fmt.Errorf("onnxruntime_go %s layout changed; update core/onnxrt/ortapi.go", adv.Name())
	}
	return nil
}

// handle returns the C handle inside an onnxruntime_go options struct.
func handle[T ort.SessionOptions | ort.RunOptions](v *T) (unsafe.Pointer, error) {
	if layoutErr != nil {
		return nil, layoutErr
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(v))
	if p == nil {
		return nil, fmt.Errorf("%s already destroyed", reflect.TypeFor[T]().Name())
	}
	return p, nil
}

// valueHandle returns the OrtValue of a value.
func valueHandle(v ort.Value) (unsafe.Pointer, error) {
	if layoutErr != nil {
		return nil, layoutErr
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(v.GetInternals())), nil
}

// sessionHandle returns the OrtSession of a DynamicAdvancedSession.
func sessionHandle(s *ort.DynamicAdvancedSession) (unsafe.Pointer, error) {
	if layoutErr != nil {
		return nil, layoutErr
	}
	adv := *(*unsafe.Pointer)(unsafe.Pointer(s))
	if adv == nil {
		return nil, errors.New("session already destroyed")
	}
	return *(*unsafe.Pointer)(adv), nil
}
