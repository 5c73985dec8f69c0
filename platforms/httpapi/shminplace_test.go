package httpapi

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/inferd/inferd/internal/shmtest"
)

// TestSharedMemoryInPlace: 128 KiB through regions on HTTP, input and
// output, where ONNX Runtime reads the input in place and writes the
// output in place (identity_fixed) or copies it there from its own
// allocation (identity): the output region holds the input at the offset
// asked; a region too small gets Triton's error; regions truncated under
// the run fail that request only.
func TestSharedMemoryInPlace(t *testing.T) {
	base, regions, _ := shmServer(t)
	const elems = 32768
	data := make([]byte, 4*elems)
	for i := range data {
		data[i] = byte(i * 11)
	}
	size := len(data)
	shmtest.Region(t, regions, "in", data)
	body := func(in, out string, offset, outSize int) string {
		return `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[` + strconv.Itoa(elems) + `],"parameters":` + shmParams(in, 0, size) + `}],` +
			`"outputs":[{"name":"OUTPUT0","parameters":` + shmParams(out, offset, outSize) + `}]}`
	}
	for _, model := range []string{"identity", "identity_fixed"} {
		t.Run(model, func(t *testing.T) {
			url := base + "/v2/models/" + model + "/infer"
			outKey := shmtest.Region(t, regions, "out", make([]byte, size+64))
			defer shmtest.Unregister(t, regions, "out")
			status, _, got := post(t, url, body("in", "out", 64, size))
			want := `{"model_name":"` + model + `","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP32","shape":[` + strconv.Itoa(elems) + `]}]}`
			if status != 200 || string(got) != want {
				t.Fatalf("got %d %s, want %s", status, got, want)
			}
			if obj := shmtest.Read(t, outKey); !bytes.Equal(obj[64:], data) || !bytes.Equal(obj[:64], make([]byte, 64)) {
				t.Fatal("region out does not hold OUTPUT0 at offset 64")
			}

			shmtest.Region(t, regions, "small", make([]byte, size))
			defer shmtest.Unregister(t, regions, "small")
			status, _, got = post(t, url, body("in", "small", 4, size-4))
			want = `{"error":"shared memory size specified with the request for output 'OUTPUT0' (` + strconv.Itoa(size-4) +
				` bytes) should be at least ` + strconv.Itoa(size) + ` bytes to hold the results"}`
			if status != 500 || string(got) != want {
				t.Fatalf("too small: got %d %s, want 500 %s", status, got, want)
			}

			for _, side := range []string{"input", "output"} {
				key := shmtest.Region(t, regions, "cut", data)
				must(t, os.Truncate(shmtest.Path(key), 4096))
				b := body("cut", "out", 0, size)
				if side == "output" {
					b = body("in", "cut", 0, size)
				}
				status, _, got = post(t, url, b)
				want = `{"error":"shared memory region 'cut' is no longer backed by its object: it was truncated"}`
				if status != 500 || string(got) != want {
					t.Fatalf("%s truncated: got %d %s, want 500 %s", side, status, got, want)
				}
				shmtest.Unregister(t, regions, "cut")
			}
			if status, _, got := post(t, url, body("in", "out", 0, size)); status != 200 || !bytes.Equal(shmtest.Read(t, outKey)[:size], data) {
				t.Fatalf("after the truncations: %d %s", status, got)
			}
		})
	}
}
