package textmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/inferd/inferd/repo/modelfile"
	"github.com/inferd/inferd/repo/tokenizer"
)

// MaxJSONSize bounds each small JSON file read here (config.json,
// tokenizer_config.json, ...); real ones are a few KiB, a chat template
// tens of KiB.
const MaxJSONSize = 4 << 20

// files is what the folder holds, before classification.
type files struct {
	tok        *tokenizer.Tokenizer
	hf         HFConfig
	tc         TokenizerConfig
	template   string
	sbertMax   int
	pooling    Pooling // "" when 1_Pooling/config.json is absent
	hasHF      bool
	hasTokJSON bool
}

// readFiles reads the optional files of dir. A missing file is not an
// error; one that is present and unreadable is.
func readFiles(dir string) (*files, error) {
	f := &files{}
	data, err := read(dir, "tokenizer.json", tokenizer.MaxFileSize)
	if err != nil {
		return nil, err
	}
	if data != nil {
		if f.tok, err = tokenizer.Parse(data); err != nil {
			return nil, fmt.Errorf("tokenizer.json: %w", err)
		}
		f.hasTokJSON = true
	}
	if f.hasHF, err = readJSON(dir, "config.json", &f.hf); err != nil {
		return nil, err
	}
	if _, err = readJSON(dir, "tokenizer_config.json", &f.tc); err != nil {
		return nil, err
	}
	if data, err = read(dir, "chat_template.jinja", MaxJSONSize); err != nil {
		return nil, err
	}
	f.template = string(data)
	var sb struct {
		MaxSeqLength int `json:"max_seq_length"`
	}
	if _, err = readJSON(dir, "sentence_bert_config.json", &sb); err != nil {
		return nil, err
	}
	f.sbertMax = max(sb.MaxSeqLength, 0)
	if f.pooling, err = readPooling(dir); err != nil {
		return nil, err
	}
	return f, nil
}

// read reads name in dir, nil when it does not exist.
func read(dir, name string, limit int64) ([]byte, error) {
	data, err := modelfile.ReadFile(dir, name, limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

// readJSON decodes name into v; false when the file does not exist.
func readJSON(dir, name string, v any) (bool, error) {
	data, err := read(dir, name, MaxJSONSize)
	if err != nil || data == nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	return true, nil
}

// poolingConfig is sentence-transformers' 1_Pooling/config.json
// (sentence_transformers/models/Pooling.py config_keys).
type poolingConfig struct {
	Mode         string `json:"pooling_mode"`
	CLS          bool   `json:"pooling_mode_cls_token"`
	Mean         bool   `json:"pooling_mode_mean_tokens"`
	Max          bool   `json:"pooling_mode_max_tokens"`
	MeanSqrt     bool   `json:"pooling_mode_mean_sqrt_len_tokens"`
	WeightedMean bool   `json:"pooling_mode_weightedmean_tokens"`
	LastToken    bool   `json:"pooling_mode_lasttoken"`
}

// readPooling reads 1_Pooling/config.json: "" when absent. Several true
// flags concatenate the poolings in sentence-transformers, and
// mean_sqrt_len and weightedmean are not served: both are errors rather
// than a silently different vector.
func readPooling(dir string) (Pooling, error) {
	var pc poolingConfig
	ok, err := readJSON(dir, "1_Pooling/config.json", &pc)
	if err != nil || !ok {
		return "", err
	}
	if pc.Mode != "" {
		return ParsePooling(pc.Mode)
	}
	var modes []Pooling
	for _, m := range []struct {
		on bool
		p  Pooling
	}{{pc.CLS, CLS}, {pc.Mean, Mean}, {pc.Max, Max}, {pc.LastToken, LastToken}} {
		if m.on {
			modes = append(modes, m.p)
		}
	}
	switch {
	case pc.MeanSqrt || pc.WeightedMean:
		return "", fmt.Errorf("%w: 1_Pooling/config.json: mean_sqrt_len and weightedmean pooling are not supported", ErrInvalid)
	case len(modes) > 1:
		return "", fmt.Errorf("%w: 1_Pooling/config.json: %d pooling modes at once (concatenated) are not supported", ErrInvalid, len(modes))
	case len(modes) == 1:
		return modes[0], nil
	}
	return Mean, nil
}

// ParsePooling reads a pooling name as sentence-transformers spells it
// ("cls", "mean", "max", "lasttoken"; "last_token" too).
func ParsePooling(s string) (Pooling, error) {
	switch s {
	case "mean", "cls", "max", "lasttoken":
		return Pooling(s), nil
	case "last_token":
		return LastToken, nil
	}
	return "", fmt.Errorf("%w: pooling %q (want mean, cls, max or lasttoken)", ErrInvalid, s)
}
