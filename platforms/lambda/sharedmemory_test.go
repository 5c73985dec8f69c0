package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/shm"
)

// TestSharedMemoryRefused: a function's callers never share its host, so
// the shared-memory register and unregister routes are refused with 403
// and no body, whatever the path's spelling and with client shared memory
// on, as Triton's Vertex AI server refuses them through a redirect; status
// stays readable. The table is left as it was.
func TestSharedMemoryRefused(t *testing.T) {
	m := shm.NewManager(nil)
	key := shmtest.Object(t, 64)
	servertest.Must(t, m.RegisterSystem("r", key, 0, 64))
	api := httpapi.New(servertest.Start(t, servertest.Options{Repo: servertest.WriteRepo(t, nil)}), httpapi.Options{SharedMemory: m})
	for _, stream := range []bool{false, true} {
		a := newTestHandler(api, Options{StreamFunctionURL: stream})
		invoke := func(method, path, body string) result {
			t.Helper()
			res, err := a.Invoke(context.Background(), mustJSON(t, urlEvent(method, path, "", body, false)))
			if err != nil {
				t.Fatal(err)
			}
			return decodeAny(t, res)
		}
		register := `{"key":"` + key + `","byte_size":64}`
		for _, path := range []string{
			"/v2/systemsharedmemory/region/s/register", "/v2/systemsharedmemory/region/r/unregister", "/v2/systemsharedmemory/unregister",
			"/v2/cudasharedmemory/region/s/register", "/v2/cudasharedmemory/unregister", "/v2/systemsharedmemory/region/a%2Fb/register",
		} {
			if r := invoke("POST", path, register); r.status != 403 || len(r.body) != 0 {
				t.Errorf("stream=%v POST %s: %d %s", stream, path, r.status, r.body)
			}
		}
		want := `[{"name":"r","key":"` + key + `","offset":0,"byte_size":64}]`
		if r := invoke("GET", "/v2/systemsharedmemory/status", ""); r.status != 200 || string(r.body) != want {
			t.Errorf("stream=%v status: %d %s", stream, r.status, r.body)
		}
	}
	if st, err := m.Status(shm.System, ""); err != nil || len(st) != 1 || st[0].Name != "r" {
		t.Fatalf("table changed through Lambda: %+v, %v", st, err)
	}
}

// decodeAny reads a buffered or a streaming response.
func decodeAny(t *testing.T, res any) result {
	t.Helper()
	s, ok := res.(*events.LambdaFunctionURLStreamingResponse)
	if !ok {
		return decodeResult(t, res)
	}
	all, err := io.ReadAll(s)
	if err != nil {
		t.Fatal(err)
	}
	prelude, body, ok := bytes.Cut(all, make([]byte, 8))
	var head struct {
		StatusCode int `json:"statusCode"`
	}
	if !ok || json.Unmarshal(prelude, &head) != nil {
		t.Fatalf("stream %q", all)
	}
	return result{status: head.StatusCode, body: body}
}
