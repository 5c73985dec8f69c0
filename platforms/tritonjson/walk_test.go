package tritonjson

import (
	"strconv"
	"strings"
	"testing"
)

// step prints a value as a walk meets it: position, kind, end.
func step(v Value) string {
	return strconv.Itoa(v.Pos()) + ":" + kindName(v.Kind()) + ":" + strconv.Itoa(v.End())
}

func kindName(k Kind) string {
	return [...]string{"invalid", "null", "bool", "number", "string", "array", "object"}[k]
}

// TestArrayWalk: the walk visits nested arrays before their elements,
// steps over objects whole, and reports positions that tell nesting.
func TestArrayWalk(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string // the steps, space-separated
	}{
		{`[]`, ``},
		{`[1,"a",true,null]`, `1:number:2 2:string:3 3:bool:4 4:null:5`},
		{`[[1,[2]],3]`, `1:array:5 2:number:3 3:array:5 4:number:5 5:number:6`},
		// An object is one step: its name (position 2) and value are skipped.
		{`[{"a":[9]},4]`, `1:object:5 5:number:6`},
		{`[[],[[]]]`, `1:array:2 2:array:4 3:array:4`},
		{`{"a":1}`, ``},
		{`7`, ``},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			var got []string
			w := root(t, tc.doc).ArrayWalk()
			for v, ok := w.Next(); ok; v, ok = w.Next() {
				got = append(got, step(v))
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Fatalf("walk %q, want %q", s, tc.want)
			}
		})
	}
	if w := (Value{}).ArrayWalk(); func() bool { _, ok := w.Next(); return ok }() {
		t.Fatal("the zero Value has something to walk")
	}
}

// TestPosEnd: End minus Pos is one more than the count of values (and
// member names) nested in a value.
func TestPosEnd(t *testing.T) {
	r := root(t, `{"a":[1,2,{"b":null}],"c":"x"}`)
	a, _ := r.Find("a")
	c, _ := r.Find("c")
	for _, tc := range []struct {
		v        Value
		pos, end int
	}{
		{r, 0, 10}, {a, 2, 8}, {c, 9, 10}, {Value{}, 0, 0},
	} {
		if tc.v.Pos() != tc.pos || tc.v.End() != tc.end {
			t.Errorf("%s: pos %d end %d, want %d %d", step(tc.v), tc.v.Pos(), tc.v.End(), tc.pos, tc.end)
		}
	}
}

// TestDocumentParseReuse: a Document parses again in place, reusing its
// buffers, and an earlier parse leaves nothing behind.
func TestDocumentParseReuse(t *testing.T) {
	var d Document
	if err := d.Parse([]byte(`{"a":[1,2,3],"s":"x\ny"}`)); err != nil {
		t.Fatal(err)
	}
	if err := d.Parse([]byte(`["\t",5]`)); err != nil {
		t.Fatal(err)
	}
	r := d.Root()
	s, _ := r.Index(0)
	n, _ := r.Index(1)
	if got, _ := s.Str(); !r.IsArray() || r.Len() != 2 || got != "\t" {
		t.Fatalf("reparsed root %v len %d, first %q", r.Kind(), r.Len(), got)
	}
	if got, _ := n.Int64(); got != 5 {
		t.Fatalf("second element %d", got)
	}
	src := []byte(`[1,2,3]`)
	reparse := testing.AllocsPerRun(100, func() {
		if err := d.Parse(src); err != nil {
			t.Fatal(err)
		}
	})
	fresh := testing.AllocsPerRun(100, func() {
		if _, err := ParseJSON(src); err != nil {
			t.Fatal(err)
		}
	})
	if reparse >= fresh {
		t.Fatalf("reparse allocates %v times, a fresh parse %v: the buffers are not reused", reparse, fresh)
	}
	if err := d.Parse([]byte(`[1,`)); err == nil {
		t.Fatal("broken document parsed")
	}
}
