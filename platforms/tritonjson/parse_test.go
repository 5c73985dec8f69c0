package tritonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core/status"
)

// wantCode checks err is a *status.Error of class code with message msg.
func wantError(t *testing.T, err error, code status.Code, msg string) {
	t.Helper()
	var ce *status.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want *status.Error %s %q", err, err, code, msg)
	}
	if ce.Code != code || ce.Msg != msg {
		t.Fatalf("error = %s %q\nwant    %s %q", ce.Code, ce.Msg, code, msg)
	}
}

// TestParseErrors pins RapidJSON's reasons and offsets (iterative parser,
// kParseNanAndInfFlag), all INTERNAL.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		in     string
		reason string
		off    int
	}{
		{"", reasonEmpty, 0},
		{"  \n\t", reasonEmpty, 4},
		{"\x00{}", reasonEmpty, 0},
		// The iterative parser reports a stray structural token at the
		// root as an empty document.
		{"]", reasonEmpty, 0},
		{"}", reasonEmpty, 0},
		{",", reasonEmpty, 0},
		{" :", reasonEmpty, 1},
		{"{}{}", reasonRootNotSingular, 2},
		{"{} x", reasonRootNotSingular, 3},
		{"1 2", reasonRootNotSingular, 2},
		{"NaNx", reasonRootNotSingular, 3},
		{"x", reasonValueInvalid, 0},
		{"-", reasonValueInvalid, 1},
		{"-x", reasonValueInvalid, 1},
		{"+1", reasonValueInvalid, 0},
		{".5", reasonValueInvalid, 0},
		{"nul", reasonValueInvalid, 3},
		{"nxll", reasonValueInvalid, 1},
		{"tru", reasonValueInvalid, 3},
		{"fals", reasonValueInvalid, 4},
		{"True", reasonValueInvalid, 0},
		{"Na", reasonValueInvalid, 2},
		{"Nan", reasonValueInvalid, 2},
		{"In", reasonValueInvalid, 2},
		{"[Infinit]", reasonValueInvalid, 8},
		{"Infx", reasonRootNotSingular, 3},
		{"[", reasonValueInvalid, 1},
		{"[1", reasonMissCommaOrSquare, 2},
		{"[1,2", reasonMissCommaOrSquare, 4},
		{"[1 2]", reasonMissCommaOrSquare, 3},
		{"[1:2]", reasonMissCommaOrSquare, 2},
		{"[1}", reasonMissCommaOrSquare, 2},
		{"[1,]", reasonValueInvalid, 3},
		{"[1,,2]", reasonValueInvalid, 3},
		{"[,1]", reasonValueInvalid, 1},
		{"[}", reasonValueInvalid, 1},
		{"[1,", reasonValueInvalid, 3},
		{"{", reasonMissName, 1},
		{"{1:2}", reasonMissName, 1},
		{"{,}", reasonMissName, 1},
		{`{"a":1,}`, reasonMissName, 7},
		{`{"a":1,`, reasonMissName, 7},
		{`{"a":1,2}`, reasonMissName, 7},
		{`{"a"`, reasonMissColon, 4},
		{`{"a" 1}`, reasonMissColon, 5},
		{`{"a"]`, reasonMissColon, 4},
		{`{"a":`, reasonValueInvalid, 5},
		{`{"a":}`, reasonValueInvalid, 5},
		{`{"a":,}`, reasonValueInvalid, 5},
		{`{"a":1`, reasonMissCommaOrCurly, 6},
		{`{"a":1 "b":2}`, reasonMissCommaOrCurly, 7},
		{`{"a":1]`, reasonMissCommaOrCurly, 6},
		{`{"a":1:`, reasonMissCommaOrCurly, 6},
		{`"abc`, reasonMissQuote, 4},
		{"\"a\x00b\"", reasonMissQuote, 2},
		{"\"a\x01\"", reasonBadEscape, 2},
		{"\"a\n\"", reasonBadEscape, 2},
		{"\"\x1f\"", reasonBadEscape, 1},
		{`"\x"`, reasonBadEscape, 1},
		{`"ab\'"`, reasonBadEscape, 3},
		{`"\`, reasonBadEscape, 1},
		{`"\u12"`, reasonBadHex, 1},
		{`"\u12G4"`, reasonBadHex, 1},
		{`"x\uZZZZ"`, reasonBadHex, 2},
		{`"\ud800"`, reasonBadSurrogate, 1},
		{`"\ud800x"`, reasonBadSurrogate, 1},
		{`"\ud800\n"`, reasonBadSurrogate, 1},
		{`"\ud800\u0041"`, reasonBadSurrogate, 1},
		{`"\ud800\u12"`, reasonBadHex, 1},
		{`"\udbff\ue000"`, reasonBadSurrogate, 1},
		{"1.", reasonMissFraction, 2},
		{"1.e5", reasonMissFraction, 2},
		{"-1.x", reasonMissFraction, 3},
		{"1e", reasonMissExponent, 2},
		{"1e+", reasonMissExponent, 3},
		{"1E-x", reasonMissExponent, 3},
		{"[1,2,1e309]", reasonNumberTooBig, 5},
		{"1e309", reasonNumberTooBig, 0},
		{"-1e400", reasonNumberTooBig, 0},
		// A 310-digit integer overflows RapidJSON's double accumulator.
		{"[" + "1" + strings.Repeat("0", 309) + "]", reasonNumberTooBig, 1},
		{"01", reasonRootNotSingular, 1},
		{"[01]", reasonMissCommaOrSquare, 2},
		{"[1]\x00x", "", 0},
	}
	for _, c := range cases {
		_, err := ParseJSON([]byte(c.in))
		if c.reason == "" {
			if err != nil {
				t.Errorf("%q: unexpected error %v", c.in, err)
			}
			continue
		}
		want := "failed to parse the request JSON buffer: " + c.reason + " at " + strconv.Itoa(c.off)
		var ce *status.Error
		if !errors.As(err, &ce) || ce.Code != status.CodeInternal || ce.Msg != want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, want)
		}
	}
}

// TestParseAccepts covers inputs RapidJSON takes that a strict parser
// would not.
func TestParseAccepts(t *testing.T) {
	for _, in := range []string{
		"NaN", "-NaN", "Inf", "-Inf", "Infinity", "-Infinity", "[NaN,Inf,-Infinity]",
		`"\udc00"`, // lone low surrogate (RapidJSON 1.1.0)
		"\"\xff\xfe\"",
		"1e-99999999999999999999",
		"1e308", "2e308", // no overflow check after scaling in 1.1.0
		"{}\x00{", " [ ] ", `{"a":{"b":[[],{}]}}`,
		"0.5e309", // fraction digits raise the exponent bound
		"NaN.5", "-Infe2",
	} {
		if _, err := ParseJSON([]byte(in)); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
}

func root(t *testing.T, s string) Value {
	t.Helper()
	d, err := ParseJSON([]byte(s))
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return d.Root()
}

func TestNumberClasses(t *testing.T) {
	cases := []struct {
		in         string
		isInt      bool
		isUint     bool
		f          float64
		i          int64
		u          uint64
		negZeroOut bool
	}{
		{"0", true, true, 0, 0, 0, false},
		{"-0", true, true, 0, 0, 0, false},
		{"1", true, true, 1, 1, 1, false},
		{"-1", true, false, -1, -1, 0, false},
		{"4294967295", true, true, 4294967295, 4294967295, 4294967295, false},
		{"-2147483649", true, false, -2147483649, -2147483649, 0, false},
		{"9223372036854775807", true, true, 9223372036854775807, math.MaxInt64, math.MaxInt64, false},
		{"9223372036854775808", false, true, 9223372036854775808, 0, 1 << 63, false},
		{"18446744073709551615", false, true, 18446744073709551615, 0, math.MaxUint64, false},
		{"18446744073709551616", false, false, 18446744073709551616, 0, 0, false},
		{"-9223372036854775808", true, false, -9223372036854775808, math.MinInt64, 0, false},
		{"-9223372036854775809", false, false, -9223372036854775809, 0, 0, false},
		{"1.0", false, false, 1, 0, 0, false},
		{"1e2", false, false, 100, 0, 0, false},
		{"-0.0", false, false, 0, 0, 0, true},
		{"0.10000000149011612", false, false, 0.10000000149011612, 0, 0, false},
		{"2e308", false, false, math.Inf(1), 0, 0, false},
		{"NaN.5", false, false, 0.5, 0, 0, false},
		{"-NaN.5", false, false, -0.5, 0, 0, false},
		{"-Infe2", false, false, 0, 0, 0, true},
		{"Inf.25e1", false, false, 2.5, 0, 0, false},
	}
	for _, c := range cases {
		v := root(t, c.in)
		if v.Kind() != KindNumber || v.IsInt64() != c.isInt || v.IsUint64() != c.isUint {
			t.Errorf("%s: kind %v int %v uint %v", c.in, v.Kind(), v.IsInt64(), v.IsUint64())
		}
		f, err := v.Float64()
		if err != nil || f != c.f || math.Signbit(f) != c.negZeroOut && f == 0 {
			t.Errorf("%s: Float64 = %v, %v; want %v", c.in, f, err, c.f)
		}
		if i, err := v.Int64(); c.isInt && (err != nil || i != c.i) {
			t.Errorf("%s: Int64 = %v, %v", c.in, i, err)
		} else if !c.isInt {
			wantError(t, err, status.CodeInternal, MsgNonInt)
		}
		if u, err := v.Uint64(); c.isUint && (err != nil || u != c.u) {
			t.Errorf("%s: Uint64 = %v, %v", c.in, u, err)
		} else if !c.isUint {
			wantError(t, err, status.CodeInternal, MsgNonUint)
		}
	}
	for in, want := range map[string]float64{"NaN": math.NaN(), "-NaN": math.NaN(), "Inf": math.Inf(1), "-Infinity": math.Inf(-1)} {
		f, _ := root(t, in).Float64()
		if !(math.IsNaN(want) && math.IsNaN(f) || f == want) || math.IsNaN(f) && math.Signbit(f) {
			t.Errorf("%s = %v", in, f)
		}
	}
}

func TestStrings(t *testing.T) {
	cases := map[string]string{
		`""`:                         "",
		`"abc"`:                      "abc",
		`"a\"b\\c\/d"`:               "a\"b\\c/d",
		`"\b\f\n\r\t"`:               "\b\f\n\r\t",
		`"\u0000x"`:                  "\x00x",
		`"\u00e9\u20AC"`:             "é€",
		`"\ud83d\ude00"`:             "😀",
		`"\udc00"`:                   "\xed\xb0\x80",
		"\"raw \xff\xfe bytes\"":     "raw \xff\xfe bytes",
		`"tail\u0041"`:               "tailA",
		"\"\x7f\"":                   "\x7f",
		`"x\\"`:                      "x\\",
		`"a` + "\u2028" + `b"`:       "a\u2028b",
		`"esc \u0022 quote"`:         "esc \" quote",
		`"long run then \n end"`:     "long run then \n end",
		`"\ud800\udc00\u007f\u0080"`: "\U00010000\x7f\u0080",
	}
	for in, want := range cases {
		b, err := root(t, in).StringBytes()
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", in, b, err, want)
		}
	}
	s, _ := root(t, `"a\u0000b"`).CString()
	if s != "a" {
		t.Errorf("CString = %q", s)
	}
}

func TestObjectsAndArrays(t *testing.T) {
	v := root(t, `{"b":1,"a":[1,[2,3],{"x":null}],"b":2,"e":{}}`)
	var keys []string
	for k := range v.Members() {
		keys = append(keys, string(k))
	}
	if strings.Join(keys, ",") != "b,a,b,e" {
		t.Fatalf("member order %v", keys)
	}
	if b, _ := v.MemberInt64("b"); b != 1 {
		t.Fatalf("first duplicate must win, got %d", b)
	}
	a, err := v.MemberArray("a")
	if err != nil || a.Len() != 3 {
		t.Fatalf("a: %v %d", err, a.Len())
	}
	e2, err := a.Index(2)
	if err != nil || !e2.IsObject() || e2.Len() != 1 {
		t.Fatalf("a[2]: %v", err)
	}
	if x, ok := e2.Find("x"); !ok || !x.IsNull() {
		t.Fatal("a[2].x")
	}
	if _, err := a.Index(3); err == nil {
		t.Fatal("index 3")
	} else {
		wantError(t, err, status.CodeInternal, "attempt to access non-existing array index '3'")
	}
	var got []int64
	inner, _ := a.Index(1)
	for i, e := range inner.Elements() {
		n, _ := e.Int64()
		got = append(got, int64(i)*10+n)
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 13 {
		t.Fatalf("elements %v", got)
	}
	if v.Len() != 4 || root(t, "5").Len() != 0 {
		t.Fatal("Len")
	}
}

func TestTypeErrorTexts(t *testing.T) {
	v := root(t, `{"s":"x","n":1.5,"b":true,"a":[],"o":{},"z":null,"neg":-1}`)
	checks := []struct {
		err error
		msg string
	}{
		{func() error { _, err := v.MemberString("missing"); return err }(), "attempt to access non-existing object member 'missing'"},
		{func() error { _, err := v.MemberString("n"); return err }(), MsgNonString},
		{func() error { _, err := v.MemberBool("s"); return err }(), MsgNonBool},
		{func() error { _, err := v.MemberInt64("n"); return err }(), MsgNonInt},
		{func() error { _, err := v.MemberUint64("neg"); return err }(), MsgNonUint},
		{func() error { _, err := v.MemberFloat64("s"); return err }(), MsgNonNumber},
		{func() error { _, err := v.MemberArray("o"); return err }(), MsgNonArray},
		{func() error { _, err := v.MemberObject("a"); return err }(), MsgNonObject},
		{func() error { _, err := v.MemberArray("z"); return err }(), MsgNonArray},
		{func() error { a, _ := v.MemberArray("a"); _, err := a.MemberString("x"); return err }(), "attempt to access non-existing object member 'x'"},
		{func() error { _, err := (Value{}).StringBytes(); return err }(), MsgNonString},
	}
	for _, c := range checks {
		wantError(t, c.err, status.CodeInternal, c.msg)
	}
	if f, err := v.MemberFloat64("neg"); err != nil || f != -1 {
		t.Fatalf("int as double: %v %v", f, err)
	}
	if b, err := v.MemberBool("b"); err != nil || !b {
		t.Fatal("bool")
	}
}

// toAny converts a value for comparison with encoding/json (UseNumber).
func toAny(t *testing.T, v Value) any {
	switch v.Kind() {
	case KindNull:
		return nil
	case KindBool:
		b, _ := v.Bool()
		return b
	case KindNumber:
		f, _ := v.Float64()
		return f
	case KindString:
		s, _ := v.Str()
		return s
	case KindArray:
		out := []any{}
		for _, e := range v.Elements() {
			out = append(out, toAny(t, e))
		}
		return out
	}
	out := map[string]any{}
	for k, e := range v.Members() {
		if _, dup := out[string(k)]; !dup {
			out[string(k)] = toAny(t, e)
		}
	}
	return out
}

func stdAny(x any) any {
	switch x := x.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case []any:
		for i := range x {
			x[i] = stdAny(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = stdAny(x[k])
		}
	}
	return x
}

func randomJSON(r *rand.Rand, depth int) any {
	switch k := r.Intn(8); {
	case depth > 4 || k < 2:
		return r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
	case k == 2:
		return r.Int63() - r.Int63()
	case k == 3:
		b := make([]byte, r.Intn(12))
		for i := range b {
			b[i] = byte(r.Intn(128))
		}
		return string(b)
	case k == 4:
		return r.Intn(2) == 0
	case k == 5:
		return nil
	case k == 6:
		a := make([]any, r.Intn(5))
		for i := range a {
			a[i] = randomJSON(r, depth+1)
		}
		return a
	}
	m := map[string]any{}
	for i := r.Intn(5); i > 0; i-- {
		m[strconv.Itoa(r.Intn(100))] = randomJSON(r, depth+1)
	}
	return m
}

// TestParseMatchesEncodingJSON parses random documents written by
// encoding/json and compares the values.
func TestParseMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 3000; i++ {
		src, err := json.Marshal(randomJSON(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			var buf bytes.Buffer
			_ = json.Indent(&buf, src, " ", "\t")
			src = buf.Bytes()
		}
		d, err := ParseJSON(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		dec := json.NewDecoder(bytes.NewReader(src))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		got := toAny(t, d.Root())
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(stdAny(want))
		if !bytes.Equal(gj, wj) {
			t.Fatalf("%s:\n got %s\nwant %s", src, gj, wj)
		}
	}
}

// TestDeepNestingNoStack: nesting up to MaxDepth parses without the call
// stack; deeper documents, closed or not, are parse errors (500), so no
// endpoint answers a million-deep body as if it were fine.
func TestDeepNestingNoStack(t *testing.T) {
	for _, open := range []string{"[", `{"a":`} {
		closer := "]"
		if open != "[" {
			closer = "}"
		}
		src := strings.Repeat(open, MaxDepth) + "1" + strings.Repeat(closer, MaxDepth)
		d, err := ParseJSON([]byte(src))
		if err != nil || d.Root().Len() != 1 {
			t.Fatalf("%s x %d: %v", open, MaxDepth, err)
		}
		tooDeep := "failed to parse the request JSON buffer: The document is nested deeper than 10000 levels. at " + strconv.Itoa(MaxDepth*len(open))
		_, err = ParseJSON([]byte(strings.Repeat(open, MaxDepth+1) + "1" + strings.Repeat(closer, MaxDepth+1)))
		wantError(t, err, status.CodeInternal, tooDeep)
		const depth = 1_000_000
		_, err = ParseJSON([]byte(strings.Repeat(open, depth) + "1" + strings.Repeat(closer, depth)))
		wantError(t, err, status.CodeInternal, tooDeep)
		_, err = ParseJSON([]byte(strings.Repeat(open, depth)))
		wantError(t, err, status.CodeInternal, tooDeep)
	}
	// Below the limit an unclosed document keeps RapidJSON's reason.
	_, err := ParseJSON([]byte(strings.Repeat("[", 100)))
	wantError(t, err, status.CodeInternal, "failed to parse the request JSON buffer: Invalid value. at 100")
}
