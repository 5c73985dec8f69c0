package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/modelconfig"
)

// confineSimpleConfig is Triton's `simple` (AddSub over INT32 [16]).
const confineSimpleConfig = `name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

type confined struct {
	base   string
	root   string
	marker string // what evil.py writes when it is imported
}

// startConfined serves, over a loopback listener in explicit mode, a
// repository of "seq" (state from zero), "simple" (AddSub, its model.onnx
// a link to outside.onnx) and "params" (a Python model), each loaded at
// start. Outside the model folders lie
// secret.bin, outside.onnx (a valid AddSub) and evil.py (a valid model.py
// that writes marker when imported); inside seq's initial_state/, a link
// to the secret and a FIFO. refuse is --allow-model-file-override=false.
func startConfined(t *testing.T, refuse bool) *confined {
	t.Helper()
	root := t.TempDir()
	c := &confined{root: root, marker: filepath.Join(t.TempDir(), "imported")}
	addSub := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	servertest.WriteConfineSeq(t, root)
	servertest.WriteModel(t, filepath.Join(root, "simple"), servertest.Model{Config: confineSimpleConfig, ONNX: addSub})
	servertest.WriteParamsModel(t, root, "params")
	must(t, os.WriteFile(filepath.Join(root, "outside.onnx"), addSub, 0o644))
	evil := fmt.Sprintf("open(%q, 'w').write('imported')\nclass TritonPythonModel:\n    pass\n", c.marker)
	must(t, os.WriteFile(filepath.Join(root, "evil.py"), []byte(evil), 0o644))
	// simple's own model file is a link out of its folder, as Triton
	// repositories may share one; link.onnx beside it is not the
	// repository's.
	must(t, os.Remove(filepath.Join(root, "simple", "1", "model.onnx")))
	must(t, os.Symlink("../../outside.onnx", filepath.Join(root, "simple", "1", "model.onnx")))
	must(t, os.Symlink("../../outside.onnx", filepath.Join(root, "simple", "1", "link.onnx")))

	py := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = py.Close() })
	c.base, _ = startServer(t, root, serverOpts{mode: core.ModeExplicit, startup: []string{"seq", "simple", "params"},
		backends: []core.Backend{py}, noFileOverrides: refuse})
	return c
}

// post sends body and fails the test, instead of hanging, when no answer
// comes within two minutes: a FIFO or a device must never hold a load.
func (c *confined) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(c.base+path, "application/json", strings.NewReader(body))
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	servertest.NoSecret(t, string(b))
	return resp.StatusCode, string(b)
}

// load posts a load of model with cfg (config.pbtxt text) as its override.
func (c *confined) load(t *testing.T, model, cfg string) (int, string) {
	t.Helper()
	parsed, err := modelconfig.Parse([]byte(cfg))
	must(t, err)
	js, err := modelconfig.MarshalJSON(parsed)
	must(t, err)
	body, err := json.Marshal(map[string]any{"parameters": map[string]string{"config": string(js)}})
	must(t, err)
	return c.post(t, "/v2/repository/models/"+model+"/load", string(body))
}

// seqServes: seq still answers a fresh sequence from its zero state.
func (c *confined) seqServes(t *testing.T) {
	t.Helper()
	status, body := c.post(t, "/v2/models/seq/infer", `{"parameters":{"sequence_id":7,"sequence_start":true,"sequence_end":true},
		"inputs":[{"name":"INPUT","shape":[1,1],"datatype":"INT32","data":[5]}]}`)
	if status != 200 || !strings.Contains(body, `"data":[0]`) {
		t.Fatalf("seq after the refused load: %d %s, want OUTPUT [0]", status, body)
	}
}

// The review's findings, over HTTP with --allow-model-file-override=false
// (load and unload without code upload): a load override's initial_state
// data_file that leaves the model folder (by "..", absolute, or through a
// link) served the file's bytes as the state; /dev/zero read for ever; a
// FIFO held the load; huge zero_data dims killed the process. Each load
// now answers 400 naming the field and the path, the secret appears in no
// reply, and the serving copy keeps answering.
func TestConfinedDataFileHTTP(t *testing.T) {
	c := startConfined(t, true)
	const field = "state input 'STATE_IN' initial_state data_file"
	for _, tc := range []struct{ dims, data, want string }{
		{"1", `data_file: "../../secret.bin"`, field + " '../../secret.bin' names a path outside the model directory"},
		{"1", `data_file: "../../../../../../../../../etc/passwd"`, field + " '../../../../../../../../../etc/passwd' names a path outside the model directory"},
		{"1", `data_file: "/etc/passwd"`, field + " '/etc/passwd' names a path outside the model directory"},
		{"1", `data_file: "link"`, field + " 'link' names a path outside the model directory"},
		{"1", `data_file: "/dev/zero"`, field + " '/dev/zero' names a path outside the model directory"},
		{"1", `data_file: "fifo"`, field + " 'fifo' is not a regular file"},
		{"1", `data_file: "missing"`, field + " 'missing': "},
		{"17179869184", `zero_data: true`, "'initial_state' of state input 'STATE_IN' with dims [17179869184] would take more than 1073741824 bytes, this server's limit"},
	} {
		t.Run(tc.data+tc.dims, func(t *testing.T) {
			status, body := c.load(t, "seq", servertest.ConfineSeqConfig(tc.dims, tc.data))
			if status != 400 || !strings.Contains(body, tc.want) || !strings.HasPrefix(body, `{"error":"load failed for model 'seq': `) {
				t.Fatalf("load: %d %s, want 400 naming %q", status, body, tc.want)
			}
			c.seqServes(t)
		})
	}
}

// The model files a load override names: an ONNX or Python
// default_model_filename with ".." made ONNX Runtime open, or the Python
// worker import, any file on disk; op_library_filename dlopened any
// library; EXECUTION_ENV_PATH ran any environment. With
// --allow-model-file-override=false an override also keeps the Python
// file and refuses libraries the repository's config does not name.
func TestConfinedModelFilesHTTP(t *testing.T) {
	pyConfig := func(extra string) string {
		return `name: "params"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
` + extra
	}
	const (
		outside = "names a path outside the model directory"
		inside  = "is neither what the repository's own config names nor an absolute path inside the model directory"
		locked  = "is not what the repository's own config names, and with --allow-model-file-override=false a load override may name no other"
	)
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("locked=%v", refuse), func(t *testing.T) {
			c := startConfined(t, refuse)
			pick := func(open, lock string) string {
				if refuse {
					return lock
				}
				return open
			}
			lib := filepath.Join(c.root, "outside.onnx")
			for _, tc := range []struct {
				name, model, cfg, want string
			}{
				{"onnx dot-dot", "simple", confineSimpleConfig + `default_model_filename: "../../outside.onnx"`,
					"model 'simple' default_model_filename '../../outside.onnx' " + outside},
				{"onnx link out", "simple", confineSimpleConfig + `default_model_filename: "link.onnx"`,
					"model 'simple' default_model_filename 'link.onnx' " + outside},
				{"onnx absolute", "simple", confineSimpleConfig + `default_model_filename: "` + lib + `"`,
					"model 'simple' default_model_filename '" + lib + "' " + outside},
				{"op library", "simple", confineSimpleConfig + `model_operations { op_library_filename: "` + lib + `" }`,
					"model_operations op_library_filename '" + lib + "' " + pick(inside, locked)},
				{"python dot-dot", "params", pyConfig(`default_model_filename: "../../evil.py"`),
					pick("model 'params' default_model_filename '../../evil.py' "+outside, "default_model_filename of a python model '../../evil.py' "+locked)},
				{"python environment", "params", pyConfig(`parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "/usr" } }`),
					"parameters EXECUTION_ENV_PATH '/usr' " + pick(inside, locked)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					status, body := c.load(t, tc.model, tc.cfg)
					if status != 400 || !strings.Contains(body, tc.want) {
						t.Fatalf("load: %d %s, want 400 naming %q", status, body, tc.want)
					}
					if _, err := os.Stat(c.marker); err == nil {
						t.Fatal("evil.py was imported")
					}
					status, body = c.post(t, "/v2/models/simple/infer", `{"inputs":[
						{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},
						{"name":"INPUT1","shape":[1,16],"datatype":"INT32","data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`)
					if status != 200 {
						t.Fatalf("simple after the refused load: %d %s", status, body)
					}
					for _, m := range []string{"seq", "simple", "params"} {
						if resp, err := http.Get(c.base + "/v2/models/" + m + "/ready"); err != nil || resp.StatusCode != 200 {
							t.Fatalf("%s not ready after the refused load: %v %v", m, resp, err)
						}
					}
				})
			}
		})
	}
}

// Under --allow-model-file-override=false a load override may still change
// what is not a file or code: a Python model's own file, named again,
// loads.
func TestConfinedPythonSameFile(t *testing.T) {
	c := startConfined(t, true)
	cfg := `name: "params"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
default_model_filename: "model.py"
`
	if status, body := c.load(t, "params", cfg); status != 200 {
		t.Fatalf("load: %d %s", status, body)
	}
}

// A repository's own config may not name a model file out of its version
// folder either: the backends refuse a default_model_filename with "..",
// ONNX's and Python's alike, before ONNX Runtime opens it or a worker
// imports it.
func TestConfinedRepositoryModelFile(t *testing.T) {
	c := startConfined(t, false)
	for _, tc := range []struct{ model, cfg string }{
		{"simple", confineSimpleConfig + `default_model_filename: "../../outside.onnx"` + "\n"},
		{"params", `name: "params"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
default_model_filename: "../../evil.py"
`},
	} {
		t.Run(tc.model, func(t *testing.T) {
			must(t, os.WriteFile(filepath.Join(c.root, tc.model, "config.pbtxt"), []byte(tc.cfg), 0o644))
			status, body := c.post(t, "/v2/repository/models/"+tc.model+"/load", "")
			want := "model '" + tc.model + "' default_model_filename '../../"
			if status != 400 || !strings.Contains(body, want) || !strings.Contains(body, "names a path outside the model directory") {
				t.Fatalf("load: %d %s, want 400 naming %q", status, body, want)
			}
			if _, err := os.Stat(c.marker); err == nil {
				t.Fatal("evil.py was imported")
			}
			if resp, err := http.Get(c.base + "/v2/models/" + tc.model + "/ready"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: the serving copy is gone: %v %v", tc.model, resp, err)
			}
		})
	}
}
