package deploy

// A strict parser for the YAML subset the files under deploy/ are written
// in: block mappings and sequences, "- key: value" items, plain, single- and
// double-quoted scalars, one-line flow sequences and mappings, literal and
// folded block scalars, comments, "---" document separators, and
// CloudFormation's short tags (!Ref, !If, ...). go.mod has no YAML library,
// and this is enough to check the manifests' structure. Anything outside
// the subset (tabs, anchors, multi-line plain scalars, bad indentation,
// duplicate keys, "a: b: c") is an error, so a file it accepts is also
// valid YAML.

import (
	"fmt"
	"strconv"
	"strings"
)

// tagged is a node carrying a local tag such as !Ref or !If.
type tagged struct {
	Tag   string
	Value any
}

type yline struct {
	num    int    // 1-based, in the whole file
	indent int    // leading spaces
	text   string // without indentation, trailing comment and trailing spaces
	raw    string // the line as written
}

type yparser struct {
	lines []yline
	i     int
}

// parseYAMLDocs parses a file into its documents; empty documents are
// dropped.
func parseYAMLDocs(src string) ([]any, error) {
	var docs []any
	var cur []yline
	flush := func() error {
		p := &yparser{lines: cur}
		cur = nil
		if p.peek() < 0 {
			return nil
		}
		v, err := p.node(0)
		if err != nil {
			return err
		}
		if j := p.peek(); j >= 0 {
			return p.errf(j, "unexpected content")
		}
		docs = append(docs, v)
		return nil
	}
	for n, raw := range strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n") {
		if raw == "---" || strings.HasPrefix(raw, "--- ") {
			if err := flush(); err != nil {
				return nil, err
			}
			continue
		}
		body := strings.TrimLeft(raw, " ")
		if strings.HasPrefix(body, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", n+1)
		}
		text, err := stripComment(body)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n+1, err)
		}
		cur = append(cur, yline{num: n + 1, indent: len(raw) - len(body), text: strings.TrimRight(text, " \t"), raw: raw})
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return docs, nil
}

// stripComment drops a " #" comment outside quotes.
func stripComment(s string) (string, error) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
		case (c == '"' || c == '\'') && (i == 0 || strings.ContainsRune(" [{,:-", rune(s[i-1]))):
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' '):
			return s[:i], nil
		}
	}
	return s, nil
}

func (p *yparser) errf(j int, format string, args ...any) error {
	l := p.lines[j]
	return fmt.Errorf("line %d: %s: %q", l.num, fmt.Sprintf(format, args...), l.raw)
}

// peek returns the index of the next line with content, or -1.
func (p *yparser) peek() int {
	for j := p.i; j < len(p.lines); j++ {
		if p.lines[j].text != "" {
			return j
		}
	}
	return -1
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// splitKey splits "key: value" / "key:"; ok is false for anything else.
func splitKey(text string) (key, rest string, ok bool) {
	if text == "" || strings.ContainsRune("!&*[{|>%@`", rune(text[0])) {
		return "", "", false
	}
	var end int
	if text[0] == '"' || text[0] == '\'' {
		q := strings.IndexByte(text[1:], text[0])
		if q < 0 {
			return "", "", false
		}
		end = q + 2
		key = text[1 : end-1]
		if end >= len(text) || text[end] != ':' {
			return "", "", false
		}
	} else {
		end = strings.Index(text, ": ")
		if end < 0 {
			if !strings.HasSuffix(text, ":") {
				return "", "", false
			}
			end = len(text) - 1
		}
		key = text[:end]
	}
	rest = strings.TrimLeft(text[end+1:], " ")
	if end+1 < len(text) && text[end+1] != ' ' {
		return "", "", false
	}
	return key, rest, true
}

// node parses the block starting at the next line, which must be indented
// at least min.
func (p *yparser) node(minIndent int) (any, error) {
	j := p.peek()
	if j < 0 {
		return nil, nil
	}
	l := p.lines[j]
	if l.indent < minIndent {
		return nil, nil
	}
	if isSeqItem(l.text) {
		return p.seq(l.indent)
	}
	if _, _, ok := splitKey(l.text); ok {
		return p.mapping(l.indent)
	}
	p.i = j + 1
	v, err := p.inline(l.text)
	if err != nil {
		return nil, p.errf(j, "%v", err)
	}
	if k := p.peek(); k >= 0 && p.lines[k].indent > l.indent {
		return nil, p.errf(k, "multi-line plain scalars are not supported")
	}
	return v, nil
}

func (p *yparser) mapping(ind int) (map[string]any, error) {
	m := map[string]any{}
	for {
		j := p.peek()
		if j < 0 {
			return m, nil
		}
		l := p.lines[j]
		if l.indent < ind || (l.indent == ind && isSeqItem(l.text)) {
			return m, nil
		}
		if l.indent > ind {
			return nil, p.errf(j, "unexpected indentation (want %d spaces)", ind)
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, p.errf(j, "want key: value")
		}
		if _, dup := m[key]; dup {
			return nil, p.errf(j, "duplicate key %q", key)
		}
		p.i = j + 1
		v, err := p.value(j, rest, ind, true)
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
}

func (p *yparser) seq(ind int) ([]any, error) {
	out := []any{}
	for {
		j := p.peek()
		if j < 0 {
			return out, nil
		}
		l := p.lines[j]
		if l.indent < ind || (l.indent == ind && !isSeqItem(l.text)) {
			return out, nil
		}
		if l.indent > ind {
			return nil, p.errf(j, "unexpected indentation (want %d spaces)", ind)
		}
		rest := strings.TrimLeft(l.text[1:], " ")
		off := len(l.text) - len(rest)
		var v any
		var err error
		_, _, isKey := splitKey(rest)
		switch {
		case isKey || isSeqItem(rest):
			// "- key: value" or "- - x": the content is a block at the
			// column where it starts.
			p.lines[j].indent, p.lines[j].text = ind+off, rest
			v, err = p.node(ind + off)
		default:
			p.i = j + 1
			v, err = p.value(j, rest, ind, false)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// value parses what follows "key:" or "-" on line j: inline, a block
// scalar, a tag, or (rest empty) the block below. sameIndentSeq allows
// "key:\n- item" at the key's own indentation.
func (p *yparser) value(j int, rest string, ind int, sameIndentSeq bool) (any, error) {
	switch {
	case rest == "":
		k := p.peek()
		if k < 0 {
			return nil, nil
		}
		if nl := p.lines[k]; nl.indent > ind {
			return p.node(nl.indent)
		} else if sameIndentSeq && nl.indent == ind && isSeqItem(nl.text) {
			return p.seq(ind)
		}
		return nil, nil
	case rest[0] == '|' || rest[0] == '>':
		if strings.Trim(rest[1:], "+-") != "" {
			return nil, p.errf(j, "unsupported block scalar header")
		}
		return p.block(ind, rest[0] == '>'), nil
	case rest[0] == '!':
		tag, after, _ := strings.Cut(rest, " ")
		after = strings.TrimLeft(after, " ")
		var v any
		var err error
		if after == "" {
			v, err = p.value(j, "", ind, sameIndentSeq)
		} else {
			v, err = p.inline(after)
			if err != nil {
				err = p.errf(j, "%v", err)
			}
		}
		return tagged{Tag: tag, Value: v}, err
	}
	v, err := p.inline(rest)
	if err != nil {
		return nil, p.errf(j, "%v", err)
	}
	if k := p.peek(); k >= 0 && p.lines[k].indent > ind {
		return nil, p.errf(k, "unexpected indentation after a scalar (multi-line plain scalars are not supported)")
	}
	return v, nil
}

// block reads a literal (|) or folded (>) scalar: the raw lines after the
// header that are blank or indented deeper than ind.
func (p *yparser) block(ind int, folded bool) string {
	var parts []string
	blockInd := -1
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		if strings.TrimSpace(l.raw) == "" {
			parts = append(parts, "")
			continue
		}
		if l.indent <= ind {
			break
		}
		if blockInd < 0 {
			blockInd = l.indent
		}
		parts = append(parts, l.raw[min(blockInd, l.indent):])
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if folded {
		return strings.Join(parts, " ")
	}
	return strings.Join(parts, "\n")
}

// inline parses a one-line value: quoted or plain scalar, flow sequence or
// flow mapping, or a tag on one of these.
func (p *yparser) inline(s string) (any, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nil, nil
	case s[0] == '!':
		tag, after, _ := strings.Cut(s, " ")
		v, err := p.inline(after)
		return tagged{Tag: tag, Value: v}, err
	case s[0] == '&' || s[0] == '*':
		return nil, fmt.Errorf("anchors and aliases are not supported")
	case s[0] == '"':
		if len(s) < 2 || s[len(s)-1] != '"' {
			return nil, fmt.Errorf("unterminated double-quoted scalar")
		}
		return strconv.Unquote(s)
	case s[0] == '\'':
		if len(s) < 2 || s[len(s)-1] != '\'' {
			return nil, fmt.Errorf("unterminated single-quoted scalar")
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case s[0] == '[':
		if s[len(s)-1] != ']' {
			return nil, fmt.Errorf("unterminated flow sequence")
		}
		out := []any{}
		items, err := splitFlow(s[1 : len(s)-1])
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			v, err := p.inline(it)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case s[0] == '{':
		if s[len(s)-1] != '}' {
			return nil, fmt.Errorf("unterminated flow mapping")
		}
		m := map[string]any{}
		items, err := splitFlow(s[1 : len(s)-1])
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			k, rest, ok := splitKey(it)
			if !ok {
				return nil, fmt.Errorf("flow mapping entry %q is not key: value", it)
			}
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("duplicate key %q", k)
			}
			if m[k], err = p.inline(rest); err != nil {
				return nil, err
			}
		}
		return m, nil
	case strings.ContainsRune("|>%@`", rune(s[0])):
		return nil, fmt.Errorf("a plain scalar cannot start with %q", s[0])
	case strings.Contains(s, ": ") || strings.HasSuffix(s, ":"):
		return nil, fmt.Errorf("mapping values are not allowed here")
	}
	return s, nil
}

// splitFlow splits the inside of a flow collection on top-level commas.
func splitFlow(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if quote != 0 || depth != 0 {
		return nil, fmt.Errorf("unbalanced flow collection %q", s)
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		out = append(out, last)
	} else if len(out) > 0 {
		return nil, fmt.Errorf("trailing comma in %q", s)
	}
	return out, nil
}

// get walks a dotted path: map keys, or list indexes as numbers.
func get(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		switch n := v.(type) {
		case map[string]any:
			v = n[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			v = n[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func strs(v any) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, str(x))
	}
	return out
}
