package openai

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

func bearer(key string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	return r
}

func TestKeysRotate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	servertest.Must(t, os.WriteFile(file, []byte("# rotated weekly\nfile-one\n\n"), 0o600))
	k, err := NewKeys([]string{"flag-key"}, []string{file}, 0, nil)
	servertest.Must(t, err)
	for key, want := range map[string]bool{"flag-key": true, "file-one": true, "file-two": false, "": false, "# rotated weekly": false} {
		if got := k.Check(bearer(key)); got != want {
			t.Fatalf("key %q: %v, want %v", key, got, want)
		}
	}
	// A new file, another size: re-read on the next request.
	servertest.Must(t, os.WriteFile(file, []byte("file-two\n"), 0o600))
	if !k.Check(bearer("file-two")) || k.Check(bearer("file-one")) {
		t.Fatal("the rotated file was not re-read")
	}
	// A removed file keeps its last keys.
	servertest.Must(t, os.Remove(file))
	if !k.Check(bearer("file-two")) {
		t.Fatal("a removed key file dropped its keys")
	}
	var none *Keys
	if !none.Check(bearer("")) || none.Enabled() {
		t.Fatal("nil Keys must accept every request")
	}
}

func TestKeysRecheckInterval(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	servertest.Must(t, os.WriteFile(file, []byte("a\n"), 0o600))
	k, err := NewKeys(nil, []string{file}, time.Hour, nil)
	servertest.Must(t, err)
	servertest.Must(t, os.WriteFile(file, []byte("bb\n"), 0o600))
	if !k.Check(bearer("a")) || k.Check(bearer("bb")) {
		t.Fatal("the file was re-read before the interval passed")
	}
}

func TestKeysFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	servertest.Must(t, os.WriteFile(empty, []byte("# none yet\n"), 0o600))
	if _, err := NewKeys(nil, []string{empty}, 0, nil); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := NewKeys(nil, []string{filepath.Join(dir, "missing")}, 0, nil); err == nil {
		t.Fatal("missing file accepted")
	}
	if _, err := NewKeys(nil, []string{dir}, 0, nil); err == nil {
		t.Fatal("a folder accepted as a key file")
	}
}

func TestAuthRoutes(t *testing.T) {
	keys, err := NewKeys([]string{"sk-test"}, nil, 0, nil)
	servertest.Must(t, err)
	base := startServer(t, encoderModels(t), Options{Keys: keys})
	var e openAIErr
	r := do(t, http.MethodGet, base+"/v1/models", nil)
	r.decodeJSON(t, &e)
	if r.status != http.StatusUnauthorized || e.Error.Code == nil || *e.Error.Code != "invalid_api_key" || r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("no key: %d %s", r.status, r.body)
	}
	if r = do(t, http.MethodGet, base+"/v1/models", nil, "Authorization", "Bearer sk-wrong"); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d %s", r.status, r.body)
	}
	if r = do(t, http.MethodGet, base+"/v1/models", nil, "Authorization", "Bearer sk-test"); r.status != http.StatusOK {
		t.Fatalf("right key: %d %s", r.status, r.body)
	}
	// The v2 routes keep their own rules.
	if r = do(t, http.MethodGet, base+"/v2/models/enc/ready", nil); r.status != http.StatusOK {
		t.Fatalf("v2 ready without a key: %d %s", r.status, r.body)
	}
}

// TestRestrictedAPI: --http-restricted-api's inference group guards the
// encoder routes and its metadata group /v1/models, as on the v2 routes.
func TestRestrictedAPI(t *testing.T) {
	root := t.TempDir()
	m := encoderModels(t)["enc"]
	dir := filepath.Join(root, "enc")
	servertest.WriteModel(t, dir, servertest.Model{Config: m.config, ONNX: m.onnx})
	for f, content := range m.files {
		servertest.Must(t, os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644))
	}
	restricted := map[string]httpapi.Restriction{}
	servertest.Must(t, httpapi.ParseRestriction(restricted, "inference,metadata:admin=yes"))
	api := httpapi.New(servertest.Start(t, servertest.Options{Repo: root}), httpapi.Options{Restricted: restricted})
	New(api, Options{}).Mount(api.Router())
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	body := map[string]any{"model": "enc", "input": "hello"}
	for _, c := range []struct {
		method, path string
		body         any
	}{{http.MethodPost, "/v1/embeddings", body}, {http.MethodPost, "/embed", map[string]any{"inputs": "hello"}}, {http.MethodGet, "/v1/models", nil}} {
		if r := do(t, c.method, ts.URL+c.path, c.body); r.status != http.StatusForbidden {
			t.Fatalf("%s without the header: %d %s", c.path, r.status, r.body)
		}
		if r := do(t, c.method, ts.URL+c.path, c.body, "admin", "yes"); r.status != http.StatusOK {
			t.Fatalf("%s with the header: %d %s", c.path, r.status, r.body)
		}
	}
}
