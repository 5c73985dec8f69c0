package codec

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/shm"
)

// shmTable registers regions "in" (the simple model's INPUT0 at offset 8)
// and "out" (128 bytes) and returns the table and out's key.
func shmTable(t *testing.T) (*shm.Manager, string) {
	t.Helper()
	regions := shm.NewManager(nil)
	in := append(make([]byte, 8), i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)...)
	shmtest.Region(t, regions, "in", in)
	out := shmtest.Object(t, 128)
	if err := regions.RegisterSystem("out", out, 0, 128); err != nil {
		t.Fatal(err)
	}
	return regions, out
}

// TestSharedMemoryCodec: an input in a region is copied out at decode (the
// region is not held after), an output in one is held until released and
// rendered as name, datatype and shape, its bytes in the region, while the
// other outputs keep their kinds and blobs.
func TestSharedMemoryCodec(t *testing.T) {
	regions, outKey := shmTable(t)
	body := `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"in","shared_memory_offset":8,"shared_memory_byte_size":64}},` +
		in16("INPUT1", data16) + `],"outputs":[{"name":"OUTPUT0","parameters":{"shared_memory_region":"out","shared_memory_offset":0,"shared_memory_byte_size":128}},` +
		`{"name":"OUTPUT1","parameters":{"binary_data":true}}]}`
	env, err := DecodeRequest(context.Background(), "simple", []byte(body), -1, testMax, regions)
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Request.Inputs[0].Data; !bytes.Equal(got, i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)) {
		t.Fatalf("INPUT0 % x", got)
	}
	if k := env.OutputKind("OUTPUT0"); k != OutputSharedMemory {
		t.Fatalf("OUTPUT0 is %v", k)
	}
	// The input's region is free; the output's is held.
	shmtest.Unregister(t, regions, "in")

	resp := simpleResponse("")
	header, blobs, binary, err := EncodeResponse(resp, env)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_name":"simple","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16]},` +
		`{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"parameters":{"binary_data_size":64}}]}`
	if string(header) != want || !binary || len(blobs) != 1 || !bytes.Equal(blobs[0], resp.Outputs[1].Data) {
		t.Fatalf("header %s, %d blobs", header, len(blobs))
	}
	got, err := os.ReadFile(shmtest.Path(outKey))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:64], resp.Outputs[0].Data) || got[64] != 64 || got[127] != 127 { // the rest as shmtest.Object wrote it
		t.Fatalf("region out holds % x", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- regions.Unregister(ctx, shm.System, "out") }()
	select {
	case err := <-done:
		t.Fatalf("unregister returned (%v) while the request held the region", err)
	case <-time.After(100 * time.Millisecond):
	}
	env.Holds.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSharedMemoryCodecTooSmall: an output larger than its region fails
// the whole response with Triton's text, and nothing is written into any
// region.
func TestSharedMemoryCodecTooSmall(t *testing.T) {
	regions, outKey := shmTable(t)
	body := `{"inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT1", data16) + `],"outputs":[` +
		`{"name":"OUTPUT0","parameters":{"shared_memory_region":"out","shared_memory_byte_size":64}},` +
		`{"name":"OUTPUT1","parameters":{"shared_memory_region":"out","shared_memory_offset":64,"shared_memory_byte_size":60}}]}`
	env, err := DecodeRequest(context.Background(), "simple", []byte(body), -1, testMax, regions)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Holds.Release()
	_, _, _, err = EncodeResponse(simpleResponse(""), env)
	wantError(t, err, core.CodeInternal, "shared memory size specified with the request for output 'OUTPUT1' (60 bytes) should be at least 64 bytes to hold the results")
	pattern := make([]byte, 128) // what shmtest.Object wrote
	for j := range pattern {
		pattern[j] = byte(j)
	}
	if got, _ := os.ReadFile(shmtest.Path(outKey)); !bytes.Equal(got, pattern) {
		t.Fatalf("region out was written: % x", got)
	}
}

// TestSharedMemoryCodecErrorReleases: a decode that fails after an output's
// region was taken holds nothing.
func TestSharedMemoryCodecErrorReleases(t *testing.T) {
	regions, _ := shmTable(t)
	body := `{"inputs":[` + in16("INPUT0", data16) + `,` + in16("INPUT1", data16) + `],"outputs":[` +
		`{"name":"OUTPUT0","parameters":{"shared_memory_region":"out","shared_memory_byte_size":64}},` +
		`{"name":"OUTPUT1","parameters":{"shared_memory_region":"nope","shared_memory_byte_size":64}}]}`
	_, err := DecodeRequest(context.Background(), "simple", []byte(body), -1, testMax, regions)
	wantError(t, err, core.CodeNotFound, "Unable to find shared memory region: 'nope'")
	shmtest.Unregister(t, regions, "out")
}

// TestSharedMemoryCodecInPlace: with the guard, an input in a region is
// the region's memory itself (what the client writes there, the request
// sees), held until released like the outputs' regions; a decode that
// fails holds neither.
func TestSharedMemoryCodecInPlace(t *testing.T) {
	regions := shm.NewManager(nil)
	if err := regions.InstallGuard(); err != nil {
		t.Fatal(err)
	}
	in := append(make([]byte, 8), i32le(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)...)
	key := shmtest.Region(t, regions, "in", in)
	body := `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"in","shared_memory_offset":8,"shared_memory_byte_size":64}},` +
		in16("INPUT1", data16) + `]}`
	env, err := DecodeRequest(context.Background(), "simple", []byte(body), -1, testMax, regions)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(shmtest.Path(key), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(i32le(99), 8)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := env.Request.Inputs[0].Data; !bytes.Equal(got, i32le(99, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)) {
		t.Fatalf("INPUT0 is not the region's memory: % x", got)
	}
	if err := env.Holds.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := regions.Unregister(ctx, shm.System, "in"); err == nil {
		t.Fatal("the input's region was not held")
	}
	env.Holds.Release()
	if err := regions.RegisterSystem("in", key, 0, uint64(len(in))); err != nil {
		t.Fatal(err)
	}

	bad := `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"in","shared_memory_offset":8,"shared_memory_byte_size":64}},` +
		`{"name":"INPUT1","datatype":"INT32","shape":[1,16],"parameters":{"shared_memory_region":"nope","shared_memory_byte_size":64}}]}`
	_, err = DecodeRequest(context.Background(), "simple", []byte(bad), -1, testMax, regions)
	wantError(t, err, core.CodeNotFound, "Unable to find shared memory region: 'nope'")
	shmtest.Unregister(t, regions, "in")
}
