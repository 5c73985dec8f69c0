package sagemaker

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestHeaderSize(t *testing.T) {
	cases := []struct {
		ct      string
		length  int64
		size    int
		present bool
		err     string
	}{
		{"", 10, 0, false, ""},
		{"application/json", 10, 0, false, ""},
		{"application/vnd.sagemaker-triton.binary+json", 10, 0, false, ""},
		// a space after ';' or another case is not the vendor type
		{"application/vnd.sagemaker-triton.binary+json; json-header-size=5", 10, 0, false, ""},
		{"Application/vnd.sagemaker-triton.binary+json;json-header-size=5", 10, 0, false, ""},
		{binaryMIME + "5", 10, 5, true, ""},
		{binaryMIME + "0", 10, 0, true, ""},
		{binaryMIME + "10", 10, 10, true, ""},
		{binaryMIME + "+7", 10, 7, true, ""},
		{binaryMIME + " \t\n7xyz", 10, 7, true, ""},
		{binaryMIME + "007", 10, 7, true, ""},
		{binaryMIME + "2147483647", -1, 2147483647, true, ""},
		{"x" + binaryMIME + "5", 10, 0, true, "expect MIME type for binary data starts with"},
		{binaryMIME, 10, 0, true, "Unable to parse"},
		{binaryMIME + "abc", 10, 0, true, "Unable to parse"},
		{binaryMIME + "-", 10, 0, true, "Unable to parse"},
		{binaryMIME + " x5", 10, 0, true, "Unable to parse"},
		{binaryMIME + "-1", 10, 0, true, "should be in range"},
		{binaryMIME + "-0", 10, 0, true, ""},
		{binaryMIME + "11", 10, 0, true, "should be in range"},
		{binaryMIME + "99999999999", 10, 0, true, "out of range"},
		{binaryMIME + "2147483648", -1, 0, true, "out of range"},
		{binaryMIME + "-2147483648", 10, 0, true, "should be in range"},
		{binaryMIME + "-2147483649", 10, 0, true, "out of range"},
		{binaryMIME + strings.Repeat("9", 100), 10, 0, true, "out of range"},
	}
	for _, c := range cases {
		size, present, err := headerSize(c.ct, c.length)
		if c.err == "" {
			if err != nil || size != c.size || present != c.present {
				t.Errorf("%q: got %d %v %v, want %d %v", c.ct, size, present, err, c.size, c.present)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) || !present {
			t.Errorf("%q: err %v, want %q", c.ct, err, c.err)
		}
	}
}

// stoiRef is a slower statement of std::stoi into int32.
var stoiRef = regexp.MustCompile(`^[ \t\n\v\f\r]*([+-]?[0-9]+)`)

func FuzzContentType(f *testing.F) {
	for _, s := range []string{"", "5", "0", "-1", "+3", " 12abc", "abc", "99999999999", "2147483647", "-2147483648", "2147483648", "\v9", "1e3", "0x10"} {
		f.Add(binaryMIME+s, int64(64))
	}
	f.Add("application/json", int64(3))
	f.Add("prefix "+binaryMIME+"1", int64(3))
	f.Add(binaryMIME+"5", int64(-1))
	f.Fuzz(func(t *testing.T, ct string, length int64) {
		size, present, err := headerSize(ct, length)
		pos := strings.Index(ct, binaryMIME)
		if present != (pos >= 0) {
			t.Fatalf("present = %v for %q", present, ct)
		}
		if pos != 0 {
			if err == nil && present {
				t.Fatalf("prefix at %d accepted", pos)
			}
			return
		}
		m := stoiRef.FindStringSubmatch(ct[len(binaryMIME):])
		if m == nil {
			if err == nil {
				t.Fatalf("no digits accepted: %q", ct)
			}
			return
		}
		v, perr := strconv.ParseInt(m[1], 10, 32)
		valid := perr == nil && v >= 0 && (length < 0 || v <= length)
		if valid != (err == nil) {
			t.Fatalf("%q len %d: err %v, reference %d %v", ct, length, err, v, perr)
		}
		if valid && int64(size) != v {
			t.Fatalf("%q: size %d, want %d", ct, size, v)
		}
	})
}
