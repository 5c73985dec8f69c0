package protocol_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
)

func wantShmError(t *testing.T, what string, err error, code core.Code, msg string) {
	t.Helper()
	if err == nil || err.Error() != msg || core.CodeOf(err) != code {
		t.Errorf("%s: %v (%v), want %q (%v)", what, err, core.CodeOf(err), msg, code)
	}
}

// TestShmDisabled: with no region table (--allow-client-shm=false), status
// answers from an empty table and register/unregister are refused, as
// Triton's handlers do; a CUDA register is refused as the CPU-only build
// refuses it, before the switch.
func TestShmDisabled(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []shm.Kind{shm.System, shm.CUDA} {
		st, err := protocol.ShmStatus(nil, kind, "")
		if err != nil || st == nil || len(st) != 0 {
			t.Errorf("%v status: %v, %v", kind, st, err)
		}
		_, err = protocol.ShmStatus(nil, kind, "r")
		wantShmError(t, "status r", err, core.CodeNotFound, "Unable to find "+kind.String()+" shared memory region: 'r'")
		wantShmError(t, "unregister", protocol.ShmUnregister(ctx, nil, kind, ""), core.CodeUnsupported, protocol.ShmDisabled)
		wantShmError(t, "unregister r", protocol.ShmUnregister(ctx, nil, kind, "r"), core.CodeUnsupported, protocol.ShmDisabled)
	}
	wantShmError(t, "register", protocol.ShmRegisterSystem(nil, "r", "/k", 0, 64), core.CodeUnsupported,
		"Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.")
	wantShmError(t, "register cuda", protocol.ShmRegisterCUDA(nil, "r", make([]byte, 64), 0, 64), core.CodeInvalidArg,
		"failed to register CUDA shared memory region: 'r', GPUs not supported")
	if protocol.ShmCUDASupported(nil) || protocol.ShmCUDASupported(shm.NewManager(nil)) {
		t.Error("CUDA supported without a device")
	}
}

// TestShmEnabled: the calls reach the table.
func TestShmEnabled(t *testing.T) {
	ctx := context.Background()
	m := shm.NewManager(nil)
	key := shmtest.Object(t, 128)
	if err := protocol.ShmRegisterSystem(m, "r", key, 16, 64); err != nil {
		t.Fatal(err)
	}
	st, err := protocol.ShmStatus(m, shm.System, "")
	want := []shm.Status{{Name: "r", Kind: shm.System, Key: key, Offset: 16, ByteSize: 64}}
	if err != nil || !reflect.DeepEqual(st, want) {
		t.Fatalf("status %+v, %v", st, err)
	}
	wantShmError(t, "register twice", protocol.ShmRegisterSystem(m, "r", key, 0, 64), core.CodeAlreadyExists, "shared memory region 'r' already in manager")
	wantShmError(t, "cuda", protocol.ShmRegisterCUDA(m, "c", make([]byte, 64), 0, 64), core.CodeInvalidArg,
		"failed to register CUDA shared memory region: 'c', GPUs not supported")
	if err := protocol.ShmUnregister(ctx, m, shm.System, "r"); err != nil {
		t.Fatal(err)
	}
	if st, err := protocol.ShmStatus(m, shm.System, ""); err != nil || len(st) != 0 {
		t.Fatalf("after unregister: %+v, %v", st, err)
	}
}
