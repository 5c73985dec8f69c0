package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The embeddings mode: --service-kind=openai --endpoint=v1/embeddings (or
// embed, TEI's route) sends JSON bodies of texts instead of v2 infer
// requests, through the same senders, windows and reports. perf_analyzer's
// spelling is --service-kind=openai --endpoint=v1/chat/completions
// (triton-inference-server/perf_analyzer docs/benchmarking.md);
// --batch-size-text and --synthetic-input-tokens-mean/-stddev are
// genai-perf's (triton-inference-server/perf_analyzer genai-perf/README.md).

// maxTextBatch is OpenAI's limit of inputs in one embeddings request, which
// platforms/openai enforces too (docs/openai.md).
const maxTextBatch = 2048

// openaiEndpoints are the routes the embeddings mode measures.
var openaiEndpoints = []string{"v1/embeddings", "embed"}

// checkService reads --service-kind and, for openai, the embeddings
// flags, refusing the tensor flags that have no meaning there.
func (o *options) checkService(r *rawArgs) error {
	o.serviceKind = strings.ToLower(o.serviceKind)
	openaiOnly := []string{"endpoint", "endpoint-type", "batch-size-text", "synthetic-input-tokens-mean", "synthetic-input-tokens-stddev",
		"tokenizer", "num-dataset-entries", "random-seed"}
	switch o.serviceKind {
	case "triton":
		for _, f := range openaiOnly {
			if r.set[f] {
				return usagef("--%s applies to --service-kind=openai", f)
			}
		}
		return nil
	case "openai":
	case "tfserving", "torchserve", "triton_c_api":
		return usagef("--service-kind %s is not supported by inferd perf: use triton or openai", o.serviceKind)
	default:
		return usagef("--service-kind %q: want triton or openai", o.serviceKind)
	}
	if o.protocol != "http" {
		return usagef("--service-kind=openai speaks HTTP: -i %s does not apply", o.protocol)
	}
	o.endpoint = strings.Trim(o.endpoint, "/")
	switch r.endpointType {
	case "":
	case "embeddings":
		if o.endpoint != "" && o.endpoint != "v1/embeddings" {
			return usagef("--endpoint-type embeddings is --endpoint v1/embeddings, not %s", o.endpoint)
		}
		o.endpoint = "v1/embeddings"
	default:
		return usagef("--endpoint-type %q: inferd perf measures embeddings", r.endpointType)
	}
	if o.endpoint == "" {
		return usagef("--service-kind=openai needs --endpoint: %s", strings.Join(openaiEndpoints, " or "))
	}
	if !slices.Contains(openaiEndpoints, o.endpoint) {
		return usagef("--endpoint %q: inferd perf measures %s", o.endpoint, strings.Join(openaiEndpoints, " and "))
	}
	switch {
	case r.set["b"]:
		return usagef("-b: the embeddings routes take texts, not a batch dimension: use --batch-size-text")
	case r.set["x"]:
		return usagef("-x: the embeddings routes take no model version")
	case o.sharedMemory != "none":
		return usagef("--shared-memory: the embeddings routes take JSON bodies")
	}
	for _, f := range []string{"shape", "string-length", "string-data", "z", "binary", "protocol-json"} {
		if r.set[f] {
			return usagef("--%s applies to tensors (--service-kind=triton)", f)
		}
	}
	if o.textBatch < 1 || o.textBatch > maxTextBatch {
		return usagef("--batch-size-text %d: want 1 to %d", o.textBatch, maxTextBatch)
	}
	if o.tokensMean < 1 {
		return usagef("--synthetic-input-tokens-mean %d: must be greater than 0", o.tokensMean)
	}
	if o.tokensStddev < 0 {
		return usagef("--synthetic-input-tokens-stddev %d: must not be negative", o.tokensStddev)
	}
	if r.set["num-dataset-entries"] && (o.entries < 1 || o.entries > maxGenTexts/o.textBatch) {
		return usagef("--num-dataset-entries %d: want 1 to %d requests of %d texts (%d texts in all)", o.entries, max(1, maxGenTexts/o.textBatch), o.textBatch, maxGenTexts)
	}
	if o.entries == 0 {
		o.entries = max(1, min(defaultEntries, maxGenTexts/o.textBatch))
	}
	if slices.Contains(o.dataPaths, "zero") {
		return usagef("--input-data zero: the embeddings mode sends texts (random or a file)")
	}
	if len(o.dataPaths) > 0 && !slices.Contains(o.dataPaths, "random") {
		for _, f := range []string{"synthetic-input-tokens-mean", "synthetic-input-tokens-stddev", "num-dataset-entries", "random-seed"} {
			if r.set[f] {
				return usagef("--%s shapes generated texts, not --input-data's", f)
			}
		}
	}
	return nil
}

// openaiProtocol sends embeddings requests over the v2 HTTP protocol's
// transport and senders: only the URL and the bodies differ. Statistics
// are the v2 ones, which inferd keeps for these routes too (docs/openai.md);
// a server without them gets no server-side split.
type openaiProtocol struct {
	*httpProtocol
}

func newOpenAIProtocol(o *options, conns int) (*openaiProtocol, error) {
	h, err := newHTTPProtocol(o, conns)
	if err != nil {
		return nil, err
	}
	if h.url, err = url.Parse(o.baseURL + "/" + o.endpoint); err != nil {
		return nil, fmt.Errorf("--endpoint %s: %w", o.endpoint, err)
	}
	return &openaiProtocol{h}, nil
}

// model probes the route with one short text, so that an unknown model or
// a server without the route is named before any text is generated.
func (p *openaiProtocol) model(ctx context.Context) (*modelInfo, error) {
	body, err := p.body([]string{"hello"})
	if err != nil {
		return nil, err
	}
	if _, err := call(ctx, p.hc, http.MethodPost, p.url.String(), p.o.headers, body, 64<<20); err != nil {
		if rejected(err) {
			return nil, fmt.Errorf("model %q: POST /%s: %w", p.o.model, p.o.endpoint, err)
		}
		return nil, fmt.Errorf("POST /%s: %w", p.o.endpoint, err)
	}
	return &modelInfo{name: p.o.model}, nil
}

// prepare is the tensor path's; the embeddings mode prepares texts.
func (p *openaiProtocol) prepare(*modelInfo, [][]tensorData, *shmLayout) error {
	return errors.New("internal error: the embeddings mode sends texts, not tensors")
}

// body is one request's JSON: OpenAI's {model, input} or TEI's {inputs},
// with inferd's optional model field (docs/openai.md).
func (p *openaiProtocol) body(texts []string) ([]byte, error) {
	if p.o.endpoint == "embed" {
		return json.Marshal(struct {
			Model  string   `json:"model"`
			Inputs []string `json:"inputs"`
		}{p.o.model, texts})
	}
	return json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{p.o.model, texts})
}

// prepareTexts encodes one body per request.
func (p *openaiProtocol) prepareTexts(reqs [][]string) error {
	header := http.Header{"Content-Type": {"application/json"}}
	for name, values := range p.o.headers { // -H
		header[name] = values
	}
	p.bodies = make([]reqBody, 0, len(reqs))
	for _, texts := range reqs {
		b, err := p.body(texts)
		if err != nil {
			return fmt.Errorf("encoding a request: %w", err)
		}
		p.bodies = append(p.bodies, reqBody{data: b, header: header})
	}
	return nil
}

// check sends prepared request i once and reads the answer: one vector a
// text, and on OpenAI's route the usage the server counted, which must be
// tokens when the tool counted them (tokens < 0: not counted).
func (p *openaiProtocol) check(ctx context.Context, i, texts, tokens int) error {
	data, err := call(ctx, p.hc, http.MethodPost, p.url.String(), p.o.headers, p.bodies[i].data, 1<<30)
	if err != nil {
		if rejected(err) {
			return fmt.Errorf("the server rejects the request: %w", err)
		}
		return fmt.Errorf("POST /%s: %w", p.o.endpoint, err)
	}
	got, usage, err := countVectors(p.o.endpoint, data)
	if err != nil {
		return fmt.Errorf("POST /%s: %w", p.o.endpoint, err)
	}
	if got != texts {
		return fmt.Errorf("POST /%s: the server answered %d vectors for %d texts", p.o.endpoint, got, texts)
	}
	if usage >= 0 && tokens >= 0 && usage != tokens {
		return fmt.Errorf("POST /%s: the server counted %d prompt tokens where the texts have %d: is the tokenizer the model's?", p.o.endpoint, usage, tokens)
	}
	return nil
}

// countVectors reads an embeddings answer: how many vectors, and OpenAI's
// usage.prompt_tokens (-1 on TEI's route, which reports none).
func countVectors(endpoint string, data []byte) (vectors, usage int, err error) {
	if endpoint == "embed" {
		var vs []json.RawMessage
		if err := json.Unmarshal(data, &vs); err != nil {
			return 0, 0, fmt.Errorf("decoding the answer: %w", err)
		}
		return len(vs), -1, nil
	}
	var a struct {
		Data  []json.RawMessage `json:"data"`
		Usage *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return 0, 0, fmt.Errorf("decoding the answer: %w", err)
	}
	if a.Usage == nil {
		return len(a.Data), -1, nil
	}
	return len(a.Data), a.Usage.PromptTokens, nil
}

// openTexts prepares the embeddings mode's requests, checks one answer and
// makes the measurer, as open does for tensors.
func (s *session) openTexts(ctx context.Context, p *openaiProtocol) error {
	set, err := buildTexts(ctx, s.o, p.hc, s.warn)
	if err != nil {
		return err
	}
	s.o.inputData = set.desc
	if err := p.prepareTexts(set.reqs); err != nil {
		return err
	}
	tokens := -1
	if set.tokens != nil {
		tokens = set.tokens[0]
	}
	if err := p.check(ctx, 0, len(set.reqs[0]), tokens); err != nil {
		return err
	}
	s.send = &sender{proto: p, n: uint64(len(set.reqs))}
	s.m = s.newMeasurer()
	return nil
}
