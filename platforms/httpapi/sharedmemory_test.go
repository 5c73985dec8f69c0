package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/shm"
)

// shmCase is one request to a shared-memory route and the exact answer.
type shmCase struct {
	name, method, path, body string
	header                   http.Header
	status                   int
	want                     string // the exact body
}

func runShm(t *testing.T, base string, cases []shmCase) {
	t.Helper()
	for _, tc := range cases {
		method := tc.method
		if method == "" {
			method = http.MethodPost
		}
		code, hdr, body := do(t, method, base+tc.path, tc.header, strings.NewReader(tc.body))
		if code != tc.status || string(body) != tc.want {
			t.Errorf("%s: %s %s: %d %s, want %d %s", tc.name, method, tc.path, code, body, tc.status, tc.want)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
	}
}

func errBody(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b)
}

const shmDisabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."

// TestSharedMemoryDisabled: without a region table (--allow-client-shm=false,
// Triton's default since 2.69) status answers from an empty table, as
// Triton's does, and register/unregister answer 501 with Triton's text;
// the method and restriction checks come first.
func TestSharedMemoryDisabled(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, nil), serverOpts{})
	var cases []shmCase
	for _, kind := range []string{"system", "cuda"} {
		p := "/v2/" + kind + "sharedmemory"
		cases = append(cases,
			shmCase{name: kind + " status", method: "GET", path: p + "/status", status: 200, want: "[]"},
			shmCase{name: kind + " status one", method: "GET", path: p + "/region/r/status", status: 404,
				want: errBody("Unable to find " + kind + " shared memory region: 'r'")},
			shmCase{name: kind + " register", path: p + "/region/r/register", body: `{"key":"/k","byte_size":64}`, status: 501, want: errBody(shmDisabled)},
			shmCase{name: kind + " register unnamed", path: p + "/register", status: 501, want: errBody(shmDisabled)},
			shmCase{name: kind + " unregister", path: p + "/region/r/unregister", status: 501, want: errBody(shmDisabled)},
			shmCase{name: kind + " unregister all", path: p + "/unregister", status: 501, want: errBody(shmDisabled)},
			shmCase{name: kind + " POST status", path: p + "/status", status: 405, want: errBody("Method Not Allowed")},
			shmCase{name: kind + " GET register", method: "GET", path: p + "/region/r/register", status: 405, want: errBody("Method Not Allowed")},
			shmCase{name: kind + " PUT unregister", method: "PUT", path: p + "/unregister", status: 405, want: errBody("Method Not Allowed")},
		)
	}
	runShm(t, base, cases)
}

// TestSharedMemorySystem: registering, status and unregistering system
// regions over a real listener, every refusal in Triton's words and
// status (HandleSystemSharedMemory in triton-inference-server/server
// src/http_server.cc; SharedMemoryManager in src/shared_memory_manager.cc).
func TestSharedMemorySystem(t *testing.T) {
	m := shm.NewManager(nil)
	base, _ := startServer(t, writeRepo(t, nil), serverOpts{api: Options{SharedMemory: m}})
	key := shmtest.Object(t, 4096)
	other := shmtest.Object(t, 256)
	p := "/v2/systemsharedmemory"
	reg := func(region string) string { return p + "/region/" + region + "/register" }
	body := func(key string, rest string) string { return `{"key":"` + key + `"` + rest + `}` }
	invalidArgs := func(r string) string {
		return errBody("failed to register shared memory region '" + r + "': invalid args")
	}
	cannotOpen := func(k string) string { return errBody("Unable to open shared memory region: '" + k + "'") }
	cases := []shmCase{
		{name: "no region", path: p + "/register", body: body(key, `,"byte_size":64`), status: 400,
			want: errBody("'region name' is necessary to register system shared memory region")},
		{name: "empty body", path: reg("r"), status: 500, want: errBody("failed to parse the request JSON buffer: The document is empty. at 0")},
		{name: "bad JSON", path: reg("r"), body: `{"key":`, status: 500, want: errBody("failed to parse the request JSON buffer: Invalid value. at 7")},
		{name: "no key", path: reg("r"), body: `{"byte_size":64}`, status: 400, want: errBody("Shared memory register request has no 'key' field")},
		{name: "not an object", path: reg("r"), body: `[1]`, status: 400, want: errBody("Shared memory register request has no 'key' field")},
		{name: "key not a string", path: reg("r"), body: `{"key":5,"byte_size":64}`, status: 500, want: errBody("attempt to access JSON non-string as string")},
		{name: "negative offset", path: reg("r"), body: body(key, `,"offset":-1,"byte_size":64`), status: 500,
			want: errBody("attempt to access JSON non-unsigned-integer as unsigned-integer")},
		{name: "no byte_size", path: reg("r"), body: body(key, ``), status: 400, want: errBody("Shared memory register request has no 'byte_size' field")},
		{name: "byte_size a string", path: reg("r"), body: body(key, `,"byte_size":"64"`), status: 500,
			want: errBody("attempt to access JSON non-unsigned-integer as unsigned-integer")},
		{name: "byte_size a float", path: reg("r"), body: body(key, `,"byte_size":64.0`), status: 500,
			want: errBody("attempt to access JSON non-unsigned-integer as unsigned-integer")},
		{name: "reserved prefix", path: reg("r"), body: body("/triton_python_backend_shm_region_x", `,"byte_size":64`), status: 400,
			want: errBody("cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_x' as the key contains the reserved prefix 'triton_python_backend_shm_region_'")},
		{name: "all slashes", path: reg("r"), body: body("///", `,"byte_size":64`), status: 400,
			want: errBody("cannot register shared memory region 'r' - invalid shm key '///'")},
		{name: "empty key", path: reg("r"), body: body("", `,"byte_size":64`), status: 400,
			want: errBody("cannot register shared memory region 'r' - invalid shm key ''")},
		{name: "path escape", path: reg("r"), body: body("../etc/passwd", `,"byte_size":64`), status: 500, want: cannotOpen("../etc/passwd")},
		{name: "deep path escape", path: reg("r"), body: body("/../../etc/passwd", `,"byte_size":64`), status: 500, want: cannotOpen("/../../etc/passwd")},
		{name: "key with a slash", path: reg("r"), body: body("a/b", `,"byte_size":64`), status: 500, want: cannotOpen("a/b")},
		{name: "dot dot", path: reg("r"), body: body("..", `,"byte_size":64`), status: 500, want: cannotOpen("..")},
		{name: "no such object", path: reg("r"), body: body("/inferd_never_created", `,"byte_size":64`), status: 500, want: cannotOpen("/inferd_never_created")},
		{name: "past the end", path: reg("r"), body: body(key, `,"offset":4000,"byte_size":97`), status: 400, want: invalidArgs("r")},
		{name: "too big", path: reg("r"), body: body(key, `,"byte_size":4097`), status: 400, want: invalidArgs("r")},
		{name: "overflow", path: reg("r"), body: body(key, `,"offset":18446744073709551615,"byte_size":2`), status: 400, want: invalidArgs("r")},
		{name: "byte_size 0", path: reg("r"), body: body(key, `,"byte_size":0`), status: 400,
			want: errBody("failed to register shared memory region 'r': unable to process address spaceinvalid argument")},
		{name: "disallowed method", method: "GET", path: reg("r"), status: 405, want: errBody("Method Not Allowed")},

		{name: "register", path: reg("r"), body: body(key, `,"offset":100,"byte_size":64`), status: 200},
		// The key is a C string in Triton: what follows a NUL is dropped.
		{name: "register with a NUL", path: reg("a"), body: body(other+`\u0000junk`, `,"byte_size":256`), status: 200},
		{name: "register twice", path: reg("r"), body: body(other, `,"byte_size":64`), status: 400, want: errBody("shared memory region 'r' already in manager")},
		{name: "status", method: "GET", path: p + "/status", status: 200,
			want: `[{"name":"a","key":"` + other + `","offset":0,"byte_size":256},{"name":"r","key":"` + key + `","offset":100,"byte_size":64}]`},
		{name: "status one", method: "GET", path: p + "/region/r/status", status: 200, want: `[{"name":"r","key":"` + key + `","offset":100,"byte_size":64}]`},
		{name: "status unknown", method: "GET", path: p + "/region/x/status", status: 404, want: errBody("Unable to find system shared memory region: 'x'")},
		{name: "cuda status of a system region", method: "GET", path: "/v2/cudasharedmemory/region/r/status", status: 404,
			want: errBody("The region named 'r' is registered as system shared memory, not CUDA shared memory")},
		{name: "cuda status", method: "GET", path: "/v2/cudasharedmemory/status", status: 200, want: "[]"},
		{name: "cuda unregister leaves system regions", path: "/v2/cudasharedmemory/unregister", status: 200},
		{name: "unregister one", path: p + "/region/r/unregister", status: 200},
		{name: "status after", method: "GET", path: p + "/status", status: 200, want: `[{"name":"a","key":"` + other + `","offset":0,"byte_size":256}]`},
		{name: "unregister unknown", path: p + "/region/r/unregister", status: 200},
		{name: "register again", path: reg("r"), body: body(key, `,"byte_size":4096`), status: 200},
		{name: "unregister all", path: p + "/unregister", status: 200},
		{name: "status empty", method: "GET", path: p + "/status", status: 200, want: "[]"},
	}
	runShm(t, base, cases)
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 0 {
		t.Fatalf("table after unregister all: %+v, %v", st, err)
	}
}

// routeTestDevice opens any 64-byte handle as host memory: the CUDA route's
// parsing runs on CPU up to the device call.
type routeTestDevice struct{}

func (routeTestDevice) Open(_ string, handle []byte, _ int64, size uint64) (shm.DeviceMemory, error) {
	if handle[0] != 'h' {
		return nil, routeTestError("invalid device pointer")
	}
	return make(shmtest.HostMemory, size), nil
}

type routeTestError string

func (e routeTestError) Error() string { return string(e) }

// TestSharedMemoryCUDA: on a machine without CUDA a CUDA register answers
// Triton's CPU-only refusal before the body is read; with a device, the
// body's fields are checked as Triton's GPU build checks them.
func TestSharedMemoryCUDA(t *testing.T) {
	p := "/v2/cudasharedmemory"
	t.Run("no device", func(t *testing.T) {
		base, _ := startServer(t, writeRepo(t, nil), serverOpts{api: Options{SharedMemory: shm.NewManager(nil)}})
		runShm(t, base, []shmCase{
			{name: "register", path: p + "/region/c/register", body: `not even JSON`, status: 400,
				want: errBody("failed to register CUDA shared memory region: 'c', GPUs not supported")},
			{name: "no region", path: p + "/register", status: 400, want: errBody("'region name' is necessary to register cuda shared memory region")},
			{name: "unregister", path: p + "/region/c/unregister", status: 200},
			{name: "unregister all", path: p + "/unregister", status: 200},
			{name: "status", method: "GET", path: p + "/status", status: 200, want: "[]"},
		})
	})
	t.Run("device", func(t *testing.T) {
		base, _ := startServer(t, writeRepo(t, nil), serverOpts{api: Options{SharedMemory: shm.NewManager(routeTestDevice{})}})
		handle := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("h", 64)))
		reg := p + "/region/c/register"
		runShm(t, base, []shmCase{
			{name: "no raw_handle", path: reg, body: `{"byte_size":64,"device_id":0}`, status: 400,
				want: errBody("Shared memory register request has no 'raw_handle' field")},
			{name: "raw_handle not an object", path: reg, body: `{"raw_handle":"x","byte_size":64,"device_id":0}`, status: 500,
				want: errBody("attempt to access non-existing object member 'b64'")},
			{name: "b64 not a string", path: reg, body: `{"raw_handle":{"b64":1},"byte_size":64,"device_id":0}`, status: 500,
				want: errBody("attempt to access JSON non-string as string")},
			{name: "no byte_size", path: reg, body: `{"raw_handle":{"b64":"` + handle + `"},"device_id":0}`, status: 500,
				want: errBody("attempt to access non-existing object member 'byte_size'")},
			{name: "no device_id", path: reg, body: `{"raw_handle":{"b64":"` + handle + `"},"byte_size":64}`, status: 500,
				want: errBody("attempt to access non-existing object member 'device_id'")},
			{name: "short handle", path: reg, body: `{"raw_handle":{"b64":"aGg="},"byte_size":64,"device_id":0}`, status: 400,
				want: errBody("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")},
			{name: "handle the device refuses", path: reg, body: `{"raw_handle":{"b64":"` + base64.StdEncoding.EncodeToString(make([]byte, 64)) + `"},"byte_size":64,"device_id":0}`,
				status: 400, want: errBody("failed to register shared memory region 'c': invalid device pointer")},
			{name: "register", path: reg, body: `{"raw_handle":{"b64":"` + handle + `"},"byte_size":64,"device_id":3}`, status: 200},
			{name: "register twice", path: reg, body: `{"raw_handle":{"b64":"` + handle + `"},"byte_size":64,"device_id":3}`, status: 400,
				want: errBody("shared memory region 'c' already in manager")},
			{name: "status", method: "GET", path: p + "/status", status: 200, want: `[{"name":"c","device_id":3,"byte_size":64}]`},
			{name: "system status of a CUDA region", method: "GET", path: "/v2/systemsharedmemory/region/c/status", status: 404,
				want: errBody("The region named 'c' is registered as CUDA shared memory, not system shared memory")},
			{name: "unregister", path: p + "/region/c/unregister", status: 200},
			{name: "status after", method: "GET", path: p + "/status", status: 200, want: "[]"},
		})
	})
}

// TestSharedMemoryRestricted: the shared-memory category guards every
// route, before the method check, with the extension on.
func TestSharedMemoryRestricted(t *testing.T) {
	restricted := map[string]Restriction{}
	must(t, ParseRestriction(restricted, "shared-memory:X-Auth=secret"))
	m := shm.NewManager(nil)
	base, _ := startServer(t, writeRepo(t, nil), serverOpts{api: Options{SharedMemory: m, Restricted: restricted}})
	key := shmtest.Object(t, 64)
	forbidden := errBody("This API is restricted, expecting header 'X-Auth'")
	auth := http.Header{"X-Auth": {"secret"}}
	var cases []shmCase
	for _, kind := range []string{"system", "cuda"} {
		for _, region := range []string{"", "/region/r"} {
			for _, action := range []string{"status", "register", "unregister"} {
				for _, method := range []string{"GET", "POST"} {
					cases = append(cases, shmCase{name: "no header", method: method, path: "/v2/" + kind + "sharedmemory" + region + "/" + action,
						status: 403, want: forbidden})
				}
			}
		}
	}
	cases = append(cases,
		shmCase{name: "wrong header", path: "/v2/systemsharedmemory/region/r/register", body: `{"key":"` + key + `","byte_size":64}`,
			header: http.Header{"X-Auth": {"nope"}}, status: 403, want: forbidden},
		shmCase{name: "register", path: "/v2/systemsharedmemory/region/r/register", body: `{"key":"` + key + `","byte_size":64}`, header: auth, status: 200},
		shmCase{name: "status", method: "GET", path: "/v2/systemsharedmemory/status", header: auth, status: 200,
			want: `[{"name":"r","key":"` + key + `","offset":0,"byte_size":64}]`},
		shmCase{name: "unregister", path: "/v2/systemsharedmemory/unregister", header: auth, status: 200},
	)
	runShm(t, base, cases)
}

// TestSharedMemoryRouteUnregisterWaits: unregistering a region a request still
// holds answers only once the request lets it go; the name is free for a
// new registration at once.
func TestSharedMemoryRouteUnregisterWaits(t *testing.T) {
	m := shm.NewManager(nil)
	base, _ := startServer(t, writeRepo(t, nil), serverOpts{api: Options{SharedMemory: m}})
	key := shmtest.Object(t, 4096)
	must(t, m.RegisterSystem("r", key, 0, 4096))
	span, err := m.Acquire("r", 0, 64) // an inference using the region
	must(t, err)
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(base+"/v2/systemsharedmemory/region/r/unregister", "", nil)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("unregister answered %d while the region was in use", code)
	case <-time.After(200 * time.Millisecond):
	}
	runShm(t, base, []shmCase{
		{name: "status while pending", method: "GET", path: "/v2/systemsharedmemory/status", status: 200, want: "[]"},
		{name: "register the name again", path: "/v2/systemsharedmemory/region/r/register", body: `{"key":"` + key + `","byte_size":64}`, status: 200},
	})
	b, err := span.Bytes() // the old mapping is still there
	if err != nil || b[63] != 63 {
		t.Fatalf("span after unregister: %v %v", b, err)
	}
	span.Release()
	if code := <-done; code != 200 {
		t.Fatalf("unregister: %d", code)
	}
}
