package tritonjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/inferd/inferd/core/status"
)

// FuzzParseJSON checks the parser against encoding/json: every document
// encoding/json accepts is accepted too, unless it holds a number too large
// for a double or an unpaired high surrogate escape (both of which
// RapidJSON rejects).
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true,{}]}`, `[1e308,-0,"\u00e9"]`, `"\ud800\udc00"`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
		strings.Repeat("[", MaxDepth+5)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := ParseJSON(src)
		if err != nil {
			var ce *status.Error
			if !errors.As(err, &ce) || ce.Code != status.CodeInternal {
				t.Fatalf("parse error %v", err)
			}
		}
		if !json.Valid(src) {
			return
		}
		var std any
		if json.Unmarshal(src, &std) != nil {
			return // a number beyond float64
		}
		if err != nil {
			var ce *status.Error
			errors.As(err, &ce)
			if strings.Contains(ce.Msg, reasonNumberTooBig) || strings.Contains(ce.Msg, reasonBadSurrogate) {
				return
			}
			t.Fatalf("%q: encoding/json accepts, ParseJSON: %v", src, err)
		}
		if d.Root().Kind() == KindInvalid {
			t.Fatal("parsed document without a root")
		}
	})
}
