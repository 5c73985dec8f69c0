package main

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// agentSimple is taggedSimple without its name, for models of any name.
const agentSimple = `platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
`

func md5Of(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// agentsSection is a model_repository_agents block naming agent with one
// parameter.
func agentsSection(agent, key, value string) string {
	return `model_repository_agents { agents [ { name: "` + agent + `" parameters { key: "` + key + `" value: "` + value + `" } } ] }` + "\n"
}

// indexEntry is one model version of POST /v2/repository/index.
type indexEntry struct {
	Name, Version, State, Reason string
}

func repoIndex(t *testing.T, r *running) []indexEntry {
	t.Helper()
	status, body := post(t, r.http+"/v2/repository/index", "")
	var out []indexEntry
	if status != 200 || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("index: %d %s", status, body)
	}
	return out
}

// TestRepositoryAgents: a model's model_repository_agents run when it
// loads. The checksum agent lets a model whose files match its digests
// load and serve, and fails one whose file differs, naming the file in the
// load's answer and in the repository index, where the model is
// UNAVAILABLE; a reload with a rewritten file fails and the loaded copy
// keeps serving. An agent inferd lacks fails the load with Triton's text,
// and so does a checksum path that leaves the model folder, even when the
// digest of the file it names matches.
func TestRepositoryAgents(t *testing.T) {
	root := t.TempDir()
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	sum := md5Of(model)
	other := md5Of([]byte("another model"))
	must(t, os.WriteFile(filepath.Join(root, "secret"), []byte("secret"), 0o600))
	writeModel(t, root, "good", agentSimple+agentsSection("checksum", "MD5:1/model.onnx", sum), model)
	writeModel(t, root, "reloaded", agentSimple+agentsSection("checksum", "MD5:1/model.onnx", sum), model)
	writeModel(t, root, "tampered", agentSimple+agentsSection("checksum", "MD5:1/model.onnx", other), model)
	writeModel(t, root, "unknown", agentSimple+agentsSection("decrypt", "key", "k"), model)
	writeModel(t, root, "escape", agentSimple+agentsSection("checksum", "MD5:../secret", md5Of([]byte("secret"))), model)
	r := start(t, "--model-repository="+root, "--model-control-mode=explicit", "--allow-metrics=false", "--allow-grpc=false")

	for _, name := range []string{"good", "reloaded"} {
		if s, body := post(t, r.http+"/v2/repository/models/"+name+"/load", ""); s != 200 {
			t.Fatalf("load %s: %d %s", name, s, body)
		}
		if s, body := post(t, r.http+"/v2/models/"+name+"/infer", readmeExample); s != 200 {
			t.Fatalf("infer %s: %d %s", name, s, body)
		}
	}
	// The file changes under the loaded model; the reload fails.
	tampered := append([]byte(nil), model...)
	tampered[len(tampered)-1] ^= 1
	must(t, os.WriteFile(filepath.Join(root, "reloaded", "1", "model.onnx"), tampered, 0o644))

	for _, tt := range []struct{ model, reason string }{
		{"tampered", "Mismatched MD5 hash for file 1/model.onnx, expect: " + other + ", got: " + sum},
		{"reloaded", "Mismatched MD5 hash for file 1/model.onnx, expect: " + sum + ", got: " + md5Of(tampered)},
		{"unknown", "unable to find 'libtritonrepoagent_decrypt.so' for repo agent 'decrypt', searched: inferd's built-in agents (checksum)"},
		{"escape", "failed to open text file for read ../secret: the path leaves the model directory"},
	} {
		want, _ := json.Marshal(map[string]string{"error": "load failed for model '" + tt.model + "': version 1 is at UNAVAILABLE state: " + tt.reason + ";\n"})
		if s, body := post(t, r.http+"/v2/repository/models/"+tt.model+"/load", ""); s != 400 || body != string(want) {
			t.Errorf("load %s: %d %s, want 400 %s", tt.model, s, body, want)
		}
	}
	states := map[string]indexEntry{}
	for _, e := range repoIndex(t, r) {
		states[e.Name] = e
	}
	for _, tt := range []struct{ model, state, reason string }{
		{"good", "READY", ""},
		{"reloaded", "READY", ""}, // the loaded copy serves on
		{"tampered", "UNAVAILABLE", "Mismatched MD5 hash for file 1/model.onnx, …"},
		{"unknown", "UNAVAILABLE", "unable to find 'libtritonrepoagent_decrypt.so' for repo agent 'decrypt', …"},
		{"escape", "UNAVAILABLE", "failed to open text file for read ../secret: the path leaves the model directory"},
	} {
		e := states[tt.model]
		prefix, cut := strings.CutSuffix(tt.reason, "…")
		if e.State != tt.state || (cut && !strings.HasPrefix(e.Reason, prefix)) || (!cut && e.Reason != tt.reason) {
			t.Errorf("index %s: %+v, want %s %q", tt.model, e, tt.state, tt.reason)
		}
	}
	if s, body := post(t, r.http+"/v2/models/reloaded/infer", readmeExample); s != 200 {
		t.Errorf("the loaded copy of reloaded after the failed reload: %d %s", s, body)
	}
	for _, name := range []string{"tampered", "unknown", "escape"} {
		if s, _ := post(t, r.http+"/v2/models/"+name+"/infer", readmeExample); s == 200 {
			t.Errorf("%s serves", name)
		}
	}
}

// TestRepositoryAgentsOverride: the checksum agent also checks the files
// a load request uploads; the agents are those of the configuration the
// request carries, which replaces config.pbtxt whole, as in Triton.
func TestRepositoryAgentsOverride(t *testing.T) {
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	r := start(t, "--model-repository="+t.TempDir(), "--model-control-mode=explicit", "--allow-metrics=false", "--allow-grpc=false")
	load := func(digest string) (int, string) {
		cfg, _ := json.Marshal(map[string]any{"platform": "onnxruntime_onnx", "model_repository_agents": map[string]any{
			"agents": []any{map[string]any{"name": "checksum", "parameters": map[string]string{"MD5:1/model.onnx": digest}}}}})
		body, _ := json.Marshal(map[string]any{"parameters": map[string]string{
			"config": string(cfg), "file:1/model.onnx": base64.StdEncoding.EncodeToString(model)}})
		return post(t, r.http+"/v2/repository/models/uploaded/load", string(body))
	}
	if s, body := load(md5Of([]byte("other"))); s != 400 || !strings.Contains(body, "Mismatched MD5 hash for file 1/model.onnx, expect: "+md5Of([]byte("other"))) {
		t.Errorf("upload with a wrong digest: %d %s", s, body)
	}
	if s, body := load(md5Of(model)); s != 200 {
		t.Fatalf("upload with its digest: %d %s", s, body)
	}
	if s, body := post(t, r.http+"/v2/models/uploaded/infer", readmeExample); s != 200 {
		t.Errorf("infer: %d %s", s, body)
	}
}

// TestRepoagentDirectoryHelp: --repoagent-directory is accepted, and its
// help says what is true: the agents are built in and the directory is
// read for nothing.
func TestRepoagentDirectoryHelp(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &out); err == nil {
		t.Fatal("--help returned no error")
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	const want = "--repoagent-directory <string> Where repository agent libraries are found (none are loaded: see docs/repositories.md). Default: /opt/tritonserver/repoagents. [no-op: repository agents are built into the binary: checksum; a model naming another fails to load]"
	if !strings.Contains(help, want) {
		t.Errorf("--help lacks %q", want)
	}
	cfg, err := parseFlags([]string{"--model-repository=x", "--repoagent-directory=/opt/agents"}, io.Discard)
	if err != nil {
		t.Errorf("--repoagent-directory: %v", err)
	} else if !slices.Contains(cfg.noop, "--repoagent-directory") {
		t.Errorf("no-op options %v lack --repoagent-directory", cfg.noop)
	}
}
