package tritonjson

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// checkIndex asserts that v's index finds what v.Find finds for every
// member's name, the name cut at its first NUL (what Triton looks up for a
// name it lists as a C string), and each extra name.
func checkIndex(t *testing.T, v Value, extra ...string) {
	t.Helper()
	x := v.IndexMembers()
	probe := func(name string) {
		want, wok := v.Find(name)
		got, gok := x.Find(name)
		if wok != gok || want.Pos() != got.Pos() || want.Exists() != got.Exists() {
			t.Fatalf("%q: index finds %v at %d, Find %v at %d", name, gok, got.Pos(), wok, want.Pos())
		}
	}
	for k := range v.Members() {
		probe(string(k))
		if i := bytes.IndexByte(k, 0); i >= 0 {
			probe(string(k[:i]))
		}
	}
	for _, name := range extra {
		probe(name)
	}
	distinct := map[string]bool{}
	for k := range v.Members() {
		distinct[string(k)] = true
	}
	if n := x.Names(); n < len(distinct) || n > v.Len() || (v.Len() > smallObject && n != len(distinct)) {
		t.Fatalf("Names() = %d for %d members of %d distinct names", n, v.Len(), len(distinct))
	}
}

// bigObject is an object of n members "p<i>" (of value i), then tail.
func bigObject(n int, tail string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		b.WriteString(`"p` + strconv.Itoa(i) + `":` + strconv.Itoa(i) + ",")
	}
	return b.String() + tail + "}"
}

// TestMemberIndex: the index finds the first member of a name, as Find,
// in small and indexed objects, duplicate, escaped, empty and NUL-holding
// names included, and nothing in anything but an object.
func TestMemberIndex(t *testing.T) {
	absent := []string{"", "q", "p", "p-1", "x\x00", "\x00"}
	for _, tc := range []struct{ name, doc string }{
		{"small", `{"a":1,"b":2,"a":3}`},
		{"empty", `{}`},
		{"duplicates", `{"a":1,"b":2,"a":3,"c":4,"d":5,"e":6,"f":7,"g":8,"h":9,"b":10,"i":11}`},
		{"escaped names", `{"\u0061":1,"a":2,"\n":3,"\"":4,"\u00e9":5,"é":6,"k1":7,"k2":8,"k3":9,"k4":10}`},
		{"NUL names", `{"x\u0000a":1,"x\u0000b":2,"y\u0000":3,"k1":4,"k2":5,"k3":6,"k4":7,"k5":8,"x":9,"y":10,"":11,"\u0000":12}`},
		{"large", bigObject(5000, `"p17":"again","":0`)},
		{"large, all one name", "{" + strings.Repeat(`"a":1,`, 3000) + `"b":2}`},
		{"nested values", bigObject(20, `"o":{"p1":1,"p2":2},"a":[{"p3":3}]`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := root(t, tc.doc)
			checkIndex(t, v, absent...)
			if o, ok := v.Find("o"); ok {
				checkIndex(t, o, "p1", "p3")
			}
		})
	}
	for _, doc := range []string{`[1,2]`, `"a"`, `5`} {
		if _, ok := root(t, doc).IndexMembers().Find("a"); ok {
			t.Errorf("%s: index of a non-object finds a member", doc)
		}
	}
	if _, ok := (Value{}).IndexMembers().Find("a"); ok {
		t.Error("index of the zero Value finds a member")
	}
}

// TestMemberIndexSmallAllocates: objects of a few members, every request's
// parameters, are not indexed, so looking up their members allocates
// nothing more than Find does.
func TestMemberIndexSmallAllocates(t *testing.T) {
	v := root(t, `{"sequence_id":1,"priority":2,"timeout":3}`)
	allocs := testing.AllocsPerRun(100, func() {
		x := v.IndexMembers()
		if _, ok := x.Find("priority"); !ok {
			t.Fatal("priority not found")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

// TestParseReservesByLength: the node list is sized from the separators
// only as far as a document of that length could hold values, so a body
// of commas, refused at its first byte, does not reserve 16 bytes a byte.
func TestParseReservesByLength(t *testing.T) {
	src := bytes.Repeat([]byte{','}, 1<<22)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := ParseJSON(src); err == nil {
		t.Fatal("a body of commas parsed")
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 9*uint64(len(src)) {
		t.Fatalf("parsing %d commas allocated %d bytes", len(src), n)
	}
}

// FuzzMemberIndex checks the index against Find on any document whose
// root is an object, and on its object members.
func FuzzMemberIndex(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2,"b\u0000c":3}`,
		`{"p0":0,"p1":1,"p2":2,"p3":3,"p4":4,"p5":5,"p6":6,"p7":7,"p8":8,"p0":9,"p\u0000":10,"":11}`,
		`{"o":{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k1\u0000x":10}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := ParseJSON(src)
		if err != nil || !d.Root().IsObject() {
			return
		}
		checkIndex(t, d.Root(), "", "a", "\x00")
		for _, m := range d.Root().Members() {
			if m.IsObject() {
				checkIndex(t, m, "", "a")
			}
		}
	})
}
