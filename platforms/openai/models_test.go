package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/repo/textmodel"
)

func TestModels(t *testing.T) {
	base := startServer(t, encoderModels(t), Options{})
	var list struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}
	r := do(t, http.MethodGet, base+"/v1/models", nil)
	r.decodeJSON(t, &list)
	if r.status != http.StatusOK || list.Object != "list" || len(list.Data) != 5 || list.Data[0].ID != "cls" || list.Data[0].Object != "model" {
		t.Fatalf("GET /v1/models: %d %s", r.status, r.body)
	}
	var one modelObject
	r = do(t, http.MethodGet, base+"/v1/models/enc", nil)
	r.decodeJSON(t, &one)
	if r.status != http.StatusOK || one.ID != "enc" || one.OwnedBy != "inferd" {
		t.Fatalf("GET /v1/models/enc: %d %s", r.status, r.body)
	}
	var e openAIErr
	r = do(t, http.MethodGet, base+"/v1/models/nope", nil)
	r.decodeJSON(t, &e)
	if r.status != http.StatusNotFound || e.Error.Code == nil || *e.Error.Code != "model_not_found" || e.Error.Type != invalidRequest {
		t.Fatalf("GET /v1/models/nope: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodPost, base+"/v1/models", "{}")
	r.decodeJSON(t, &e)
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != http.MethodGet {
		t.Fatalf("POST /v1/models: %d %s", r.status, r.body)
	}
}

// TestDescriptionFollowsReload: a reload reads the folder again (the
// description is per loaded copy), so a changed 1_Pooling/config.json
// takes effect.
func TestDescriptionFollowsReload(t *testing.T) {
	root := t.TempDir()
	m := encoderModels(t)["enc"]
	dir := filepath.Join(root, "enc")
	servertest.WriteModel(t, dir, servertest.Model{Config: m.config, ONNX: m.onnx})
	for f, content := range m.files {
		servertest.Must(t, os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644))
	}
	srv := servertest.Start(t, servertest.Options{Repo: root, Mode: core.ModeExplicit, Startup: []string{"enc"}})
	api := httpapi.New(srv, httpapi.Options{})
	New(api, Options{}).Mount(api.Router())
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	embed := func() []float32 {
		var got embeddingsReply
		do(t, http.MethodPost, ts.URL+"/v1/embeddings", map[string]any{"model": "enc", "input": long}).decodeJSON(t, &got)
		if len(got.Data) != 1 {
			t.Fatalf("%+v", got)
		}
		return got.Data[0].Embedding
	}
	near(t, "mean", embed(), expect(t, long, textmodel.Mean, true))
	servertest.Must(t, os.MkdirAll(filepath.Join(dir, "1_Pooling"), 0o755))
	servertest.Must(t, os.WriteFile(filepath.Join(dir, "1_Pooling", "config.json"), []byte(`{"pooling_mode_cls_token": true}`), 0o644))
	servertest.Must(t, srv.Load(context.Background(), "enc", nil))
	near(t, "cls after the reload", embed(), expect(t, long, textmodel.CLS, true))
}
