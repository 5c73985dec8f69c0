package grpcapi

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/shm"
)

// TestSharedMemoryRPCs: the six RPCs on a region table over a real
// listener, every refusal with Triton's code and text
// (triton-inference-server/server src/grpc/grpc_server.cc,
// src/shared_memory_manager.cc).
func TestSharedMemoryRPCs(t *testing.T) {
	m := shm.NewManager(nil)
	h := start(t, servertest.Options{}, Options{SharedMemory: m})
	c := ctx(t)
	key := shmtest.Object(t, 4096)
	other := shmtest.Object(t, 256)
	reg := func(name, key string, offset, size uint64) error {
		_, err := h.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: name, Key: key, Offset: offset, ByteSize: size})
		return err
	}
	cannotOpen := func(k string) string { return "Unable to open shared memory region: '" + k + "'" }
	for _, tc := range []struct {
		name, key    string
		offset, size uint64
		code         codes.Code
		msg          string
	}{
		{"reserved prefix", "/triton_python_backend_shm_region_x", 0, 64, codes.InvalidArgument,
			"cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_x' as the key contains the reserved prefix 'triton_python_backend_shm_region_'"},
		{"all slashes", "//", 0, 64, codes.InvalidArgument, "cannot register shared memory region 'r' - invalid shm key '//'"},
		{"path escape", "../etc/passwd", 0, 64, codes.Internal, cannotOpen("../etc/passwd")},
		{"slash", "a/b", 0, 64, codes.Internal, cannotOpen("a/b")},
		{"no such object", "/inferd_never_created", 0, 64, codes.Internal, cannotOpen("/inferd_never_created")},
		{"past the end", key, 4000, 97, codes.InvalidArgument, "failed to register shared memory region 'r': invalid args"},
		{"overflow", key, ^uint64(0), 2, codes.InvalidArgument, "failed to register shared memory region 'r': invalid args"},
		{"byte_size 0", key, 0, 0, codes.InvalidArgument, "failed to register shared memory region 'r': unable to process address spaceinvalid argument"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantStatus(t, reg("r", tc.key, tc.offset, tc.size), tc.code, tc.msg) })
	}

	servertest.Must(t, reg("r", key, 100, 64))
	servertest.Must(t, reg("a", other, 0, 256))
	wantStatus(t, reg("r", other, 0, 8), codes.AlreadyExists, "shared memory region 'r' already in manager")

	st, err := h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{})
	servertest.Must(t, err)
	got := st.GetRegions()
	if len(got) != 2 || got["r"].GetKey() != key || got["r"].GetOffset() != 100 || got["r"].GetByteSize() != 64 || got["r"].GetName() != "r" ||
		got["a"].GetKey() != other || got["a"].GetByteSize() != 256 {
		t.Fatalf("status %v", got)
	}
	one, err := h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{Name: "a"})
	servertest.Must(t, err)
	if len(one.GetRegions()) != 1 || one.GetRegions()["a"].GetKey() != other {
		t.Fatalf("status a %v", one.GetRegions())
	}
	_, err = h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{Name: "x"})
	wantStatus(t, err, codes.NotFound, "Unable to find system shared memory region: 'x'")
	_, err = h.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{Name: "r"})
	wantStatus(t, err, codes.NotFound, "The region named 'r' is registered as system shared memory, not CUDA shared memory")
	_, err = h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "g", RawHandle: make([]byte, 64), ByteSize: 64})
	wantStatus(t, err, codes.InvalidArgument, "failed to register CUDA shared memory region: 'g', GPUs not supported")
	_, err = h.client.CudaSharedMemoryUnregister(c, &pb.CudaSharedMemoryUnregisterRequest{})
	servertest.Must(t, err)

	_, err = h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{Name: "r"})
	servertest.Must(t, err)
	_, err = h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{Name: "r"}) // not registered: no error
	servertest.Must(t, err)
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 1 || st[0].Name != "a" {
		t.Fatalf("after unregister r: %+v, %v", st, err)
	}
	_, err = h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{})
	servertest.Must(t, err)
	st, err = h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{})
	if err != nil || len(st.GetRegions()) != 0 {
		t.Fatalf("after unregister all: %v, %v", st, err)
	}
}

// TestSharedMemoryRPCsDisabled: without a region table status answers an
// empty table and register/unregister are UNIMPLEMENTED with Triton's
// text; a CUDA register gets the CPU-only refusal first, and on a host
// with GPUs the switch's text.
func TestSharedMemoryRPCsDisabled(t *testing.T) {
	h := start(t, servertest.Options{}, Options{})
	c := ctx(t)
	const disabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
	_, err := h.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "r", Key: shmtest.Object(t, 64), ByteSize: 64})
	wantStatus(t, err, codes.Unimplemented, disabled)
	_, err = h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{})
	wantStatus(t, err, codes.Unimplemented, disabled)
	_, err = h.client.CudaSharedMemoryUnregister(c, &pb.CudaSharedMemoryUnregisterRequest{Name: "r"})
	wantStatus(t, err, codes.Unimplemented, disabled)
	_, err = h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "r"})
	wantStatus(t, err, codes.InvalidArgument, "failed to register CUDA shared memory region: 'r', GPUs not supported")
	cst, err := h.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{})
	if err != nil || len(cst.GetRegions()) != 0 {
		t.Fatal(cst, err)
	}
	_, err = h.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{Name: "r"})
	wantStatus(t, err, codes.NotFound, "Unable to find cuda shared memory region: 'r'")

	// On a host with GPUs (Triton's GPU build) the switch answers first.
	g := start(t, servertest.Options{GPUs: []int32{0}}, Options{})
	_, err = g.client.CudaSharedMemoryRegister(ctx(t), &pb.CudaSharedMemoryRegisterRequest{Name: "r"})
	wantStatus(t, err, codes.Unimplemented, disabled)
}

// routeTestDevice opens any handle as host memory, so the CUDA RPCs run on CPU
// up to the device call.
type routeTestDevice struct{}

func (routeTestDevice) Open(_ string, _ []byte, _ int64, size uint64) (shm.DeviceMemory, error) {
	return make(shmtest.HostMemory, size), nil
}

// TestSharedMemoryCUDARPCs: with a device, CUDA regions register, list
// keyed by name with their device, and unregister.
func TestSharedMemoryCUDARPCs(t *testing.T) {
	h := start(t, servertest.Options{}, Options{SharedMemory: shm.NewManager(routeTestDevice{})})
	c := ctx(t)
	_, err := h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "g", RawHandle: make([]byte, 10), DeviceId: 1, ByteSize: 64})
	wantStatus(t, err, codes.InvalidArgument, "'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t")
	_, err = h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "g", RawHandle: make([]byte, 64), DeviceId: 1, ByteSize: 64})
	servertest.Must(t, err)
	_, err = h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "g", RawHandle: make([]byte, 64), DeviceId: 1, ByteSize: 64})
	wantStatus(t, err, codes.AlreadyExists, "shared memory region 'g' already in manager")
	st, err := h.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{})
	servertest.Must(t, err)
	if r := st.GetRegions()["g"]; len(st.GetRegions()) != 1 || r.GetName() != "g" || r.GetDeviceId() != 1 || r.GetByteSize() != 64 {
		t.Fatalf("status %v", st.GetRegions())
	}
	_, err = h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{Name: "g"})
	wantStatus(t, err, codes.NotFound, "The region named 'g' is registered as CUDA shared memory, not system shared memory")
	_, err = h.client.CudaSharedMemoryUnregister(c, &pb.CudaSharedMemoryUnregisterRequest{Name: "g"})
	servertest.Must(t, err)
	st, err = h.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{})
	if err != nil || len(st.GetRegions()) != 0 {
		t.Fatal(st, err)
	}
}

// TestSharedMemoryRPCsRestricted: the shared-memory category guards all
// six RPCs with the extension on.
func TestSharedMemoryRPCsRestricted(t *testing.T) {
	h := start(t, servertest.Options{}, Options{SharedMemory: shm.NewManager(nil), Restricted: map[string]Restriction{"shared-memory": {Key: "shm-key", Value: "v"}}})
	key := shmtest.Object(t, 64)
	const refused = "This protocol is restricted, expecting header 'triton-grpc-protocol-shm-key'"
	calls := map[string]func(context.Context) error{
		"SystemSharedMemoryStatus": func(c context.Context) error {
			_, err := h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{})
			return err
		},
		"SystemSharedMemoryRegister": func(c context.Context) error {
			_, err := h.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "r", Key: key, ByteSize: 64})
			return err
		},
		"SystemSharedMemoryUnregister": func(c context.Context) error {
			_, err := h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{Name: "r"})
			return err
		},
		"CudaSharedMemoryStatus": func(c context.Context) error {
			_, err := h.client.CudaSharedMemoryStatus(c, &pb.CudaSharedMemoryStatusRequest{})
			return err
		},
		"CudaSharedMemoryRegister": func(c context.Context) error {
			_, err := h.client.CudaSharedMemoryRegister(c, &pb.CudaSharedMemoryRegisterRequest{Name: "g"})
			return err
		},
		"CudaSharedMemoryUnregister": func(c context.Context) error {
			_, err := h.client.CudaSharedMemoryUnregister(c, &pb.CudaSharedMemoryUnregisterRequest{})
			return err
		},
	}
	for name, call := range calls {
		wantStatus(t, call(ctx(t)), codes.Unavailable, refused)
		err := call(metadata.AppendToOutgoingContext(ctx(t), "triton-grpc-protocol-shm-key", "v"))
		if name == "CudaSharedMemoryRegister" {
			wantStatus(t, err, codes.InvalidArgument, "failed to register CUDA shared memory region: 'g', GPUs not supported")
		} else if err != nil {
			t.Errorf("%s with the header: %v", name, err)
		}
	}
}

// TestSharedMemoryConcurrent: goroutines register and unregister regions
// over HTTP and gRPC at once, on the one table both frontends share,
// while others poll status on both; every call succeeds, every status is
// a consistent snapshot, and the table ends empty.
func TestSharedMemoryConcurrent(t *testing.T) {
	m := shm.NewManager(nil)
	h := start(t, servertest.Options{}, Options{SharedMemory: m})
	api := httpapi.New(h.core, httpapi.Options{SharedMemory: m, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(t, err)
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	base := "http://" + ln.Addr().String()
	key := shmtest.Object(t, 1<<16)

	httpCall := func(method, path, body string) (int, string, error) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	const workers, rounds = 8, 25
	c := ctx(t)
	stop := make(chan struct{})
	errs := make(chan error, 4*workers)
	var pollers, writers sync.WaitGroup
	for range 2 {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{}); err != nil {
					errs <- fmt.Errorf("gRPC status: %w", err)
					return
				}
				if code, body, err := httpCall("GET", "/v2/systemsharedmemory/status", ""); err != nil || code != 200 || !strings.HasPrefix(body, "[") {
					errs <- fmt.Errorf("HTTP status: %d %s %v", code, body, err)
					return
				}
			}
		}()
	}
	for w := range workers {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range rounds {
				name := fmt.Sprintf("w%d_%d", w, i)
				offset := uint64(w*rounds+i) * 64
				// Alternate the protocols: register on one, unregister on the other.
				if (w+i)%2 == 0 {
					body := fmt.Sprintf(`{"key":%q,"offset":%d,"byte_size":64}`, key, offset)
					if code, resp, err := httpCall("POST", "/v2/systemsharedmemory/region/"+name+"/register", body); err != nil || code != 200 {
						errs <- fmt.Errorf("HTTP register %s: %d %s %v", name, code, resp, err)
						return
					}
					if _, err := h.client.SystemSharedMemoryStatus(c, &pb.SystemSharedMemoryStatusRequest{Name: name}); err != nil {
						errs <- fmt.Errorf("gRPC status %s after HTTP register: %w", name, err)
						return
					}
					if _, err := h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{Name: name}); err != nil {
						errs <- fmt.Errorf("gRPC unregister %s: %w", name, err)
						return
					}
				} else {
					if _, err := h.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: name, Key: key, Offset: offset, ByteSize: 64}); err != nil {
						errs <- fmt.Errorf("gRPC register %s: %w", name, err)
						return
					}
					if code, resp, err := httpCall("GET", "/v2/systemsharedmemory/region/"+name+"/status", ""); err != nil || code != 200 {
						errs <- fmt.Errorf("HTTP status %s after gRPC register: %d %s %v", name, code, resp, err)
						return
					}
					if code, resp, err := httpCall("POST", "/v2/systemsharedmemory/region/"+name+"/unregister", ""); err != nil || code != 200 {
						errs <- fmt.Errorf("HTTP unregister %s: %d %s %v", name, code, resp, err)
						return
					}
				}
			}
		}()
	}
	// One name registered at once from both protocols: exactly one wins,
	// the others are ALREADY_EXISTS (400 over HTTP).
	var won sync.WaitGroup
	wins := make(chan string, 2*workers)
	for w := range 2 * workers {
		won.Add(1)
		go func() {
			defer won.Done()
			if w%2 == 0 {
				code, resp, err := httpCall("POST", "/v2/systemsharedmemory/region/same/register", fmt.Sprintf(`{"key":%q,"byte_size":64}`, key))
				switch {
				case err == nil && code == 200:
					wins <- "HTTP"
				case err != nil || code != 400 || resp != `{"error":"shared memory region 'same' already in manager"}`:
					errs <- fmt.Errorf("HTTP register same: %d %s %v", code, resp, err)
				}
				return
			}
			_, err := h.client.SystemSharedMemoryRegister(c, &pb.SystemSharedMemoryRegisterRequest{Name: "same", Key: key, ByteSize: 64})
			if err == nil {
				wins <- "gRPC"
			} else if s, _ := status.FromError(err); s.Code() != codes.AlreadyExists {
				errs <- fmt.Errorf("gRPC register same: %w", err)
			}
		}()
	}
	won.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Errorf("%d registrations of one name won", n)
	}
	if _, err := h.client.SystemSharedMemoryUnregister(c, &pb.SystemSharedMemoryUnregisterRequest{Name: "same"}); err != nil {
		t.Error(err)
	}

	writers.Wait()
	close(stop)
	pollers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 0 {
		t.Fatalf("table not empty: %+v, %v", st, err)
	}
}
