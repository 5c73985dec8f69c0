package cudaipc_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/shm/cudaipc"
)

// clientEnv makes the test binary the client process of a region: CUDA
// refuses to open an IPC handle in the process that exported it, so the
// test exports from a child, as a tritonclient process would.
const clientEnv = "INFERD_CUDAIPC_CLIENT"

func TestMain(m *testing.M) {
	if size := os.Getenv(clientEnv); size != "" {
		os.Exit(client(size))
	}
	os.Exit(m.Run())
}

// pattern is what the client writes: byte j is j*7+1.
func pattern(n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(j*7 + 1)
	}
	return b
}

// client allocates size bytes holding pattern, prints the handle in hex,
// then for each line "check OFFSET HEX" on stdin answers "ok" when the
// device holds HEX at OFFSET, and frees the memory at EOF.
func client(sizeText string) int {
	size, err := strconv.Atoi(sizeText)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	rt, err := cudaipc.Load(slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	a, err := rt.Alloc(0, uint64(size))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer a.Free()
	if err := a.CopyIn(0, pattern(size)); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("handle", hex.EncodeToString(a.Handle()))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var off uint64
		var want string
		if _, err := fmt.Sscanf(in.Text(), "check %d %s", &off, &want); err != nil {
			fmt.Println("error", err)
			continue
		}
		w, _ := hex.DecodeString(want)
		got := make([]byte, len(w))
		if err := a.CopyOut(got, off); err != nil {
			fmt.Println("error", err)
			continue
		}
		if bytes.Equal(got, w) {
			fmt.Println("ok")
		} else {
			fmt.Println("differs", hex.EncodeToString(got))
		}
	}
	return 0
}

// gpu loads the runtime or skips: the same Manager paths run on CPU with
// a host-memory stand-in in platforms/shm and the frontends' tests.
func gpu(t *testing.T) *cudaipc.Runtime {
	t.Helper()
	rt, err := cudaipc.Load(slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		if !errors.Is(err, cudaipc.ErrUnavailable) {
			t.Fatalf("Load: %v, not ErrUnavailable", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return rt
}

// clientProc is a running client process holding size bytes.
type clientProc struct {
	handle []byte
	stdin  io.WriteCloser
	out    *bufio.Scanner
	cmd    *exec.Cmd
}

func startClient(t *testing.T, size int) *clientProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), clientEnv+"="+strconv.Itoa(size))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &clientProc{stdin: stdin, out: bufio.NewScanner(stdout), cmd: cmd}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("client process: %v", err)
		}
	})
	line := c.line(t)
	h, ok := strings.CutPrefix(line, "handle ")
	if !ok {
		t.Fatalf("client: %q", line)
	}
	if c.handle, err = hex.DecodeString(h); err != nil || len(c.handle) != cudaipc.HandleSize {
		t.Fatalf("client handle %q: %v", h, err)
	}
	return c
}

func (c *clientProc) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("client process ended: %v", c.out.Err())
	}
	return c.out.Text()
}

// holds asks the client whether its device memory holds want at off.
func (c *clientProc) holds(t *testing.T, off uint64, want []byte) {
	t.Helper()
	fmt.Fprintf(c.stdin, "check %d %s\n", off, hex.EncodeToString(want))
	if got := c.line(t); got != "ok" {
		t.Fatalf("client at %d: %s", off, got)
	}
}

func TestCUDARegionOpenCopyClose(t *testing.T) {
	rt := gpu(t)
	const size = 1 << 20
	c := startClient(t, size)

	mem, err := rt.Open("r", c.handle, 0, size)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if mem.Ptr() == 0 {
		t.Error("Ptr is 0")
	}
	got := make([]byte, size)
	if err := mem.CopyOut(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pattern(size)) {
		t.Fatal("CopyOut: the client's bytes differ")
	}
	part := make([]byte, 100)
	if err := mem.CopyOut(part, 4096); err != nil || !bytes.Equal(part, pattern(size)[4096:4196]) {
		t.Fatalf("CopyOut at an offset: %v", err)
	}
	out := []byte("written by the server into the client's device memory")
	if err := mem.CopyIn(size-uint64(len(out)), out); err != nil {
		t.Fatal(err)
	}
	c.holds(t, size-uint64(len(out)), out)
	if err := mem.CopyIn(size-1, []byte{1, 2}); err == nil {
		t.Error("CopyIn past the region's end: no error")
	}
	if err := mem.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := mem.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCUDARegionRefusals: Triton's texts for a handle that does not open,
// a device that does not exist and a size past the allocation.
func TestCUDARegionRefusals(t *testing.T) {
	rt := gpu(t)
	const size = 1 << 16
	c := startClient(t, size)
	for _, tc := range []struct {
		name   string
		handle []byte
		device int64
		size   uint64
		want   string
	}{
		{"garbage handle", bytes.Repeat([]byte{0xAB}, cudaipc.HandleSize), 0, 16, "failed to register shared memory region: invalid args"},
		{"short handle", c.handle[:10], 0, 16, "failed to register shared memory region: invalid args"},
		{"no such device", c.handle, int64(rt.Devices()), 16, "failed to register shared memory region: invalid args"},
		{"past the allocation", c.handle, 0, size + 1, "failed to register shared memory region 'r': invalid args"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The refusal leaves no CUDA error on the thread, where ONNX
			// Runtime's CUDA provider would later read it as its own.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			mem, err := rt.Open("r", tc.handle, tc.device, tc.size)
			if e := cudaipc.LastError(); e != 0 {
				t.Errorf("the thread's last CUDA error is %d after the refusal", e)
			}
			if err == nil {
				mem.Close()
				t.Fatal("opened")
			}
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeInvalidArg || ce.Msg != tc.want {
				t.Fatalf("err = %v, want %q (invalid argument)", err, tc.want)
			}
		})
	}
	// The handle still opens after the refusals, through a Manager as the
	// server uses it, and its span reads the client's bytes.
	m := shm.NewManager(rt)
	if err := m.RegisterCUDA("r", c.handle, 0, size); err != nil {
		t.Fatal(err)
	}
	span, err := m.Acquire("r", 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	b, err := span.Bytes()
	span.Release()
	if err != nil || !bytes.Equal(b, pattern(size)[8:16]) {
		t.Fatalf("span bytes %v, %v", b, err)
	}
	if err := m.Unregister(t.Context(), shm.CUDA, "r"); err != nil {
		t.Fatal(err)
	}
}

// TestLoadWithoutGPU: a host without the runtime or a device answers
// ErrUnavailable with the reason, never a crash (CI's case).
func TestLoadWithoutGPU(t *testing.T) {
	rt, err := cudaipc.Load(slog.New(slog.DiscardHandler))
	if err == nil {
		if rt.Devices() < 1 {
			t.Fatalf("Load succeeded with %d devices", rt.Devices())
		}
		return
	}
	if !errors.Is(err, cudaipc.ErrUnavailable) || !strings.Contains(err.Error(), ": ") {
		t.Fatalf("Load: %v", err)
	}
}
