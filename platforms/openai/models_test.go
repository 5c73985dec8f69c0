package openai

import (
	"net/http"
	"testing"
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
