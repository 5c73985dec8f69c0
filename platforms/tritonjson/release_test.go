package tritonjson

import (
	"strconv"
	"strings"
	"testing"
)

// dump renders v as a canonical text (kinds, members, raw scalars), to
// compare a document parsed with a reused parser against a fresh one.
func dump(t *testing.T, v Value) string {
	t.Helper()
	var b strings.Builder
	var walk func(v Value)
	walk = func(v Value) {
		switch v.Kind() {
		case KindArray:
			b.WriteString("[" + strconv.Itoa(v.Len()) + ":")
			for _, e := range v.Elements() {
				walk(e)
				b.WriteByte(',')
			}
			b.WriteByte(']')
		case KindObject:
			b.WriteString("{" + strconv.Itoa(v.Len()) + ":")
			for k, m := range v.Members() {
				b.WriteString(strconv.Quote(string(k)) + "=")
				walk(m)
				b.WriteByte(',')
			}
			b.WriteByte('}')
		case KindString:
			s, err := v.Str()
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(strconv.Quote(s))
		case KindNumber:
			f, _ := v.Float64()
			b.WriteString("n" + strconv.FormatFloat(f, 'g', -1, 64))
		case KindBool:
			x, _ := v.Bool()
			b.WriteString(strconv.FormatBool(x))
		default:
			b.WriteString("k" + strconv.Itoa(int(v.Kind())))
		}
	}
	walk(v)
	return b.String()
}

// TestReleaseReuse parses one document after another into Documents that
// are released in between, so each parse may take the parser and node
// list the previous one gave back (larger, smaller, grown past its first
// size, or left by a failed parse), and wants what a fresh parse gives.
func TestReleaseReuse(t *testing.T) {
	deep := strings.Repeat("[", 40) + "1" + strings.Repeat("]", 40) // grows the parser's stack
	long := "[" + strings.TrimSuffix(strings.Repeat(`"a\nb",`, 500), ",") + "]"
	docs := []struct {
		name, src string
		bad       bool
	}{
		{name: "small", src: `{"id":"x","inputs":[{"name":"IN","data":[1,2,3]}]}`},
		{name: "long", src: long},
		{name: "small after long", src: `{"a":true,"b":null}`},
		{name: "deep", src: deep},
		{name: "invalid", src: `{"a":[1,2,`, bad: true},
		{name: "after invalid", src: `{"outputs":[{"name":"OUT","parameters":{"binary_data":true}}]}`},
		{name: "no separators", src: strings.Repeat("[", 38) + strings.Repeat("]", 38)},
		{name: "scalar", src: `"\u00e9t\u00e9"`},
	}
	for round := range 3 {
		for _, c := range docs {
			var d Document
			err := d.Parse([]byte(c.src))
			if c.bad {
				if err == nil {
					t.Fatalf("round %d %s: parsed, want an error", round, c.name)
				}
				d.Release()
				continue
			}
			if err != nil {
				t.Fatalf("round %d %s: %v", round, c.name, err)
			}
			fresh, err := ParseJSON([]byte(c.src))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := dump(t, d.Root()), dump(t, fresh.Root()); got != want {
				t.Fatalf("round %d %s: reused parse\n%s\nwant\n%s", round, c.name, got, want)
			}
			d.Release()
			if d.Root().Exists() && d.nodes != nil {
				t.Fatalf("round %d %s: released document still holds its nodes", round, c.name)
			}
		}
	}
}

// TestReleaseReparse parses twice into one Document, releases it, and
// parses into it again: each parse reads its own source.
func TestReleaseReparse(t *testing.T) {
	var d Document
	for i, src := range []string{`{"a":1}`, `{"b":[2,3]}`, `[4]`} {
		if err := d.Parse([]byte(src)); err != nil {
			t.Fatal(err)
		}
		fresh, _ := ParseJSON([]byte(src))
		if got, want := dump(t, d.Root()), dump(t, fresh.Root()); got != want {
			t.Fatalf("parse %d: %s, want %s", i, got, want)
		}
		if i == 1 {
			d.Release()
		}
	}
}

// TestReleaseAllocs: once a released parser is at hand, parsing a request
// header allocates nothing (it allocated the parser and its node list).
func TestReleaseAllocs(t *testing.T) {
	src := []byte(`{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}`)
	var d Document
	parse := func() {
		if err := d.Parse(src); err != nil {
			t.Fatal(err)
		}
		d.Release()
	}
	parse()
	// A collection may empty the pool mid-run: allow an occasional miss.
	if n := testing.AllocsPerRun(100, parse); n > 0.5 {
		t.Fatalf("%.2f allocations per parse and release, want about 0", n)
	}
	without := testing.AllocsPerRun(100, func() {
		var d Document
		if err := d.Parse(src); err != nil {
			t.Fatal(err)
		}
	})
	if without < 2 {
		t.Fatalf("%.2f allocations per parse without release, want 2 (the check above would prove nothing)", without)
	}
}

// FuzzReleaseReuse parses a, releases the document, and parses b with
// what a gave back: b reads the same as in a fresh document, whatever a
// was (valid, invalid, larger or smaller).
func FuzzReleaseReuse(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,3,4,5,6,7,8,9]}`), []byte(`[1]`))
	f.Add([]byte(`[`), []byte(`{"b":"\u00e9"}`))
	f.Add([]byte(strings.Repeat("[", 50)+strings.Repeat("]", 50)), []byte(`[[[1],[2]],"x"]`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var d Document
		_ = d.Parse(a)
		d.Release()
		errB := d.Parse(b)
		fresh, errFresh := ParseJSON(b)
		if (errB == nil) != (errFresh == nil) {
			t.Fatalf("reused parse error %v, fresh %v", errB, errFresh)
		}
		if errB != nil {
			if errB.Error() != errFresh.Error() {
				t.Fatalf("reused parse error %v, fresh %v", errB, errFresh)
			}
			return
		}
		if got, want := dump(t, d.Root()), dump(t, fresh.Root()); got != want {
			t.Fatalf("reused parse %s, fresh %s", got, want)
		}
		d.Release()
	})
}
