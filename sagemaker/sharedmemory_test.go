package sagemaker

import (
	"net/http"
	"testing"

	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/shm"
)

// TestSharedMemoryRoutes: SageMaker's server routes only /ping,
// /invocations and /models (Handle in triton-inference-server/server
// src/sagemaker_server.cc), so the shared-memory routes are 400 with no
// body there even with client shared memory on, and a region registered
// through the base API stays out of reach.
func TestSharedMemoryRoutes(t *testing.T) {
	m := shm.NewManager(nil)
	key := shmtest.Object(t, 64)
	if err := m.RegisterSystem("r", key, 0, 64); err != nil {
		t.Fatal(err)
	}
	e := start(t, setup{repo: smeRepo(t), startup: []string{"simple"}, sm: Options{DefaultModel: "simple"}, api: httpapi.Options{SharedMemory: m}})
	for _, kind := range []string{"system", "cuda"} {
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/v2/" + kind + "sharedmemory/status"},
			{http.MethodGet, "/v2/" + kind + "sharedmemory/region/r/status"},
			{http.MethodPost, "/v2/" + kind + "sharedmemory/region/s/register"},
			{http.MethodPost, "/v2/" + kind + "sharedmemory/region/r/unregister"},
			{http.MethodPost, "/v2/" + kind + "sharedmemory/unregister"},
		} {
			body := ""
			if kind == "system" {
				body = `{"key":"` + key + `","byte_size":64}`
			}
			r := e.do(t, c.method, c.path, nil, body)
			r.expect(t, c.method+" "+c.path, 400, "")
			if ct := r.header.Get("Content-Type"); ct != "text/plain" {
				t.Errorf("%s %s: Content-Type %q", c.method, c.path, ct)
			}
		}
	}
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 1 || st[0].Name != "r" {
		t.Fatalf("table changed through SageMaker: %+v, %v", st, err)
	}
}
