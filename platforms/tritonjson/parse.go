package tritonjson

import (
	"bytes"
	"math"
	"strconv"
	"sync"

	"github.com/inferd/inferd/core/status"
)

// Kind is the JSON type of a Value.
type Kind uint8

// JSON value kinds. KindInvalid is the zero Value (an absent member).
const (
	KindInvalid Kind = iota
	KindNull
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// Number classes kept in node.flags. An integer literal carries numInt when
// it fits int64 and numUint when it fits uint64, exactly RapidJSON's IsInt64 /
// IsUint64 (so "-0" is both, "1.0" neither).
const (
	numInt        uint8 = 1 << iota // integer literal in int64 range
	numUint                         // integer literal in uint64 range
	numFloat                        // fraction, exponent, or an integer beyond uint64
	numNaN                          // NaN (sign ignored, as RapidJSON)
	numInf                          // Inf / Infinity, sign from the text
	numOddSpecial                   // NaN/Inf followed by a fraction or exponent, see numberValue
)

// strEscaped marks a string node whose unescaped bytes live in the arena.
const strEscaped uint8 = 1

// node is one value of the parsed document, in document (pre-)order: a
// container is followed by its descendants, object members as key node then
// value node. Scalars point into the source (or the arena for strings that
// needed unescaping), so parsing allocates no per-value memory.
type node struct {
	kind  Kind
	flags uint8  // bool: 1 = true; number: num*; string: strEscaped
	off   uint32 // scalar: first byte of its text (string: of its content, or arena offset)
	n     uint32 // scalar: byte length; container: index just past its last descendant
	count uint32 // container: number of elements / members
}

// Document is a parsed JSON text. It references the source bytes, which must
// not change while the Document or its Values are in use.
type Document struct {
	src   []byte
	nodes []node
	arena []byte
	// p is the parser that built the document, kept (with the node list's
	// array) so that parsing again, or Release, reuses it.
	p *parser
}

// parserPool holds the parsers, node lists included, that Release gave
// back: a server parsing one request after another reuses them instead of
// allocating both (which the collector then clears and sweeps) per
// document.
var parserPool sync.Pool // of *parser

// maxPooledNodes bounds the node lists kept in parserPool (256 KiB), so
// that one huge document does not stay resident for the small ones that
// follow.
const maxPooledNodes = 1 << 14

// Release gives d's parser and node list back for a later Parse to reuse
// and leaves d empty (a zero Document). d, any copy of it, and every Value
// read from it must not be used afterwards; strings and numbers taken out
// of it stay valid (they are copies). Calling it is optional: a Document never
// released is left to the collector.
func (d *Document) Release() {
	if p := d.p; p != nil {
		nodes := d.nodes
		if cap(nodes) == 0 { // a failed first parse: the list is the parser's
			nodes = p.nodes
		}
		if cap(nodes) <= maxPooledNodes {
			*p = parser{nodes: nodes[:0]}
			parserPool.Put(p)
		}
	}
	*d = Document{}
}

// pooledParser is a parser from parserPool whose node list has room for
// need nodes, or nil.
func pooledParser(need int) *parser {
	p, _ := parserPool.Get().(*parser)
	if p == nil || cap(p.nodes) < need {
		return nil // a list too small is dropped: the new one replaces it
	}
	return p
}

// RapidJSON's English parse error reasons (error/en.h).
const (
	reasonEmpty             = "The document is empty."
	reasonRootNotSingular   = "The document root must not be followed by other values."
	reasonValueInvalid      = "Invalid value."
	reasonMissName          = "Missing a name for object member."
	reasonMissColon         = "Missing a colon after a name of object member."
	reasonMissCommaOrCurly  = "Missing a comma or '}' after an object member."
	reasonMissCommaOrSquare = "Missing a comma or ']' after an array element."
	reasonBadHex            = "Incorrect hex digit after \\u escape in string."
	reasonBadSurrogate      = "The surrogate pair in string is invalid."
	reasonBadEscape         = "Invalid escape character in string."
	reasonMissQuote         = "Missing a closing quotation mark in string."
	reasonNumberTooBig      = "Number too big to be stored in double."
	reasonMissFraction      = "Miss fraction part in number."
	reasonMissExponent      = "Miss exponent in number."
)

// MaxDepth bounds the nesting of arrays and objects in a document, as
// encoding/json does (10,000, the same limit). RapidJSON has none: its
// recursive parser, which Triton releases use, runs out of stack on a
// document nested a million levels deep, and its iterative one accepts it.
// Nothing in the API nests deeper than a tensor's "data" (at most
// MaxDataNesting arrays), so a deeper document is refused as a parse error
// before any handler walks it.
const MaxDepth = 10000

// ParseJSON parses src the way Triton's TritonJson does (RapidJSON with
// kParseNanAndInfFlag | kParseIterativeFlag): NaN, Inf, Infinity and their
// negatives are accepted, strings are not validated as UTF-8, and a NUL byte
// ends the input as RapidJSON's memory stream does; nesting beyond MaxDepth
// is refused. A syntax error is a
// CodeInternal *status.Error "failed to parse the request JSON buffer: <reason>
// at <offset>".
func ParseJSON(src []byte) (*Document, error) {
	d := &Document{}
	if err := d.Parse(src); err != nil {
		return nil, err
	}
	return d, nil
}

// Root returns the top-level value.
func (d *Document) Root() Value { return Value{d: d, i: 0} }

// parseError builds the TritonJson parse failure message.
func parseError(reason string, off int) error {
	return &status.Error{Code: status.CodeInternal, Msg: "failed to parse the request JSON buffer: " + reason + " at " + strconv.Itoa(off)}
}

// Parser states, named after RapidJSON's iterative parser: after a syntax
// error the state decides the reason reported (HandleError).
type pstate uint8

const (
	stStart pstate = iota
	stFinish
	stObjectInitial
	stMemberKey
	stKeyValueDelim
	stMemberValue
	stMemberDelim
	stArrayInitial
	stElement
	stElementDelim
)

type parser struct {
	src   []byte
	pos   int
	nodes []node
	arena []byte
	// stack holds the open containers; stackBuf covers ordinary nesting
	// without allocating.
	stack    []uint32
	stackBuf [32]uint32
}

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *parser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

func (p *parser) skipWS() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\n', '\r', '\t':
			p.pos++
		default:
			return
		}
	}
}

// stateError is RapidJSON's HandleError: the reason for an unexpected token
// (or the end of input) in state s.
func stateError(s pstate, off int) error {
	switch s {
	case stStart:
		return parseError(reasonEmpty, off)
	case stFinish:
		return parseError(reasonRootNotSingular, off)
	case stObjectInitial, stMemberDelim:
		return parseError(reasonMissName, off)
	case stMemberKey:
		return parseError(reasonMissColon, off)
	case stMemberValue:
		return parseError(reasonMissCommaOrCurly, off)
	case stKeyValueDelim, stArrayInitial, stElementDelim:
		return parseError(reasonValueInvalid, off)
	default: // stElement
		return parseError(reasonMissCommaOrSquare, off)
	}
}

// Parse is ParseJSON into d, which may be a zero Document held inside
// another value (so that parsing allocates nothing for the Document
// itself); d's previous document is dropped, and after an error d holds
// none that can be used.
func (d *Document) Parse(src []byte) error {
	if uint64(len(src)) >= math.MaxUint32 {
		return status.Errorf(status.CodeInternal, "failed to parse the request JSON buffer: document of %d bytes is too large", len(src))
	}
	nodes := d.nodes[:0]
	p := d.p
	if cap(nodes) == 0 {
		// Every value but the last of a container is followed by a comma
		// and every member name by a colon, so this (SIMD-fast) count
		// sizes the node list of large arrays and objects in one go. A
		// document of n bytes has at most (n+1)/2 values and names (each
		// takes a byte, and a separator or bracket follows it), so a body
		// of commas reserves no more than a valid one of its size.
		count := bytes.Count(src, []byte{','}) + bytes.Count(src, []byte{':'})
		need := min(count, (len(src)+1)/2) + 16
		if p = pooledParser(need); p != nil {
			nodes = p.nodes
		} else {
			nodes = make([]node, 0, need)
		}
	}
	if p == nil {
		p = new(parser)
	}
	*p = parser{src: src, nodes: nodes, arena: d.arena[:0]}
	d.p = p
	p.stack = p.stackBuf[:0]
	if err := p.run(); err != nil {
		return err
	}
	d.src, d.nodes, d.arena = src, p.nodes, p.arena
	return nil
}

// run is RapidJSON's IterativeParse: a state machine over the next
// non-blank byte, so deep nesting costs no call stack.
func (p *parser) run() error {
	state := stStart
	p.skipWS()
	for p.pos < len(p.src) && p.src[p.pos] != 0 {
		c := p.src[p.pos]
		switch state {
		case stStart, stKeyValueDelim, stArrayInitial, stElementDelim:
			switch c {
			case '[', '{':
				if len(p.stack) >= MaxDepth {
					// Not a RapidJSON reason: it has no such limit.
					return parseError("The document is nested deeper than "+strconv.Itoa(MaxDepth)+" levels.", p.pos)
				}
				p.addChild()
				k, next := KindArray, stArrayInitial
				if c == '{' {
					k, next = KindObject, stObjectInitial
				}
				p.stack = append(p.stack, uint32(len(p.nodes)))
				p.nodes = append(p.nodes, node{kind: k})
				p.pos++
				state = next
			case ']':
				switch state {
				case stArrayInitial:
					state = p.closeContainer()
				case stElementDelim: // trailing comma
					return parseError(reasonValueInvalid, p.pos)
				default:
					return stateError(state, p.pos)
				}
			case '}', ',', ':':
				return stateError(state, p.pos)
			default:
				p.addChild()
				if err := p.parseScalar(); err != nil {
					return err
				}
				switch state {
				case stStart:
					state = stFinish
				case stKeyValueDelim:
					state = stMemberValue
				default:
					state = stElement
				}
			}
		case stFinish:
			return stateError(state, p.pos)
		case stObjectInitial, stMemberDelim:
			switch c {
			case '}':
				if state == stMemberDelim { // trailing comma
					return parseError(reasonMissName, p.pos)
				}
				state = p.closeContainer()
			case '"':
				if err := p.parseString(); err != nil {
					return err
				}
				state = stMemberKey
			default:
				return stateError(state, p.pos)
			}
		case stMemberKey:
			if c != ':' {
				return stateError(state, p.pos)
			}
			p.pos++
			state = stKeyValueDelim
		case stMemberValue:
			switch c {
			case '}':
				state = p.closeContainer()
			case ',':
				p.pos++
				state = stMemberDelim
			default:
				return stateError(state, p.pos)
			}
		case stElement:
			switch c {
			case ']':
				state = p.closeContainer()
			case ',':
				p.pos++
				state = stElementDelim
			default:
				return stateError(state, p.pos)
			}
		}
		p.skipWS()
	}
	if state != stFinish {
		return stateError(state, p.pos)
	}
	return nil
}

// addChild counts one more element or member in the innermost container.
func (p *parser) addChild() {
	if n := len(p.stack); n > 0 {
		p.nodes[p.stack[n-1]].count++
	}
}

// closeContainer consumes ']' or '}' and returns the state of the parent.
func (p *parser) closeContainer() pstate {
	p.pos++
	top := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	p.nodes[top].n = uint32(len(p.nodes))
	if len(p.stack) == 0 {
		return stFinish
	}
	if p.nodes[p.stack[len(p.stack)-1]].kind == KindArray {
		return stElement
	}
	return stMemberValue
}

// parseScalar parses null, true, false, a string or a number at p.pos.
func (p *parser) parseScalar() error {
	switch p.src[p.pos] {
	case 'n':
		return p.parseLiteral("null", node{kind: KindNull})
	case 't':
		return p.parseLiteral("true", node{kind: KindBool, flags: 1})
	case 'f':
		return p.parseLiteral("false", node{kind: KindBool})
	case '"':
		return p.parseString()
	}
	return p.parseNumber()
}

// parseLiteral consumes lit; on a mismatch RapidJSON reports the offset of
// the first byte that differs.
func (p *parser) parseLiteral(lit string, nd node) error {
	p.pos++
	for i := 1; i < len(lit); i++ {
		if p.peek() != lit[i] {
			return parseError(reasonValueInvalid, p.pos)
		}
		p.pos++
	}
	p.nodes = append(p.nodes, nd)
	return nil
}

// escapeChar maps the byte after a backslash to what it stands for (0: not
// a simple escape).
var escapeChar = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// parseString parses a string (value or member name). Strings without
// escapes are referenced in place; others are unescaped into the arena.
func (p *parser) parseString() error {
	src := p.src
	start := p.pos + 1
	i := start
	for i < len(src) {
		c := src[i]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		i++
	}
	if i < len(src) && src[i] == '"' {
		p.nodes = append(p.nodes, node{kind: KindString, off: uint32(start), n: uint32(i - start)})
		p.pos = i + 1
		return nil
	}
	aStart := len(p.arena)
	p.arena = append(p.arena, src[start:i]...)
	p.pos = i
	for {
		c := p.peek()
		switch {
		case c == '"':
			p.pos++
			p.nodes = append(p.nodes, node{kind: KindString, flags: strEscaped, off: uint32(aStart), n: uint32(len(p.arena) - aStart)})
			return nil
		case c == '\\':
			escOff := p.pos
			p.pos++
			e := p.peek()
			if r := escapeChar[e]; r != 0 {
				p.pos++
				p.arena = append(p.arena, r)
				continue
			}
			if e != 'u' {
				return parseError(reasonBadEscape, escOff)
			}
			p.pos++
			cp, ok := p.hex4()
			if !ok {
				return parseError(reasonBadHex, escOff)
			}
			// A high surrogate must be followed by \u and a low
			// surrogate. A lone low surrogate is encoded as is
			// (RapidJSON 1.1.0, as shipped by the distributions Triton
			// builds on).
			if cp >= 0xD800 && cp <= 0xDBFF {
				if p.peek() != '\\' {
					return parseError(reasonBadSurrogate, escOff)
				}
				p.pos++
				if p.peek() != 'u' {
					return parseError(reasonBadSurrogate, escOff)
				}
				p.pos++
				cp2, ok := p.hex4()
				if !ok {
					return parseError(reasonBadHex, escOff)
				}
				if cp2 < 0xDC00 || cp2 > 0xDFFF {
					return parseError(reasonBadSurrogate, escOff)
				}
				cp = ((cp-0xD800)<<10 | (cp2 - 0xDC00)) + 0x10000
			}
			p.arena = appendUTF8(p.arena, cp)
		case c < 0x20:
			// NUL is RapidJSON's end of stream.
			if c == 0 {
				return parseError(reasonMissQuote, p.pos)
			}
			return parseError(reasonBadEscape, p.pos)
		default:
			j := p.pos + 1
			for j < len(src) {
				b := src[j]
				if b == '"' || b == '\\' || b < 0x20 {
					break
				}
				j++
			}
			p.arena = append(p.arena, src[p.pos:j]...)
			p.pos = j
		}
	}
}

// hex4 reads four hex digits.
func (p *parser) hex4() (uint32, bool) {
	var cp uint32
	for k := 0; k < 4; k++ {
		c := p.peek()
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return 0, false
		}
		cp = cp<<4 | uint32(v)
		p.pos++
	}
	return cp, true
}

// appendUTF8 encodes cp like RapidJSON's UTF8::Encode, which (unlike
// utf8.AppendRune) encodes surrogate code points as three bytes.
func appendUTF8(b []byte, cp uint32) []byte {
	switch {
	case cp <= 0x7F:
		return append(b, byte(cp))
	case cp <= 0x7FF:
		return append(b, byte(0xC0|cp>>6), byte(0x80|cp&0x3F))
	case cp <= 0xFFFF:
		return append(b, byte(0xE0|cp>>12), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
	}
	return append(b, byte(0xF0|cp>>18), byte(0x80|(cp>>12)&0x3F), byte(0x80|(cp>>6)&0x3F), byte(0x80|cp&0x3F))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
