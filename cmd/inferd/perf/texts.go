package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/inferd/inferd/repo/tokenizer"
)

// The embeddings mode's texts: generated ones of a chosen token length, or
// --input-data's. A generated text is words of a fixed list that the
// model's tokenizer maps to one token each, joined by spaces; its length is
// then counted whole, as the server counts usage (special tokens
// included), and words are added or dropped until it is right.

const (
	// maxGenTexts bounds the distinct texts generated; defaultEntries is
	// --num-dataset-entries' default (genai-perf's). The senders cycle
	// through the requests.
	maxGenTexts    = 16384
	defaultEntries = 100
	// fixRounds bounds the rounds of adding or dropping words.
	fixRounds = 8
	// countChunk is how many texts one /tokenize call counts: TEI
	// refuses more inputs a call than its --max-client-batch-size, 32 by
	// default (huggingface/text-embeddings-inference router/src/main.rs).
	countChunk = 32
)

// candidateWords are common English words (and those of the example
// embedder's small vocabulary); the tokenizer keeps those it maps to one
// token.
var candidateWords = strings.Fields(`the of and to in is was for on that with as it by at from he his an be this are or
which not but had have you they were one all she we there been her their has when who will more if no out so what up
said into than them can only other new some could time these two may first then do any like my now over such our man
even most made after also did many before must through back years where much your way well down should because each
just those people how too little state good very make world still own see men work long get here between both life
being under never day same another know while last might great old year off come since against go came right used
take three cat dog fox quick brown lazy city text model server search query water moon sun night small large fast
slow hello capital country document sat mat runs jumps fire`)

// tokenCounter counts tokens as the model's tokenizer does, special tokens
// included.
type tokenCounter interface {
	count(ctx context.Context, texts []string) ([]int, error)
	// maxLength is the tokenizer's own truncation length (0: none known).
	maxLength() int
	String() string
}

// localCounter counts with a tokenizer.json read by repo/tokenizer, the
// tokenizer inferd itself uses.
type localCounter struct {
	tok  *tokenizer.Tokenizer
	path string
}

func (l *localCounter) count(_ context.Context, texts []string) ([]int, error) {
	out := make([]int, len(texts))
	for i, t := range texts {
		enc, err := l.tok.Encode(t, true)
		if err != nil {
			return nil, fmt.Errorf("tokenizing: %w", err)
		}
		out[i] = len(enc.IDs)
	}
	return out, nil
}

func (l *localCounter) maxLength() int { return l.tok.MaxLength() }
func (l *localCounter) String() string { return l.path }

// remoteCounter counts with the server's TEI /tokenize route
// (huggingface/text-embeddings-inference docs/openapi.json): one list of
// tokens a text.
type remoteCounter struct {
	hc         *http.Client
	url, model string
	header     http.Header // -H
}

func (r *remoteCounter) count(ctx context.Context, texts []string) ([]int, error) {
	out := make([]int, 0, len(texts))
	for start := 0; start < len(texts); start += countChunk {
		chunk := texts[start:min(start+countChunk, len(texts))]
		body, err := json.Marshal(struct {
			Model    string   `json:"model"`
			Inputs   []string `json:"inputs"`
			Specials bool     `json:"add_special_tokens"`
		}{r.model, chunk, true})
		if err != nil {
			return nil, err
		}
		data, err := call(ctx, r.hc, http.MethodPost, r.url, r.header, body, 256<<20)
		if err != nil {
			return nil, fmt.Errorf("POST /tokenize: %w", err)
		}
		var lists [][]json.RawMessage
		if err := json.Unmarshal(data, &lists); err != nil {
			return nil, fmt.Errorf("POST /tokenize: decoding the answer: %w", err)
		}
		if len(lists) != len(chunk) {
			return nil, fmt.Errorf("POST /tokenize: %d answers for %d texts", len(lists), len(chunk))
		}
		for _, l := range lists {
			out = append(out, len(l))
		}
	}
	return out, nil
}

func (r *remoteCounter) maxLength() int { return 0 }
func (r *remoteCounter) String() string { return "the server's /tokenize" }

// newCounter is --tokenizer's tokenizer, else the server's /tokenize when
// it answers, else nil (lengths unchecked, with a warning).
func newCounter(ctx context.Context, o *options, hc *http.Client, warn func(string)) (tokenCounter, error) {
	if path := o.tokenizerPath; path != "" {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			path = filepath.Join(path, "tokenizer.json")
		}
		tok, err := tokenizer.Load(path)
		if err != nil {
			return nil, usagef("--tokenizer: %w", err)
		}
		return &localCounter{tok: tok, path: path}, nil
	}
	r := &remoteCounter{hc: hc, url: o.baseURL + "/tokenize", model: o.model, header: o.headers}
	if _, err := r.count(ctx, []string{"hello"}); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		warn(fmt.Sprintf("token lengths are not checked (%v): give --tokenizer PATH to the model's tokenizer.json", err))
		return nil, nil
	}
	return r, nil
}

// textSet is the embeddings mode's requests.
type textSet struct {
	reqs   [][]string
	tokens []int  // each request's tokens; nil when not counted
	desc   string // for the settings block and the reports' input_data
}

// buildTexts makes the requests: --input-data's texts, or generated ones.
func buildTexts(ctx context.Context, o *options, hc *http.Client, warn func(string)) (textSet, error) {
	counter, err := newCounter(ctx, o, hc, warn)
	if err != nil {
		return textSet{}, err
	}
	var set textSet
	if len(o.dataPaths) > 0 {
		texts, err := loadTexts(o.dataPaths)
		if err != nil {
			return textSet{}, usageError{err}
		}
		set.reqs = groupTexts(texts, o.textBatch)
		set.desc = fmt.Sprintf("%s: %d texts", strings.Join(o.dataPaths, ","), len(texts))
	} else {
		rng := rand.New(rand.NewPCG(o.seed, 6))
		if set.reqs, err = generateTexts(ctx, o, counter, rng); err != nil {
			return textSet{}, err
		}
		unit := "tokens"
		if counter == nil {
			unit = "words"
		}
		set.desc = fmt.Sprintf("synthetic: %d texts of %d±%d %s", len(set.reqs)*o.textBatch, o.tokensMean, o.tokensStddev, unit)
	}
	if counter == nil {
		set.desc += " (token lengths unchecked)"
		return set, nil
	}
	if set.tokens, err = requestTokens(ctx, counter, set.reqs); err != nil {
		return textSet{}, err
	}
	sum := 0
	for _, n := range set.tokens {
		sum += n
	}
	set.desc += fmt.Sprintf(", mean %.1f tokens (counted with %s)", float64(sum)/float64(len(set.reqs)*o.textBatch), counter)
	return set, nil
}

// requestTokens counts each request's tokens.
func requestTokens(ctx context.Context, c tokenCounter, reqs [][]string) ([]int, error) {
	var all []string
	for _, r := range reqs {
		all = append(all, r...)
	}
	counts, err := c.count(ctx, all)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(reqs))
	k := 0
	for i, r := range reqs {
		for range r {
			out[i] += counts[k]
			k++
		}
	}
	return out, nil
}

// groupTexts puts b consecutive texts in each request, the last one
// wrapping around to the first texts.
func groupTexts(texts []string, b int) [][]string {
	n := (len(texts) + b - 1) / b
	reqs := make([][]string, n)
	for k := range reqs {
		reqs[k] = make([]string, b)
		for j := range b {
			reqs[k][j] = texts[(k*b+j)%len(texts)]
		}
	}
	return reqs
}

// generateTexts makes the generated requests: lengths drawn from a normal
// distribution of --synthetic-input-tokens-mean and -stddev, rounded, at
// least one word and at most the tokenizer's truncation length.
func generateTexts(ctx context.Context, o *options, c tokenCounter, rng *rand.Rand) ([][]string, error) {
	nReq := max(o.entries, 1)
	n := nReq * o.textBatch
	words, specials := candidateWords, 0
	if c != nil {
		var err error
		if words, specials, err = oneTokenWords(ctx, c); err != nil {
			return nil, err
		}
	}
	if o.tokensMean <= specials {
		return nil, usagef("--synthetic-input-tokens-mean %d: the tokenizer adds %d special tokens to every text; want more", o.tokensMean, specials)
	}
	hi := math.MaxInt
	if c != nil && c.maxLength() > 0 {
		hi = c.maxLength()
	}
	lengths := make([]int, n)
	texts := make([][]string, n)
	for i := range lengths {
		l := int(math.Round(float64(o.tokensMean) + float64(o.tokensStddev)*rng.NormFloat64()))
		lengths[i] = min(max(l, specials+1), hi)
		texts[i] = pickWords(nil, lengths[i]-specials, words, rng)
	}
	if c != nil {
		if err := fixLengths(ctx, c, texts, lengths, words, rng); err != nil {
			return nil, err
		}
	}
	reqs := make([][]string, nReq)
	for k := range reqs {
		reqs[k] = make([]string, o.textBatch)
		for j := range reqs[k] {
			reqs[k][j] = strings.Join(texts[k*o.textBatch+j], " ")
		}
	}
	return reqs, nil
}

func pickWords(dst []string, n int, words []string, rng *rand.Rand) []string {
	for range n {
		dst = append(dst, words[rng.IntN(len(words))])
	}
	return dst
}

// oneTokenWords keeps the candidate words that are one token alone, and
// says how many special tokens the tokenizer adds: a word's count less
// one, for the shortest count.
func oneTokenWords(ctx context.Context, c tokenCounter) ([]string, int, error) {
	counts, err := c.count(ctx, candidateWords)
	if err != nil {
		return nil, 0, err
	}
	least := math.MaxInt
	for _, n := range counts {
		least = min(least, n)
	}
	var words []string
	for i, n := range counts {
		if n == least {
			words = append(words, candidateWords[i])
		}
	}
	if least < 1 {
		return nil, 0, errors.New("the tokenizer maps common English words to no token: use --input-data")
	}
	return words, least - 1, nil
}

// fixLengths counts every text and adds or drops words where a text's
// count is not its length (words that merge or split in context), until
// all agree or fixRounds pass.
func fixLengths(ctx context.Context, c tokenCounter, texts [][]string, lengths []int, words []string, rng *rand.Rand) error {
	pending := make([]int, len(texts))
	for i := range pending {
		pending[i] = i
	}
	for round := 0; len(pending) > 0; round++ {
		joined := make([]string, len(pending))
		for k, i := range pending {
			joined[k] = strings.Join(texts[i], " ")
		}
		counts, err := c.count(ctx, joined)
		if err != nil {
			return err
		}
		var next []int
		for k, i := range pending {
			d := lengths[i] - counts[k]
			if d == 0 {
				continue
			}
			if round == fixRounds {
				return fmt.Errorf("a generated text has %d tokens where %d were asked, after %d rounds of adding and dropping words: use --input-data", counts[k], lengths[i], fixRounds)
			}
			if d > 0 {
				texts[i] = pickWords(texts[i], d, words, rng)
			} else {
				texts[i] = texts[i][:max(len(texts[i])+d, 1)]
			}
			next = append(next, i)
		}
		pending = next
	}
	return nil
}

// Bounds on an --input-data file of texts.
const (
	maxTextFile  = 256 << 20
	maxTextCount = 1 << 20
)

// loadTexts reads --input-data's files of texts, one after the other.
func loadTexts(paths []string) ([]string, error) {
	var all []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("--input-data: %w", err)
		}
		if fi.Size() > maxTextFile {
			return nil, fmt.Errorf("--input-data %s: over %d bytes", p, maxTextFile)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--input-data: %w", err)
		}
		texts, err := parseTexts(data)
		if err != nil {
			return nil, fmt.Errorf("--input-data %s: %w", p, err)
		}
		all = append(all, texts...)
		if len(all) > maxTextCount {
			return nil, fmt.Errorf("--input-data: more than %d texts", maxTextCount)
		}
	}
	return all, nil
}

// errNoTexts is a file of texts that holds none.
var errNoTexts = errors.New("no texts")

// parseTexts reads a JSON array of strings, or JSON Lines of {"text": ...}
// objects as genai-perf's --input-file for embeddings has them
// (triton-inference-server/perf_analyzer genai-perf/docs/embeddings.md).
// Empty texts are refused: the embeddings routes refuse them.
func parseTexts(data []byte) ([]string, error) {
	data = bytes.TrimSpace(data)
	var texts []string
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &texts); err != nil {
			return nil, fmt.Errorf("want a JSON array of strings: %w", err)
		}
	} else {
		for i, line := range bytes.Split(data, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			var row struct {
				Text *string `json:"text"`
			}
			if err := json.Unmarshal(line, &row); err != nil || row.Text == nil {
				return nil, fmt.Errorf("line %d: want {\"text\": \"...\"} (or the whole file a JSON array of strings)", i+1)
			}
			texts = append(texts, *row.Text)
			if len(texts) > maxTextCount {
				return nil, fmt.Errorf("more than %d texts", maxTextCount)
			}
		}
	}
	if len(texts) > maxTextCount {
		return nil, fmt.Errorf("more than %d texts", maxTextCount)
	}
	if len(texts) == 0 {
		return nil, errNoTexts
	}
	for i, t := range texts {
		if t == "" {
			return nil, fmt.Errorf("text %d is empty", i+1)
		}
	}
	return texts, nil
}
