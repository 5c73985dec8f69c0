package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/inferd/inferd/repo/modelfile"
)

// maxFileSize bounds tokenizer_config.json and chat_template.jinja; real
// configs with every added token listed are a few MiB.
const maxFileSize = 32 << 20

// specialNames are the special tokens transformers hands a template (its
// tokenizer's special_tokens_map, huggingface/transformers
// src/transformers/tokenization_utils_base.py SPECIAL_TOKENS_ATTRIBUTES).
var specialNames = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// Load reads the chat template of a model folder (see Source) and its
// special tokens from tokenizer_config.json. ErrNoTemplate when the folder
// has none. Files are read through repo/modelfile: never from outside dir,
// never over a bound.
func Load(dir string, cfg Config) (*Template, error) {
	tc, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	file, err := readFile(dir, "chat_template.jinja")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	src, err := Source(string(file), tc["chat_template"])
	if err != nil {
		return nil, err
	}
	special, err := tc.special()
	if err != nil {
		return nil, err
	}
	t, err := Parse(src, special, cfg)
	if err != nil {
		return nil, fmt.Errorf("chat template of %s: %w", dir, err)
	}
	return t, nil
}

// Source picks a folder's chat template: chat_template.jinja (file, ""
// when absent) when present, else tokenizer_config.json's chat_template
// (raw, nil when absent), a string or a list of {name, template} from
// which "default" is taken. Independent template files take priority over
// the config's entry, as transformers loads them
// (huggingface/transformers src/transformers/tokenization_utils_base.py,
// from_pretrained's chat_template_file).
func Source(file string, chatTemplate json.RawMessage) (string, error) {
	if file != "" {
		return file, nil
	}
	return tokenizerConfig{"chat_template": chatTemplate}.template()
}

// readFile reads name in dir: fs.ErrNotExist when absent, ErrConfig
// when unreadable.
func readFile(dir, name string) ([]byte, error) {
	b, err := modelfile.ReadFile(dir, name, maxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %s %w", ErrConfig, name, err)
	}
	return b, nil
}

type tokenizerConfig map[string]json.RawMessage

// readConfig reads tokenizer_config.json; an absent file is an empty one.
func readConfig(dir string) (tokenizerConfig, error) {
	b, err := readFile(dir, "tokenizer_config.json")
	if errors.Is(err, fs.ErrNotExist) {
		return tokenizerConfig{}, nil
	}
	if err != nil {
		return nil, err
	}
	var tc tokenizerConfig
	if err := json.Unmarshal(b, &tc); err != nil {
		return nil, fmt.Errorf("%w: tokenizer_config.json: %w", ErrConfig, err)
	}
	return tc, nil
}

func (tc tokenizerConfig) template() (string, error) {
	raw := tc["chat_template"]
	if len(raw) == 0 || string(raw) == "null" {
		return "", ErrNoTemplate
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("%w: tokenizer_config.json chat_template is neither a string nor a list of {name, template}", ErrConfig)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("%w: tokenizer_config.json has named chat templates but none named \"default\"", ErrNoTemplate)
}

// special returns the special tokens as strings; tokenizer_config.json
// writes each as a string or as an AddedToken object with a content.
func (tc tokenizerConfig) special() (map[string]any, error) {
	out := map[string]any{}
	for _, name := range specialNames {
		raw, ok := tc[name]
		if !ok || string(raw) == "null" {
			continue
		}
		s, err := tokenText(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: tokenizer_config.json %s: %w", ErrConfig, name, err)
		}
		out[name] = s
	}
	if raw, ok := tc["additional_special_tokens"]; ok && string(raw) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("%w: tokenizer_config.json additional_special_tokens: %w", ErrConfig, err)
		}
		texts := make([]string, len(list))
		for i, r := range list {
			s, err := tokenText(r)
			if err != nil {
				return nil, fmt.Errorf("%w: tokenizer_config.json additional_special_tokens[%d]: %w", ErrConfig, i, err)
			}
			texts[i] = s
		}
		out["additional_special_tokens"] = texts
	}
	return out, nil
}

func tokenText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", errors.New("neither a string nor an object with a content")
	}
	return *obj.Content, nil
}
