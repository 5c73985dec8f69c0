package perf

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/openai"
	"github.com/inferd/inferd/repo/tokenizer"
)

// embedderDir is the example embedding model: a BERT-like encoder with a
// 78-word WordPiece tokenizer.json, max_batch_size 8, 128 positions.
var embedderDir = filepath.Join("..", "..", "..", "examples", "model_repository", "embedder")

// startEmbedder serves the example embedder with the v2 and OpenAI/TEI
// routes on a real listener; it returns the base URL.
func startEmbedder(t *testing.T, opts openai.Options) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.CopyFS(filepath.Join(root, "embedder"), os.DirFS(embedderDir)))
	srv := servertest.Start(t, servertest.Options{Repo: root})
	api := httpapi.New(srv, httpapi.Options{})
	openai.New(api, opts).Mount(api.Router())
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestEmbeddings runs the embeddings mode against one server; the
// subtests only read it.
func TestEmbeddings(t *testing.T) {
	base := startEmbedder(t, openai.Options{})
	t.Run("run", func(t *testing.T) { testEmbeddingsRun(t, base) })
	t.Run("lengths", func(t *testing.T) { testGeneratedTokenLengths(t, base) })
	t.Run("input-data", func(t *testing.T) { testEmbeddingsInputData(t, base) })
	t.Run("errors", func(t *testing.T) { testEmbeddingsErrors(t, base) })
}

// TestEmbeddingsAPIKey: -H carries the key to the route and to /tokenize.
func TestEmbeddingsAPIKey(t *testing.T) {
	keys, err := openai.NewKeys([]string{"k1"}, nil, 0, nil)
	must(t, err)
	base := startEmbedder(t, openai.Options{Keys: keys})
	args := append([]string{"-m", "embedder", "-u", base, "--service-kind=openai", "--endpoint=embed", "--request-count", "5"}, fast...)
	code, out, stderr := runPerf(t, append(args, "-H", "Authorization: Bearer k1")...)
	if code != 0 || !strings.Contains(out, "counted with the server's /tokenize") {
		t.Errorf("with the key: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	code, _, stderr = runPerf(t, args...)
	if code != 1 || !strings.Contains(stderr, "HTTP 401") {
		t.Errorf("without the key: exit %d, stderr:\n%s", code, stderr)
	}
}

// testEmbeddingsRun measures both routes with generated texts and checks
// the counts the reports give against what the server saw.
func testEmbeddingsRun(t *testing.T, base string) {
	for _, tc := range []struct {
		name, endpoint string
		batch          int
		extra          []string
	}{
		{"openai", "v1/embeddings", 3, []string{"--concurrency-range", "2"}},
		{"tei", "/embed", 1, []string{"--concurrency-range", "2", "--tokenizer", embedderDir}},
		{"rate", "v1/embeddings", 2, []string{"--request-rate-range", "200", "--request-distribution", "poisson"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			jsonPath, csvPath, htmlPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.html")
			args := append([]string{"-m", "embedder", "-u", base, "--service-kind=openai", "--endpoint=" + tc.endpoint,
				"--batch-size-text", strconv.Itoa(tc.batch), "--synthetic-input-tokens-mean", "12",
				"--json", jsonPath, "-f", csvPath, "--report", htmlPath}, fast...)
			code, out, stderr := runPerf(t, append(args, tc.extra...)...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			for _, want := range []string{"Service Kind: OPENAI", "Text throughput: ", "texts/sec", "synthetic: " + strconv.Itoa(defaultEntries*tc.batch) + " texts of 12±0 tokens, mean 12.0 tokens (counted with "} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			rep, raw := readReport(t, jsonPath)
			if len(rep.Results) != 1 || rep.Endpoint != strings.Trim(tc.endpoint, "/") || rep.TextsPerRequest != tc.batch {
				t.Fatalf("report: %s", raw)
			}
			r := rep.Results[0]
			if r.Requests == 0 || r.Errors != 0 || r.Throughput <= 0 {
				t.Fatalf("result: %s", raw)
			}
			if diff := r.TextsPerSec - r.Throughput*float64(tc.batch); diff > 1e-6 || diff < -1e-6 {
				t.Errorf("texts/s %v, want %d × %v", r.TextsPerSec, tc.batch, r.Throughput)
			}
			// inferd counts these calls in the v2 statistics: one
			// execution of 3 rows a call here (max_batch_size 8).
			if r.Server == nil || r.Server.Requests == 0 {
				t.Errorf("no server split: %s", raw)
			} else if r.Server.InferenceCount != int64(tc.batch)*r.Server.Requests {
				t.Errorf("server: %d inferences for %d requests of %d texts", r.Server.InferenceCount, r.Server.Requests, tc.batch)
			}
			if page, err := os.ReadFile(htmlPath); err != nil || !strings.Contains(string(page), "embedder") {
				t.Errorf("--report: %v", err)
			}
			rows := readCSV(t, csvPath)
			if len(rows) != 1 || rows[0]["Texts/Second"] == "" || rows[0]["Concurrency"] != "2" && rows[0]["Request Rate"] != "200" {
				t.Errorf("CSV rows %v", rows)
			}
		})
	}
}

// testGeneratedTokenLengths checks generated texts with the model's
// tokenizer: each has the asked length, special tokens included, whether
// the server or the file counted them; with a spread, the lengths vary
// around the mean.
func testGeneratedTokenLengths(t *testing.T, base string) {
	tok, err := tokenizer.Load(filepath.Join(embedderDir, "tokenizer.json"))
	must(t, err)
	for _, tc := range []struct {
		name         string
		mean, stddev int
		tokenizer    string
	}{
		{"server", 20, 0, ""},
		{"file", 7, 0, embedderDir},
		{"spread", 40, 10, filepath.Join(embedderDir, "tokenizer.json")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{model: "embedder", baseURL: base, endpoint: "v1/embeddings", textBatch: 4, entries: 50,
				tokensMean: tc.mean, tokensStddev: tc.stddev, tokenizerPath: tc.tokenizer}
			var warned []string
			set, err := buildTexts(t.Context(), o, newHTTPClient(1), func(s string) { warned = append(warned, s) })
			must(t, err)
			if len(warned) > 0 {
				t.Fatalf("warnings: %v", warned)
			}
			if len(set.reqs) != 50 || len(set.tokens) != len(set.reqs) {
				t.Fatalf("%d requests, %d counts", len(set.reqs), len(set.tokens))
			}
			lengths := map[int]int{}
			for k, req := range set.reqs {
				sum := 0
				for _, text := range req {
					enc, err := tok.Encode(text, true)
					must(t, err)
					lengths[len(enc.IDs)]++
					sum += len(enc.IDs)
					if tc.stddev == 0 && len(enc.IDs) != tc.mean {
						t.Fatalf("%q: %d tokens, want %d", text, len(enc.IDs), tc.mean)
					}
				}
				if sum != set.tokens[k] {
					t.Errorf("request %d: %d tokens, counted %d", k, sum, set.tokens[k])
				}
			}
			if tc.stddev > 0 && (len(lengths) < 10 || lengths[tc.mean] == len(set.reqs)*4) {
				t.Errorf("lengths do not spread: %v", lengths)
			}
		})
	}
}

// testEmbeddingsInputData sends a file's texts; usage counted by the
// server must match the tokenizer's count (check), and a bad file is
// named.
func testEmbeddingsInputData(t *testing.T, base string) {
	dir := t.TempDir()
	good := filepath.Join(dir, "texts.jsonl")
	must(t, os.WriteFile(good, []byte(`{"text": "the quick brown fox"}`+"\n"+`{"text": "paris is the capital of france"}`+"\n"), 0o644))
	bad := filepath.Join(dir, "bad.json")
	must(t, os.WriteFile(bad, []byte(`["a", ""]`), 0o644))
	jsonPath := filepath.Join(dir, "r.json")
	code, out, stderr := runPerf(t, append([]string{"-m", "embedder", "-u", base, "--service-kind=openai", "--endpoint=v1/embeddings",
		"--input-data", good, "--batch-size-text", "2", "--request-count", "10", "--json", jsonPath}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(out, "texts.jsonl: 2 texts, mean 7.0 tokens (counted with the server's /tokenize)") {
		t.Errorf("stdout lacks the input description:\n%s", out)
	}
	rep, raw := readReport(t, jsonPath)
	if len(rep.Results) != 1 || rep.Results[0].Requests < 10 {
		t.Errorf("report: %s", raw)
	}
	// Every other request is too long for the model: counted as errors
	// and named, as the v2 mode does, without stopping the run.
	mixed := filepath.Join(dir, "mixed.json")
	must(t, os.WriteFile(mixed, []byte(`["hello world", "`+strings.Repeat("cat ", 200)+`"]`), 0o644))
	code, out, stderr = runPerf(t, append([]string{"-m", "embedder", "-u", base, "--service-kind=openai", "--endpoint=v1/embeddings",
		"--input-data", mixed, "--request-count", "20", "--json", jsonPath}, fast...)...)
	rep, raw = readReport(t, jsonPath)
	if code != 0 || len(rep.Results) != 1 || rep.Results[0].Errors < 5 || rep.Results[0].Errors == rep.Results[0].Requests ||
		!strings.Contains(stderr, "requests failed, last: HTTP 400: ") || !strings.Contains(out, "mixed.json: 2 texts, mean ") {
		t.Errorf("exit %d, report %s\nstdout:\n%s\nstderr:\n%s", code, raw, out, stderr)
	}
	code, _, stderr = runPerf(t, "-m", "embedder", "-u", base, "--service-kind=openai", "--endpoint=embed", "--input-data", bad)
	if code != 2 || !strings.Contains(stderr, "bad.json: text 2 is empty") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
}

// testEmbeddingsErrors: what the server refuses is named before any
// measuring.
func testEmbeddingsErrors(t *testing.T, base string) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown model", []string{"-m", "nope", "--endpoint", "v1/embeddings"},
			"model \"nope\": POST /v1/embeddings: HTTP 404: The model `nope` does not exist or is not ready."},
		{"unknown model tei", []string{"-m", "nope", "--endpoint", "embed"}, "model \"nope\": POST /embed: HTTP 4"},
		{"too long", []string{"-m", "embedder", "--endpoint", "v1/embeddings", "--synthetic-input-tokens-mean", "200"},
			"the server rejects the request: HTTP 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runPerf(t, append([]string{"-u", base, "--service-kind=openai"}, append(tc.args, fast...)...)...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, stderr, tc.want)
			}
		})
	}
}

// TestServiceKindFlags checks the embeddings flags' validation.
func TestServiceKindFlags(t *testing.T) {
	base := []string{"-m", "m", "--service-kind=openai", "--endpoint=v1/embeddings"}
	for _, tc := range []struct {
		args []string
		want string // "" : accepted
	}{
		{base, ""},
		{[]string{"-m", "m", "--service-kind=OpenAI", "--endpoint=/embed/"}, ""},
		{[]string{"-m", "m", "--service-kind=openai"}, "needs --endpoint"},
		{[]string{"-m", "m", "--service-kind=openai", "--endpoint=v1/chat/completions"}, "measures v1/embeddings and embed"},
		{[]string{"-m", "m", "--service-kind=tfserving"}, "not supported"},
		{[]string{"-m", "m", "--service-kind=x"}, "want triton or openai"},
		{[]string{"-m", "m", "--endpoint=embed"}, "--endpoint applies to --service-kind=openai"},
		{[]string{"-m", "m", "--batch-size-text", "2"}, "--batch-size-text applies to --service-kind=openai"},
		{append([]string{"-i", "grpc"}, base...), "speaks HTTP"},
		{append([]string{"-b", "2"}, base...), "use --batch-size-text"},
		{append([]string{"-x", "1"}, base...), "no model version"},
		{append([]string{"--shape", "a:1"}, base...), "--shape applies to tensors"},
		{append([]string{"--shared-memory", "system"}, base...), "JSON bodies"},
		{append([]string{"--batch-size-text", "0"}, base...), "want 1 to 2048"},
		{append([]string{"--batch-size-text", "2049"}, base...), "want 1 to 2048"},
		{append([]string{"--synthetic-input-tokens-mean", "0"}, base...), "greater than 0"},
		{append([]string{"--synthetic-input-tokens-stddev", "-1"}, base...), "must not be negative"},
		{append([]string{"--input-data", "zero"}, base...), "random or a file"},
		{append([]string{"--input-data", "f.json", "--synthetic-input-tokens-mean", "5"}, base...), "not --input-data's"},
		{append([]string{"--input-data", "f.json", "--random-seed", "5"}, base...), "not --input-data's"},
		{[]string{"-m", "m", "--service-kind=openai", "--endpoint-type=embeddings"}, ""},
		{[]string{"-m", "m", "--service-kind=openai", "--endpoint-type=rankings"}, "measures embeddings"},
		{[]string{"-m", "m", "--service-kind=openai", "--endpoint-type=embeddings", "--endpoint=embed"}, "not embed"},
		{append([]string{"--num-dataset-entries", "0"}, base...), "want 1 to 16384 requests"},
		{append([]string{"--num-dataset-entries", "9", "--batch-size-text", "2048"}, base...), "want 1 to 8 requests of 2048 texts"},
		{[]string{"-m", "m", "--random-seed", "1"}, "--random-seed applies to --service-kind=openai"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseArgs(tc.args, &strings.Builder{})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if o.endpoint != strings.Trim(o.endpoint, "/") || o.serviceKind != "openai" {
					t.Errorf("endpoint %q, service kind %q", o.endpoint, o.serviceKind)
				}
				return
			}
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want a usage error with %q", err, tc.want)
			}
		})
	}
}

// TestParseTexts covers the two file shapes and their refusals.
func TestParseTexts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{`["a", "b c"]`, []string{"a", "b c"}, ""},
		{"{\"text\": \"x\"}\n\n{\"text\": \"y\", \"id\": 2}\n", []string{"x", "y"}, ""},
		{``, nil, "no texts"},
		{`[]`, nil, "no texts"},
		{`[1]`, nil, "JSON array of strings"},
		{`{"txt": "x"}`, nil, "line 1"},
		{"{\"text\": \"x\"}\nnot json", nil, "line 2"},
		{`[""]`, nil, "text 1 is empty"},
	} {
		got, err := parseTexts([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: %q, %v", tc.in, got, err)
		}
	}
}

func FuzzParseTexts(f *testing.F) {
	for _, s := range []string{`["a", "b"]`, "{\"text\": \"x\"}\n{\"text\": \"y\"}", `[""]`, `{"text": null}`, "", "["} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		texts, err := parseTexts(data)
		if err == nil && len(texts) == 0 {
			t.Fatal("no error and no texts")
		}
		for _, s := range texts {
			if s == "" {
				t.Fatal("an empty text passed")
			}
		}
	})
}

// TestEmbeddingsAnswerCheck runs against a fake server without /tokenize
// whose answers are wrong in the ways check looks for: the lengths go
// unchecked (with a warning), and a short or miscounted answer fails the
// run before measuring.
func TestEmbeddingsAnswerCheck(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
		code               int
		tokenize           bool // the fake has /tokenize: one token a word
	}{
		{"ok", `{"data": [{}, {}], "usage": {"prompt_tokens": 99}}`, "", 0, false},
		{"short", `{"data": [{}], "usage": {"prompt_tokens": 8}}`, "the server answered 1 vectors for 2 texts", 1, false},
		{"not json", `[`, "decoding the answer", 1, false},
		{"counted", `{"data": [{}, {}], "usage": {"prompt_tokens": 10}}`, "", 0, true},
		{"miscounted", `{"data": [{}, {}], "usage": {"prompt_tokens": 12}}`, "the server counted 12 prompt tokens where the texts have 10", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/tokenize" && tc.tokenize {
					var req struct{ Inputs []string }
					_ = json.NewDecoder(r.Body).Decode(&req)
					lists := make([][]struct{}, len(req.Inputs))
					for i, in := range req.Inputs {
						lists[i] = make([]struct{}, len(strings.Fields(in)))
					}
					_ = json.NewEncoder(w).Encode(lists)
					return
				}
				if r.URL.Path != "/v1/embeddings" {
					http.NotFound(w, r)
					return
				}
				var req struct{ Input []string }
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Input) != 1 && len(req.Input) != 2 {
					http.Error(w, `{"error": {"message": "bad body"}}`, http.StatusBadRequest)
					return
				}
				if len(req.Input) == 1 { // the probe
					io.WriteString(w, `{"data": [{}]}`)
					return
				}
				io.WriteString(w, tc.answer)
			}))
			defer ts.Close()
			code, out, stderr := runPerf(t, append([]string{"-m", "m", "-u", ts.URL, "--service-kind=openai", "--endpoint=v1/embeddings",
				"--batch-size-text", "2", "--synthetic-input-tokens-mean", "5", "--num-dataset-entries", "64", "--request-count", "4"}, fast...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "token lengths are not checked") == tc.tokenize {
				t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant %q", code, out, stderr, tc.want)
			}
			if tc.code == 0 && !tc.tokenize && !strings.Contains(out, "synthetic: 128 texts of 5±0 words (token lengths unchecked)") {
				t.Errorf("stdout:\n%s", out)
			}
		})
	}
}
