package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
)

func TestRepositoryExplicit(t *testing.T) {
	models := standardModels(t)
	models["broken_config"] = testModel{config: "max_batch_size: [[[", onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))}
	models["bad_onnx"] = testModel{config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]`, onnx: []byte("not an onnx model")}
	models["wrong_type"] = testModel{config: `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT64 dims: [ -1 ] } ]`, onnx: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))}
	base, _ := startServer(t, writeRepo(t, models), serverOpts{mode: core.ModeExplicit, startup: []string{"simple"}})
	load := func(name, body string) (int, string) {
		s, _, b := post(t, base+"/v2/repository/models/"+name+"/load", body)
		return s, string(b)
	}

	steps := []struct {
		name       string
		do         func() (int, string)
		wantStatus int
		wantBody   string // exact when it starts with '{' or '[', else a substring
	}{
		{"only --load-model names load at start", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/index", `{"ready":true}`)
			return s, string(b)
		}, 200, `[{"name":"simple","version":"1","state":"READY"}]`},
		{"never-loaded models show only their name", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/index", "")
			return s, string(b)
		}, 200, `{"name":"id1"}`},
		{"21 unknown load parameter", func() (int, string) { return load("id1", `{"parameters":{"foo":"bar"}}`) }, 500, `{"error":"unexpected error on creating Triton parameter"}`},
		{"parameter value must be a string", func() (int, string) { return load("id1", `{"parameters":{"config":1}}`) }, 500, "non-string as string"},
		{"22 load of an absent model", func() (int, string) { return load("x", "") }, 500, `{"error":"failed to load 'x', failed to poll from model repository"}`},
		{"an absent model stays out of the index", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/index", "")
			if strings.Contains(string(b), `"name":"x"`) {
				return 0, string(b)
			}
			return s, string(b)
		}, 200, ""},
		{"an absent model is still not found", func() (int, string) {
			s, _, b := do(t, "GET", base+"/v2/models/x", nil, nil)
			return s, string(b)
		}, 404, `{"error":"Request for unknown model: 'x' is not found"}`},
		{"broken config is a poll failure", func() (int, string) { return load("broken_config", "") }, 500, `{"error":"failed to load 'broken_config', failed to poll from model repository"}`},
		{"ORT load error", func() (int, string) { return load("bad_onnx", "") }, 400, "load failed for model 'bad_onnx': version 1 is at UNAVAILABLE state: "},
		{"config vs ONNX datatype mismatch", func() (int, string) { return load("wrong_type", "") }, 400, "load failed for model 'wrong_type'"},
		{"2 not ready after a failed load", func() (int, string) {
			s, _, b := do(t, "GET", base+"/v2/health/ready", nil, nil)
			return s, string(b)
		}, 400, ""},
		{"failed version shows its reason", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/index", "")
			return s, string(b)
		}, 200, `{"name":"bad_onnx","version":"1","state":"UNAVAILABLE","reason":"`},
		{"load id1", func() (int, string) { return load("id1", "") }, 200, ""},
		{"id1 is ready", func() (int, string) {
			s, _, b := do(t, "GET", base+"/v2/models/id1/ready", nil, nil)
			return s, string(b)
		}, 200, ""},
		{"23 unload of a never-loaded model", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/models/never/unload", "")
			return s, string(b)
		}, 200, ""},
		{"unload with malformed JSON", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/models/id1/unload", "{")
			return s, string(b)
		}, 500, "failed to parse the request JSON buffer"},
		{"unload ignores a non-boolean unload_dependents", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/models/id1/unload", `{"parameters":{"unload_dependents":"yes"}}`)
			return s, string(b)
		}, 200, ""},
		{"unloaded version shows reason unloaded", func() (int, string) {
			s, _, b := post(t, base+"/v2/repository/index", "")
			return s, string(b)
		}, 200, `{"name":"id1","version":"1","state":"UNAVAILABLE","reason":"unloaded"}`},
		{"infer on an unloaded model", func() (int, string) {
			s, _, b := post(t, base+"/v2/models/id1/infer", `{"inputs":[]}`)
			return s, string(b)
		}, 404, "has no available versions"},
		{"infer on an unloaded version", func() (int, string) {
			s, _, b := post(t, base+"/v2/models/id1/versions/1/infer", `{"inputs":[]}`)
			return s, string(b)
		}, 503, `{"error":"Request for unknown model: 'id1' version 1 is not at ready state"}`},
		{"invalid config override", func() (int, string) { return load("id1", `{"parameters":{"config":"{not json"}}`) }, 500, "failed to poll from model repository"},
		{"config override changes the model", func() (int, string) {
			cfg := `{"platform":"onnxruntime_onnx","max_batch_size":2,"input":[{"name":"INPUT0","data_type":"TYPE_FP32","dims":[-1]}],"output":[{"name":"OUTPUT0","data_type":"TYPE_FP32","dims":[-1]}]}`
			body, _ := json.Marshal(map[string]any{"parameters": map[string]string{"config": cfg}})
			return load("id1", string(body))
		}, 200, ""},
		{"the override's max_batch_size is in force", func() (int, string) {
			s, _, b := post(t, base+"/v2/models/id1/infer", `{"inputs":[{"name":"INPUT0","shape":[3,1],"datatype":"FP32","data":[1,2,3]}]}`)
			return s, string(b)
		}, 400, "inference request batch-size must be <= 2 for 'id1'"},
		{"load with file: contents", func() (int, string) {
			cfg := `{"platform":"onnxruntime_onnx","max_batch_size":4,"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[-1]}],"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[-1]}]}`
			model := base64.StdEncoding.EncodeToString(onnxbuild.Must(onnxbuild.Identity(onnxbuild.Int32, -1, -1)))
			body, _ := json.Marshal(map[string]any{"parameters": map[string]string{"config": cfg, "file:1/model.onnx": model}})
			return load("uploaded", string(body))
		}, 200, ""},
		{"the uploaded model serves", func() (int, string) {
			s, _, b := post(t, base+"/v2/models/uploaded/infer", `{"inputs":[{"name":"INPUT0","shape":[1,3],"datatype":"INT32","data":[7,8,9]}]}`)
			return s, string(b)
		}, 200, `{"model_name":"uploaded","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,3],"data":[7,8,9]}]}`},
		{"file: without config", func() (int, string) {
			return load("uploaded2", `{"parameters":{"file:1/model.onnx":"AAAA"}}`)
		}, 500, "failed to poll from model repository"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			status, body := st.do()
			if status != st.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", status, st.wantStatus, body)
			}
			switch {
			case st.wantBody == "":
			case strings.HasPrefix(st.wantBody, "{") && strings.HasSuffix(st.wantBody, "}") && strings.HasPrefix(body, "{"),
				strings.HasPrefix(st.wantBody, "["):
				if body != st.wantBody {
					t.Fatalf("body = %s, want %s", body, st.wantBody)
				}
			default:
				if !strings.Contains(body, st.wantBody) {
					t.Fatalf("body %s does not contain %s", body, st.wantBody)
				}
			}
		})
	}
}

// TestReloadUnderLoad adds a version five times while four clients send
// requests, reloading through the repository API (explicit) or a poll:
// no request may fail, and answers move to each new version.
func TestReloadUnderLoad(t *testing.T) {
	for _, mode := range []core.ControlMode{core.ModeExplicit, core.ModePoll} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			models := standardModels(t)
			root := writeRepo(t, map[string]testModel{"simple": models["simple"]})
			so := serverOpts{mode: mode}
			if mode == core.ModeExplicit {
				so.startup = []string{"simple"}
			}
			base, srv := startServer(t, root, so)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var failures []string
			seen := map[string]int{}
			for range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						s, _, b := post(t, base+"/v2/models/simple/infer", simpleBody(1, ""))
						var r struct {
							Version string `json:"model_version"`
						}
						_ = json.Unmarshal(b, &r)
						mu.Lock()
						if s != 200 {
							failures = append(failures, string(b))
						} else {
							seen[r.Version]++
						}
						mu.Unlock()
					}
				})
			}
			for v := 2; v <= 6; v++ {
				time.Sleep(20 * time.Millisecond) // let requests reach the current version
				writeFile(t, fmt.Sprintf("%s/simple/%d/model.onnx", root, v), models["simple"].onnx)
				if mode == core.ModeExplicit {
					if s, _, b := post(t, base+"/v2/repository/models/simple/load", ""); s != 200 {
						t.Errorf("reload: %d %s", s, b)
					}
				} else if err := srv.Poll(context.Background()); err != nil {
					t.Error(err)
				}
			}
			time.Sleep(20 * time.Millisecond)
			close(stop)
			wg.Wait()
			if len(failures) > 0 {
				t.Fatalf("%d failed during reloads; first: %v", len(failures), failures[0])
			}
			if len(seen) < 3 {
				t.Fatalf("answers came from versions %v; want them to follow the reloads", seen)
			}
			if _, _, b := post(t, base+"/v2/models/simple/infer", simpleBody(1, "")); !strings.Contains(string(b), `"model_version":"6"`) {
				t.Fatalf("after the last reload: %s", b)
			}
		})
	}
}

// TestLoadUnchangedIsNoOp: loading a model whose files did not change keeps
// the serving copy (its statistics go on); a changed file reloads it.
func TestLoadUnchangedIsNoOp(t *testing.T) {
	models := standardModels(t)
	root := writeRepo(t, map[string]testModel{"simple": models["simple"]})
	base, _ := startServer(t, root, serverOpts{mode: core.ModeExplicit, startup: []string{"simple"}})
	count := func() uint64 {
		return statsOverHTTP(t, base, "simple").ModelStats[0].InferenceCount
	}
	post(t, base+"/v2/models/simple/infer", simpleBody(1, ""))
	if s, _, b := post(t, base+"/v2/repository/models/simple/load", ""); s != 200 {
		t.Fatalf("load: %d %s", s, b)
	}
	if n := count(); n != 1 {
		t.Fatalf("inference count %d after loading an unchanged model, want 1 (no reload)", n)
	}
	writeFile(t, root+"/simple/config.pbtxt", []byte(models["simple"].config+"\n# changed\n"))
	if s, _, b := post(t, base+"/v2/repository/models/simple/load", ""); s != 200 {
		t.Fatalf("load: %d %s", s, b)
	}
	if n := count(); n != 0 {
		t.Fatalf("inference count %d after a changed config, want 0 (a new copy)", n)
	}
}

// TestPollAddsAndRemoves: a poll loads a new model folder and unloads a
// removed one; an unreadable change leaves the serving copy.
func TestPollAddsAndRemoves(t *testing.T) {
	models := standardModels(t)
	root := writeRepo(t, map[string]testModel{"simple": models["simple"]})
	base, srv := startServer(t, root, serverOpts{mode: core.ModePoll})
	ctx := context.Background()
	ready := func(name string) int {
		s, _, _ := do(t, http.MethodGet, base+"/v2/models/"+name+"/ready", nil, nil)
		return s
	}
	writeRepoInto(t, root, map[string]testModel{"id1": models["id1"]})
	must(t, srv.Poll(ctx))
	if ready("id1") != 200 || ready("simple") != 200 {
		t.Fatalf("after adding id1: id1 %d simple %d", ready("id1"), ready("simple"))
	}
	// A broken config leaves the serving copy in place.
	writeFile(t, root+"/id1/config.pbtxt", []byte("not a config"))
	must(t, srv.Poll(ctx))
	if ready("id1") != 200 {
		t.Fatalf("a broken config stopped id1: %d", ready("id1"))
	}
	must(t, os.RemoveAll(root+"/id1"))
	must(t, srv.Poll(ctx))
	if ready("id1") == 200 {
		t.Fatal("id1 still ready after its folder was removed")
	}
	if s, _, b := post(t, base+"/v2/repository/models/simple/unload", ""); s != 503 || !strings.Contains(string(b), "polling is enabled") {
		t.Fatalf("unload in poll mode: %d %s", s, b)
	}
}

// TestReloadFailureKeepsServing: a reload that fails leaves the serving copy
// untouched (all-or-nothing), and no version is left LOADING.
func TestReloadFailureKeepsServing(t *testing.T) {
	good := onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, -1))
	cfg := `platform: "onnxruntime_onnx"
max_batch_size: 8
version_policy: { all: {} }
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`
	root := writeRepo(t, map[string]testModel{"m": {config: cfg, onnx: good}})
	base, _ := startServer(t, root, serverOpts{mode: core.ModeExplicit, startup: []string{"m"}})
	infer := func(version string) int {
		s, _, _ := post(t, base+"/v2/models/m"+version+"/infer", `{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`)
		return s
	}
	index := func() string {
		_, _, b := post(t, base+"/v2/repository/index", "")
		return string(b)
	}
	// Version 2 is good, but version 1's file is now broken: the reload
	// fails as a whole and version 1 keeps serving its old copy.
	writeFile(t, root+"/m/2/model.onnx", good)
	writeFile(t, root+"/m/1/model.onnx", []byte("broken"))
	if s, _, b := post(t, base+"/v2/repository/models/m/load", ""); s != 400 || !strings.Contains(string(b), "version 1 is at UNAVAILABLE state") {
		t.Fatalf("reload: %d %s", s, b)
	}
	if s := infer("/versions/1"); s != 200 {
		t.Errorf("version 1 stopped serving after a failed reload: %d", s)
	}
	if s := infer("/versions/2"); s != 503 {
		t.Errorf("uncommitted version 2 answered %d, want 503", s)
	}
	if idx := index(); strings.Contains(idx, "LOADING") || !strings.Contains(idx, `{"name":"m","version":"2","state":"UNAVAILABLE","reason":"not loaded: another version of the model failed to load"}`) {
		t.Errorf("index %s", idx)
	}
	// Fixed: both versions load and the latest serves unversioned requests.
	writeFile(t, root+"/m/1/model.onnx", good)
	if s, _, b := post(t, base+"/v2/repository/models/m/load", ""); s != 200 {
		t.Fatalf("reload: %d %s", s, b)
	}
	if s := infer(""); s != 200 || !strings.Contains(index(), `{"name":"m","version":"2","state":"READY"}`) {
		t.Errorf("after the fix: infer %d, index %s", s, index())
	}
	if s, _, b := post(t, base+"/v2/models/m", ""); s != 405 {
		t.Errorf("%d %s", s, b)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, data, 0o644))
}
