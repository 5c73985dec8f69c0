package openai

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// The test encoders' sizes: the fixture tokenizer's 39 ids, 4 dims.
const (
	vocab  = 39
	hidden = 4
)

// fixture is the tiny WordPiece tokenizer.json the encoders share.
var fixture = filepath.Join("..", "..", "repo", "textmodel", "testdata", "tokenizer.json")

// testModel is one model folder: config, ONNX file, extra files.
type testModel struct {
	config string
	onnx   []byte
	files  map[string]string
}

// encoderModels are the models of the encoder tests: enc (token
// embeddings, the server pools), pooled (pooled in the model), cls (enc
// with CLS pooling), rerank (a cross-encoder), and simple (no text model).
func encoderModels(t testing.TB) map[string]testModel {
	tok, err := os.ReadFile(fixture)
	servertest.Must(t, err)
	withTok := func(extra map[string]string) map[string]string {
		m := map[string]string{"tokenizer.json": string(tok), "config.json": `{"architectures": ["BertModel"], "max_position_embeddings": 16}`}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	enc := onnxbuild.Must(onnxbuild.TextEncoder(vocab, hidden))
	return map[string]testModel{
		"enc":    {onnxbuild.TextEncoderConfig("enc", "last_hidden_state", "[ -1, 4 ]"), enc, withTok(nil)},
		"pooled": {onnxbuild.TextEncoderConfig("pooled", "sentence_embedding", "[ 4 ]"), onnxbuild.Must(onnxbuild.TextEncoderPooled(vocab, hidden)), withTok(nil)},
		"cls": {onnxbuild.TextEncoderConfig("cls", "last_hidden_state", "[ -1, 4 ]"), enc,
			withTok(map[string]string{"1_Pooling/config.json": `{"word_embedding_dimension": 4, "pooling_mode_cls_token": true}`})},
		"rerank": {onnxbuild.TextEncoderConfig("rerank", "logits", "[ 1 ]"), onnxbuild.Must(onnxbuild.CrossEncoder(vocab, hidden)),
			withTok(map[string]string{"config.json": `{"architectures": ["BertForSequenceClassification"], "id2label": {"0": "LABEL_0"}, "max_position_embeddings": 16}`})},
		"simple": {servertest.SimpleConfig("simple"), onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)), nil},
	}
}

// startServer serves models on a real listener with opts, beside ONNX
// Runtime's backend the in-Go backends given; it returns the base URL.
func startServer(t testing.TB, models map[string]testModel, opts Options, backends ...core.Backend) string {
	t.Helper()
	base, _ := startCore(t, models, opts, backends...)
	return base
}

// startCore is startServer that also returns the core.
func startCore(t testing.TB, models map[string]testModel, opts Options, backends ...core.Backend) (string, *core.Server) {
	t.Helper()
	root := t.TempDir()
	for name, m := range models {
		dir := filepath.Join(root, name)
		servertest.WriteModel(t, dir, servertest.Model{Config: m.config, ONNX: m.onnx})
		for f, content := range m.files {
			p := filepath.Join(dir, filepath.FromSlash(f))
			servertest.Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			servertest.Must(t, os.WriteFile(p, []byte(content), 0o644))
		}
	}
	srv := servertest.Start(t, servertest.Options{Repo: root, Backends: backends})
	api := httpapi.New(srv, httpapi.Options{})
	New(api, opts).Mount(api.Router())
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return ts.URL, srv
}

// reply is one answer: status, body, headers.
type reply struct {
	status int
	body   []byte
	header http.Header
}

// do sends method url with body (nil: none) and header key=value pairs.
func do(t testing.TB, method, url string, body any, header ...string) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		data, err := json.Marshal(b)
		servertest.Must(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	servertest.Must(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	servertest.Must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	servertest.Must(t, err)
	return reply{resp.StatusCode, data, resp.Header}
}

// decodeJSON decodes r's body into v, failing the test otherwise.
func (r reply) decodeJSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("status %d, body %s: %v", r.status, r.body, err)
	}
}

// openAIErr is OpenAI's error body.
type openAIErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// teiErr is TEI's error body.
type teiErr struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}
