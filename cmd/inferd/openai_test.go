package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeCurl is a README curl line against the HTTP port: its path and,
// for a POST, its body.
var readmeCurl = regexp.MustCompile(`curl -s localhost:8000(/v1/[a-z/]+|/embed|/rerank|/tokenize)(?: -d '([^']*)')?`)

// TestREADMEOpenAIExamples runs every curl line of the README's "OpenAI
// and TEI routes" part (and the example table's lines for its models)
// against the example repository's ONNX models, and wants the answer the
// README shows for the embeddings call.
func TestREADMEOpenAIExamples(t *testing.T) {
	readme := readREADME(t)
	start := strings.Index(readme, "### OpenAI and TEI routes")
	if start < 0 {
		t.Fatal(`README.md has no "### OpenAI and TEI routes"`)
	}
	section := readme[start:]
	section = section[:strings.Index(section[4:], "\n### ")+4]
	lines := readmeCurl.FindAllStringSubmatch(section, -1)
	for _, m := range []string{"embedder", "reranker"} {
		row := regexp.MustCompile("(?m)^\\| `" + m + "` .*$").FindString(readme)
		lines = append(lines, readmeCurl.FindAllStringSubmatch(row, -1)...)
	}
	if len(lines) < 9 {
		t.Fatalf("%d curl lines found for the OpenAI and TEI routes", len(lines))
	}
	r := startONNXExamples(t)
	shown := regexp.MustCompile("(?s)```json\n(.*?)\n```").FindStringSubmatch(section)
	compared := false
	for _, l := range lines {
		path, body := l[1], l[2]
		method := http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
		req, err := http.NewRequest(method, r.http+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !json.Valid(got) {
			t.Errorf("%s %s %s: %d %s", method, path, body, resp.StatusCode, got)
		}
		if strings.Contains(body, `"the quick brown fox"]}`) && path == "/v1/embeddings" {
			compared = true
			if shown == nil || string(got) != shown[1] {
				t.Errorf("README.md shows another answer for %s %s:\n%s", path, body, got)
			}
		}
	}
	if !compared {
		t.Error("README.md's embeddings line with an answer was not found")
	}
}

// startONNXExamples serves the ONNX example repository alone (no Python needed).
func startONNXExamples(t *testing.T) *running {
	t.Helper()
	repo, err := filepath.Abs("../../examples/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(repo, "embedder", "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	r := start(t, "--grpc-address=127.0.0.1", "--model-repository="+repo)
	if r.http == "" {
		t.Fatalf("the server did not start: %v", <-r.done)
	}
	return r
}

// TestOpenAIKeys: --openai-api-key and --openai-api-key-file guard the
// OpenAI and TEI routes and leave the v2 ones alone; a key file that
// holds no key stops the start.
func TestOpenAIKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	if err := os.WriteFile(file, []byte("# rotated\nsk-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../../examples/model_repository")
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, "--grpc-address=127.0.0.1", "--model-repository="+repo, "--openai-api-key=sk-flag", "--openai-api-key-file="+file)
	if r.http == "" {
		t.Fatalf("the server did not start: %v", <-r.done)
	}
	for key, want := range map[string]int{"": 401, "sk-wrong": 401, "sk-flag": 200, "sk-file": 200} {
		req, _ := http.NewRequest(http.MethodGet, r.http+"/v1/models", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
	if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Errorf("v2 without a key: %d %s", s, body)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("# none\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseFlags([]string{"--model-repository=" + repo, "--openai-api-key-file=" + empty}, io.Discard); err == nil || !strings.Contains(err.Error(), "--openai-api-key-file") {
		t.Errorf("a key file without keys: %v", err)
	}
}
