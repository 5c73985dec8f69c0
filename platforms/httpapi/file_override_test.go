package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/core"
)

const idmConfig = `{"backend":"identity","max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[1]}],"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[1]}]}`

// TestFileOverrideOption: core.Options.NoFileOverrides
// (--allow-model-file-override=false) refuses a load whose parameters
// carry files, with 400 and a message naming the option, and loads
// nothing; a config-only override still loads. Without it both load, as
// in Triton.
func TestFileOverrideOption(t *testing.T) {
	const refusal = `{"error":"load failed for model 'uploaded': loading model files from the load request ('file:' parameters) is disabled by --allow-model-file-override=false"}`
	for _, refuse := range []bool{false, true} {
		root := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(root, "idm", "1"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "idm", "config.pbtxt"), []byte(`backend: "identity"`), 0o644))
		base, srv := startServer(t, root, serverOpts{mode: core.ModeExplicit, noFileOverrides: refuse})

		body, _ := json.Marshal(map[string]any{"parameters": map[string]string{"config": idmConfig, "file:1/model.bin": base64.StdEncoding.EncodeToString([]byte("w"))}})
		status, _, b := post(t, base+"/v2/repository/models/uploaded/load", string(body))
		switch {
		case !refuse && status != 200:
			t.Fatalf("file: override allowed: %d %s", status, b)
		case refuse && (status != 400 || string(b) != refusal):
			t.Fatalf("file: override refused: %d %s, want 400 %s", status, b, refusal)
		}
		if ready := srv.ModelReady("uploaded", core.LatestVersion); ready == refuse {
			t.Fatalf("refuse=%v: the uploaded model's readiness is %v", refuse, ready)
		}
		body, _ = json.Marshal(map[string]any{"parameters": map[string]string{"config": idmConfig}})
		if status, _, b := post(t, base+"/v2/repository/models/idm/load", string(body)); status != 200 || !srv.ModelReady("idm", core.LatestVersion) {
			t.Fatalf("refuse=%v: a config-only override: %d %s", refuse, status, b)
		}
	}
}
