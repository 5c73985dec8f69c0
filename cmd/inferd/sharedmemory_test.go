package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/inferd/inferd/internal/shmtest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestAllowClientShm: --allow-client-shm=true gives both frontends one
// region table (a region registered over HTTP is seen and unregistered over
// gRPC); the default, false as in Triton since 2.69, refuses registering
// on both.
func TestAllowClientShm(t *testing.T) {
	key := shmtest.Object(t, 1024)
	register := `{"key":"` + key + `","offset":0,"byte_size":1024}`
	const disabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("on", func(t *testing.T) {
		r := start(t, "--model-repository=../../examples/model_repository", "--grpc-address=127.0.0.1", "--allow-client-shm=true")
		if code, body := post(t, r.http+"/v2/systemsharedmemory/region/input/register", register); code != 200 {
			t.Fatalf("HTTP register: %d %s", code, body)
		}
		c := grpcClient(t, r)
		st, err := c.SystemSharedMemoryStatus(ctx, &pb.SystemSharedMemoryStatusRequest{})
		if err != nil || st.GetRegions()["input"].GetKey() != key || st.GetRegions()["input"].GetByteSize() != 1024 {
			t.Fatalf("gRPC status: %v, %v", st, err)
		}
		if _, err := c.SystemSharedMemoryUnregister(ctx, &pb.SystemSharedMemoryUnregisterRequest{Name: "input"}); err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, r.http+"/v2/systemsharedmemory/status"); code != 200 || body != "[]" {
			t.Fatalf("HTTP status after gRPC unregister: %d %s", code, body)
		}
	})
	t.Run("default off", func(t *testing.T) {
		r := start(t, "--model-repository=../../examples/model_repository", "--grpc-address=127.0.0.1")
		if code, body := post(t, r.http+"/v2/systemsharedmemory/region/input/register", register); code != 501 || body != `{"error":"`+disabled+`"}` {
			t.Fatalf("HTTP register: %d %s", code, body)
		}
		_, err := grpcClient(t, r).SystemSharedMemoryRegister(ctx, &pb.SystemSharedMemoryRegisterRequest{Name: "input", Key: key, ByteSize: 1024})
		if s, _ := status.FromError(err); s.Code() != codes.Unimplemented || s.Message() != disabled {
			t.Fatalf("gRPC register: %v", err)
		}
	})
}
