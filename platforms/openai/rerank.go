package openai

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/textmodel"
)

// ranked is one document's logit.
type ranked struct {
	index int
	logit float32
}

// rank scores (query, text) pairs with the cross-encoder t, one row per
// text through the tokenizer's pair template, and returns them highest
// first (ties in input order) with the pairs' token count.
func (s *Server) rank(r *http.Request, t target, query string, texts []string, opts encodeOpts) ([]ranked, int, error) {
	switch {
	case query == "":
		return nil, 0, empty("query", "`query` cannot be empty")
	case len(texts) == 0:
		return nil, 0, empty(opts.param, "`%s` cannot be empty", opts.param)
	case len(texts) > MaxItems:
		return nil, 0, invalid(opts.param, "`%s` has %d items; at most %d are allowed", opts.param, len(texts), MaxItems)
	}
	d := t.desc
	release := s.api.Work()
	rows, tokens, err := encodeTexts(d, texts, query, true, opts)
	release()
	if err != nil {
		return nil, 0, err
	}
	out := make([]ranked, len(texts))
	parts := chunks(len(rows), d.MaxBatch)
	reqs := make([]*core.InferRequest, len(parts))
	for i, p := range parts {
		reqs[i], _ = tokenRequest(d, rows[p[0]:p[1]])
	}
	err = s.runAll(r, t, reqs, func(i int, resp *core.InferResponse) error {
		lo, hi := parts[i][0], parts[i][1]
		o, err := output(resp, d.Output, hi-lo, 2)
		if err != nil {
			return err
		}
		if o.Shape[1] != 1 {
			return fmt.Errorf("output '%s' has shape %v: a reranker gives one logit per row", d.Output, o.Shape)
		}
		for j := range hi - lo {
			out[lo+j] = ranked{index: lo + j, logit: f32(o.Data, j)}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	slices.SortStableFunc(out, func(a, b ranked) int {
		switch {
		case a.logit > b.logit:
			return -1
		case a.logit < b.logit:
			return 1
		}
		return 0
	})
	return out, tokens, nil
}

// rerankRequest is the Jina/Cohere shape as vLLM serves it
// (vllm-project/vllm protocol.py RerankRequest); documents may be strings
// or {"text": ...} objects.
type rerankRequest struct {
	Model           string            `json:"model"`
	Query           string            `json:"query"`
	Documents       []json.RawMessage `json:"documents"`
	TopN            int               `json:"top_n"`
	ReturnDocuments *bool             `json:"return_documents"`
}

type rerankDocument struct {
	Text string `json:"text"`
}

type rerankResult struct {
	Index          int             `json:"index"`
	RelevanceScore float64         `json:"relevance_score"`
	Document       *rerankDocument `json:"document,omitempty"`
}

// rerank is POST /v1/rerank → {id, model, results: [{index,
// relevance_score, document?}], usage: {total_tokens}}, highest score
// first, the top top_n (0: all); documents are returned unless
// return_documents is false (vLLM always returns them).
func (s *Server) rerank(w http.ResponseWriter, r *http.Request) error {
	var req rerankRequest
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if req.TopN < 0 {
		return invalid("top_n", "`top_n` must not be negative")
	}
	texts := make([]string, len(req.Documents))
	for i, raw := range req.Documents {
		if json.Unmarshal(raw, &texts[i]) != nil {
			var doc rerankDocument
			if err := json.Unmarshal(raw, &doc); err != nil {
				return invalid("documents", "`documents[%d]` must be a string or {\"text\": string}", i)
			}
			texts[i] = doc.Text
		}
		if texts[i] == "" {
			return empty("documents", "`documents[%d]` cannot be empty", i)
		}
	}
	t, err := s.resolve(req.Model, textmodel.Reranker)
	if err != nil {
		return err
	}
	ranks, tokens, err := s.rank(r, t, req.Query, texts, encodeOpts{param: "documents", fam: openAI})
	if err != nil {
		return err
	}
	if req.TopN > 0 && req.TopN < len(ranks) {
		ranks = ranks[:req.TopN]
	}
	results := make([]rerankResult, len(ranks))
	for i, rk := range ranks {
		results[i] = rerankResult{Index: rk.index, RelevanceScore: sigmoid(rk.logit)}
		if req.ReturnDocuments == nil || *req.ReturnDocuments {
			results[i].Document = &rerankDocument{texts[rk.index]}
		}
	}
	body, err := json.Marshal(struct {
		ID      string         `json:"id"`
		Model   string         `json:"model"`
		Results []rerankResult `json:"results"`
		Usage   struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}{ID: "rerank-" + rand.Text(), Model: t.name, Results: results, Usage: struct {
		TotalTokens int `json:"total_tokens"`
	}{tokens}})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
