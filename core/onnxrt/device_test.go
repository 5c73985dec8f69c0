package onnxrt

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
	ob "github.com/inferd/inferd/internal/onnxbuild"
)

// hostDevice is core.DeviceData over host memory outside Go's heap
// (DeviceID -1): the stand-in that runs the by-address input path on a
// machine without a GPU; on a GPU the same path gets "Cuda" memory.
type hostDevice struct{ mem []byte }

func (h hostDevice) DeviceID() int64 { return -1 }
func (h hostDevice) Addr() uintptr   { return uintptr(unsafe.Pointer(unsafe.SliceData(h.mem))) }
func (h hostDevice) Size() int       { return len(h.mem) }
func (h hostDevice) CopyOut(dst []byte) error {
	copy(dst, h.mem)
	return nil
}

func mapped(t *testing.T, data []byte) hostDevice {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	copy(mem, data)
	return hostDevice{mem}
}

// idN is the element count of identities' fixed-size model.
const idN = 1 << 15

// identities loads FP32 identities of idN elements, of any length, and of 4
// (whose output the instance caches), and makes 4·idN bytes of test data.
func identities(t *testing.T, mul int) (fixed, dynamic, small core.BatchInstance, data []byte) {
	t.Helper()
	fixed = load(t, version(t, "fixed", ob.Must(ob.Identity(ob.Float, idN))), config(t, ioConfig(0, ob.Float, "[ 32768 ]", []string{"INPUT0"}, []string{"OUTPUT0"})))
	dynamic = load(t, version(t, "dynamic", ob.Must(ob.Identity(ob.Float, -1))), config(t, ioConfig(0, ob.Float, "[ -1 ]", []string{"INPUT0"}, []string{"OUTPUT0"})))
	small = load(t, version(t, "small", ob.Must(ob.Identity(ob.Float, 4))), config(t, ioConfig(0, ob.Float, "[ 4 ]", []string{"INPUT0"}, []string{"OUTPUT0"})))
	data = make([]byte, 4*idN)
	for i := range data {
		data[i] = byte(i*mul + 1)
	}
	return fixed, dynamic, small, data
}

// TestExecuteDeviceInput: an input held by address (core.Tensor.Device)
// is read where it is, on the direct run (every output allocated before
// the run) and the raw run (an output ORT allocates), small and large,
// and gives what the same bytes in Data give. A CPU instance reads host
// memory (-1) only; a shape past the memory is refused.
func TestExecuteDeviceInput(t *testing.T) {
	fixed, dynamic, small, data := identities(t, 7)
	for _, tc := range []struct {
		name string
		inst core.BatchInstance
		size int
	}{
		{"direct, large", fixed, 4 * idN},
		{"raw, large", dynamic, 4 * idN},
		{"raw, small", dynamic, 64},
		{"direct, small (cached output)", small, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.inst.(core.DeviceReader).ReadsDevice(-1) || tc.inst.(core.DeviceReader).ReadsDevice(0) {
				t.Fatal("a CPU instance reads host memory only")
			}
			in := &core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{int64(tc.size / 4)}, Device: mapped(t, data[:tc.size])}
			res := execute(t, tc.inst, []string{"OUTPUT0"}, in)
			if !bytes.Equal(res[0].Data, data[:tc.size]) {
				t.Fatalf("result of %d bytes differs from the input read by address", len(res[0].Data))
			}
		})
	}
	t.Run("shape past the memory", func(t *testing.T) {
		in := &core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{32}, Device: mapped(t, data[:64])}
		err := dynamic.Execute(t.Context(), &core.ConcatBatch{Inputs: []*core.Tensor{in}, Outputs: []string{"OUTPUT0"}})
		if core.CodeOf(err) != core.CodeInvalidArg {
			t.Fatalf("err = %v, want invalid argument", err)
		}
	})
}

// TestExecuteDeviceOutput: an output with a device destination
// (core.ConcatBatch.IntoDevice) that the instance can write is written there by
// ORT and returned with Device set and no Data, on the direct and the raw
// run (another output left to ORT) alike; one whose shape is known only
// after the run, or that does not fit, comes back in host memory.
func TestExecuteDeviceOutput(t *testing.T) {
	fixed, dynamic, small, data := identities(t, 5)
	for _, tc := range []struct {
		name     string
		inst     core.BatchInstance
		size     int
		dst      int
		inDevice bool // the input is read by address too
		written  bool
	}{
		{"known shape", fixed, 4 * idN, 4 * idN, false, true},
		{"known shape, input by address too", fixed, 4 * idN, 4*idN + 64, true, true},
		{"small (cached when in host memory)", small, 16, 16, false, true},
		{"known shape, too small", fixed, 4 * idN, 4*idN - 4, false, false},
		{"shape known after the run", dynamic, 4 * idN, 4 * idN, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &core.Tensor{Name: "INPUT0", DataType: core.TypeFP32, Shape: []int64{int64(tc.size / 4)}, Data: data[:tc.size:tc.size]}
			if tc.inDevice {
				in = &core.Tensor{Name: in.Name, DataType: in.DataType, Shape: in.Shape, Device: mapped(t, data[:tc.size])}
			}
			dst := mapped(t, make([]byte, tc.dst))
			b := &core.ConcatBatch{Inputs: []*core.Tensor{in}, Outputs: []string{"OUTPUT0"}, IntoDevice: []core.DeviceData{dst}}
			if err := tc.inst.Execute(t.Context(), b); err != nil {
				t.Fatal(err)
			}
			got := b.Results[0]
			if !equalShape(got.Shape, []int64{int64(tc.size / 4)}) {
				t.Fatalf("shape %v", got.Shape)
			}
			if tc.written {
				if got.Device == nil || got.Device.Addr() != dst.Addr() || got.Data != nil {
					t.Fatalf("result not in the device destination: Device %v, %d bytes of Data", got.Device, len(got.Data))
				}
				if !bytes.Equal(dst.mem[:tc.size], data[:tc.size]) {
					t.Fatal("the device destination does not hold the output")
				}
				return
			}
			if got.Device != nil || !bytes.Equal(got.Data, data[:tc.size]) {
				t.Fatalf("result: Device %v, %d bytes of Data; want the output in host memory", got.Device, len(got.Data))
			}
			if !bytes.Equal(dst.mem, make([]byte, tc.dst)) {
				t.Fatal("a destination not used was written")
			}
		})
	}
}
