package vertex

import (
	"testing"

	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/shm"
)

// TestSharedMemoryRedirects: with client shared memory on, a redirect to a
// status route answers the regions, and one to register or unregister is
// 403 with no body whatever the headers (Triton's Vertex AI server lets
// only read-only status through: triton-inference-server/server
// src/vertex_ai_server.cc); the table is unchanged. The shared-memory
// paths themselves are not Vertex routes: 400.
func TestSharedMemoryRedirects(t *testing.T) {
	m := shm.NewManager(nil)
	key := shmtest.Object(t, 64)
	must(t, m.RegisterSystem("r", key, 0, 64))
	restricted := map[string]httpapi.Restriction{}
	must(t, httpapi.ParseRestriction(restricted, "shared-memory:X-Auth=secret"))
	c, api := startCore(t, map[string]testModel{"simple": simpleModel}, httpapi.Options{SharedMemory: m, Restricted: restricted})
	_, base := listen(t, c, api, "", true)

	status := `[{"name":"r","key":"` + key + `","offset":0,"byte_size":64}]`
	withAuth := func(target string) map[string]string {
		return map[string]string{RedirectHeader: target, "X-Auth": "secret"}
	}
	cases := []routeCase{
		{name: "system status", header: withAuth("v2/systemsharedmemory/status"), status: 200, exact: str(status)},
		{name: "system status one", header: withAuth("v2/systemsharedmemory/region/r/status"), status: 200, exact: str(status)},
		{name: "cuda status", header: withAuth("v2/cudasharedmemory/status"), status: 200, exact: str("[]")},
		{name: "status without the header", header: redirect("v2/systemsharedmemory/status"), status: 403,
			exact: str(`{"error":"This API is restricted, expecting header 'X-Auth'"}`)},
		{name: "direct path", method: "GET", path: "/v2/systemsharedmemory/status", header: map[string]string{"X-Auth": "secret"}, status: 400, exact: empty},
	}
	for _, target := range []string{
		"v2/systemsharedmemory/region/s/register", "v2/systemsharedmemory/region/r/unregister", "v2/systemsharedmemory/unregister",
		"v2/cudasharedmemory/region/s/register", "v2/cudasharedmemory/unregister",
	} {
		cases = append(cases,
			routeCase{name: "refused " + target, header: withAuth(target), body: `{"key":"` + key + `","byte_size":64}`, status: 403, exact: empty},
			routeCase{name: "refused without the header " + target, header: redirect(target), status: 403, exact: empty})
	}
	runRoutes(t, base, cases)
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 1 || st[0].Name != "r" {
		t.Fatalf("table changed through Vertex AI: %+v, %v", st, err)
	}
}
