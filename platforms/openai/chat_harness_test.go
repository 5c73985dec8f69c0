package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// chatTokenizer is the tiny WordPiece tokenizer.json gen_plain counts
// usage with.
var chatTokenizer = filepath.Join("..", "..", "repo", "textmodel", "testdata", "tokenizer.json")

// startChat serves the generation test models (testdata/chat) on a real
// listener, with real Python workers: gen_stream (decoupled, the vLLM
// backend's inputs, counts its own tokens), gen_plain (one response,
// batching, usage from tokenizer.json), gen_notpl (gen_plain without a
// chat template), gen_runaway (gen_plain with a template that recurses
// without end) and simple (an ONNX model that is no generator). It
// returns the base URL and the repository root.
func startChat(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	servertest.Must(t, os.CopyFS(root, os.DirFS(filepath.Join("testdata", "chat"))))
	tok, err := os.ReadFile(chatTokenizer)
	servertest.Must(t, err)
	servertest.Must(t, os.WriteFile(filepath.Join(root, "gen_plain", "tokenizer.json"), tok, 0o644))
	// gen_notpl: gen_plain's model.py without a template.
	servertest.Must(t, os.MkdirAll(filepath.Join(root, "gen_notpl", "1"), 0o755))
	cfg, err := os.ReadFile(filepath.Join(root, "gen_plain", "config.pbtxt"))
	servertest.Must(t, err)
	servertest.Must(t, os.WriteFile(filepath.Join(root, "gen_notpl", "config.pbtxt"), bytes.Replace(cfg, []byte(`"gen_plain"`), []byte(`"gen_notpl"`), 1), 0o644))
	py, err := os.ReadFile(filepath.Join(root, "gen_plain", "1", "model.py"))
	servertest.Must(t, err)
	servertest.Must(t, os.WriteFile(filepath.Join(root, "gen_notpl", "1", "model.py"), py, 0o644))
	// gen_runaway: gen_plain with a template that recurses without end.
	servertest.Must(t, os.MkdirAll(filepath.Join(root, "gen_runaway", "1"), 0o755))
	servertest.Must(t, os.WriteFile(filepath.Join(root, "gen_runaway", "config.pbtxt"), bytes.Replace(cfg, []byte(`"gen_plain"`), []byte(`"gen_runaway"`), 1), 0o644))
	servertest.Must(t, os.WriteFile(filepath.Join(root, "gen_runaway", "1", "model.py"), py, 0o644))
	servertest.Must(t, os.WriteFile(filepath.Join(root, "gen_runaway", "chat_template.jinja"), []byte(`{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`), 0o644))
	servertest.WriteModel(t, filepath.Join(root, "simple"), servertest.Model{Config: servertest.SimpleConfig("simple"),
		ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))})

	b := python.New(python.Options{Executable: servertest.Python(t)})
	t.Cleanup(func() { _ = b.Close() })
	srv := servertest.Start(t, servertest.Options{Repo: root, Backends: []core.Backend{b}})
	api := httpapi.New(srv, httpapi.Options{})
	New(api, Options{}).Mount(api.Router())
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return ts.URL, root
}

// post sends body as JSON and returns the status and the body.
func post(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if s, ok := body.(string); ok {
		rd = strings.NewReader(s)
	} else {
		b, err := json.Marshal(body)
		servertest.Must(t, err)
		rd = bytes.NewReader(b)
	}
	resp, err := http.Post(url, "application/json", rd)
	servertest.Must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	servertest.Must(t, err)
	return resp.StatusCode, data
}

// events posts body and reads the server-sent events: each data line's
// payload, "[DONE]" included. It fails the test unless the answer is a
// 200 event stream whose every event is one data line and a blank line.
func events(t *testing.T, url string, body any) []string {
	t.Helper()
	b, err := json.Marshal(body)
	servertest.Must(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	servertest.Must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not a data line (events so far %q)", line, out)
		}
		out = append(out, data)
		if !sc.Scan() || sc.Text() != "" {
			t.Fatalf("event %q is not followed by a blank line", data)
		}
	}
	servertest.Must(t, sc.Err())
	return out
}

// chunkJSON is a streamed chunk as the openai SDKs read it.
type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

func parseChunk(t *testing.T, ev string) (chunkJSON, map[string]json.RawMessage) {
	t.Helper()
	var c chunkJSON
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(ev), &c); err != nil {
		t.Fatalf("event %q: %v", ev, err)
	}
	servertest.Must(t, json.Unmarshal([]byte(ev), &raw))
	return c, raw
}

// apiError is OpenAI's error body.
type apiError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}
