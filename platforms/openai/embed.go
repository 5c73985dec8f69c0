package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/textmodel"
)

// embedCall is an embeddings call once decoded.
type embedCall struct {
	t         target
	in        inputs
	opts      encodeOpts
	dims      int // keep the first dims components; 0: all
	normalize bool
}

// embed tokenizes c's inputs on the caller's goroutine (in a
// --http-thread-count slot, as /infer decodes), runs them as one core
// request per max_batch_size rows, pools and finishes the vectors. tokens
// counts the inputs' tokens, special tokens included.
func (s *Server) embed(r *http.Request, c embedCall) (vecs [][]float32, tokens int, err error) {
	d := c.t.desc
	if c.dims < 0 || c.dims > 0 && d.Hidden > 0 && int64(c.dims) > d.Hidden {
		return nil, 0, invalid("dimensions", "`dimensions` must be between 1 and %d for model `%s`, not %d", d.Hidden, c.t.name, c.dims)
	}
	release := s.api.Work()
	var rows []row
	switch {
	case d.Kind == textmodel.EmbeddingText && c.in.ids != nil:
		err = invalid(c.opts.param, "model `%s` takes text, not token ids", c.t.name)
	case d.Kind == textmodel.EmbeddingText:
		tokens, err = countTokens(d, c.in.texts)
	case c.in.ids != nil:
		rows, tokens, err = idRows(d, c.in.ids, c.opts)
	default:
		rows, tokens, err = encodeTexts(d, c.in.texts, "", false, c.opts)
	}
	release()
	if err != nil {
		return nil, 0, err
	}
	n := c.in.len()
	vecs = make([][]float32, n)
	parts := chunks(n, d.MaxBatch)
	var order []int // rows sorted by length (PaddedBatch); nil: as given
	if d.PaddedBatch && d.Kind != textmodel.EmbeddingText && n > 1 {
		order, parts = lengthGroups(rows, d.MaxBatch)
		sorted := make([]row, n)
		for k, i := range order {
			sorted[k] = rows[i]
		}
		rows = sorted
	}
	reqs := make([]*core.InferRequest, len(parts))
	for i, p := range parts {
		if d.Kind == textmodel.EmbeddingText {
			reqs[i] = textRequest(d, c.in.texts[p[0]:p[1]])
		} else {
			reqs[i], _ = tokenRequest(d, rows[p[0]:p[1]])
		}
	}
	err = s.runAll(r, c.t, reqs, func(i int, resp *core.InferResponse) error {
		lo, hi := parts[i][0], parts[i][1]
		if d.OutputTokens {
			t, err := output(resp, d.Output, hi-lo, 3)
			if err == nil {
				poolRows(t, rows[lo:hi], d.Pooling, vecs, lo)
			}
			return err
		}
		t, err := output(resp, d.Output, hi-lo, 2)
		if err == nil {
			pooledRows(t, vecs, lo)
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if order != nil {
		byInput := make([][]float32, n)
		for k, i := range order {
			byInput[i] = vecs[k]
		}
		vecs = byInput
	}
	if c.dims > len(vecs[0]) {
		return nil, 0, invalid("dimensions", "`dimensions` must be between 1 and %d for model `%s`, not %d", len(vecs[0]), c.t.name, c.dims)
	}
	for i, v := range vecs {
		vecs[i] = finish(v, c.dims, c.normalize)
	}
	return vecs, tokens, nil
}

// countTokens counts texts' tokens with the folder's tokenizer.json, for
// the usage of a model that tokenizes itself; 0 without one.
func countTokens(d *textmodel.Model, texts []string) (int, error) {
	if d.Tokenizer == nil {
		return 0, nil
	}
	tok, err := d.Tokenizer.WithTruncation(nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range texts {
		enc, err := tok.Encode(t, true)
		if err != nil {
			return 0, err
		}
		n += enc.Len()
	}
	return n, nil
}

// embeddingsRequest is OpenAI's (openai/openai-python
// types/embedding_create_params.py).
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// embeddings is POST /v1/embeddings.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) error {
	var req embeddingsRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return invalid("encoding_format", "`encoding_format` must be float or base64, not %q", req.EncodingFormat)
	}
	dims := 0
	if req.Dimensions != nil {
		if dims = *req.Dimensions; dims < 1 {
			return invalid("dimensions", "`dimensions` must be at least 1, not %d", dims)
		}
	}
	in, err := parseInputs(req.Input, "input")
	if err != nil {
		return err
	}
	t, err := s.resolve(req.Model, textmodel.EmbeddingTokens, textmodel.EmbeddingText)
	if err != nil {
		return err
	}
	vecs, tokens, err := s.embed(r, embedCall{t: t, in: in, opts: encodeOpts{param: "input", fam: openAI}, dims: dims, normalize: true})
	if err != nil {
		return err
	}
	release := s.api.Work()
	defer release()
	out := make([]byte, 0, 64+len(vecs)*(len(vecs[0])*12+48))
	out = append(out, `{"object":"list","data":[`...)
	for i, v := range vecs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"object":"embedding","index":`...)
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, `,"embedding":`...)
		if b64 {
			out = appendBase64(out, v)
		} else if out, err = appendFloats(out, v); err != nil {
			return err
		}
		out = append(out, '}')
	}
	out = append(out, `],"model":`...)
	name, _ := json.Marshal(t.name)
	out = append(out, name...)
	out = fmt.Appendf(out, `,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, tokens, tokens)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// appendFloats appends v as a JSON array; a NaN or infinity (which JSON
// cannot carry) is an error.
func appendFloats(out []byte, v []float32) ([]byte, error) {
	out = append(out, '[')
	for j, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("the model's output holds %v, which JSON cannot carry", x)
		}
		if j > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendFloat(out, float64(x), 'g', -1, 32)
	}
	return append(out, ']'), nil
}

// appendBase64 appends v as a JSON string of its little-endian float32
// bytes in standard base64, as the openai SDKs decode it
// (np.frombuffer(base64.b64decode(data), dtype="float32")).
func appendBase64(out []byte, v []float32) []byte {
	raw := make([]byte, 4*len(v))
	for i, x := range v {
		bits := math.Float32bits(x)
		raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, raw)
	return append(out, '"')
}
