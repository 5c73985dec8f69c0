package codec

import (
	"testing"

	"github.com/inferd/inferd/core"
)

// TestParseHeaderLength covers Inference-Header-Content-Length parsing:
// stoi-like digits, the int32 range and the bound by the body length.
func TestParseHeaderLength(t *testing.T) {
	const (
		notNum = "Unable to parse Inference-Header-Content-Length, got: "
		rng    = "Unable to parse Inference-Header-Content-Length, value is out of range [ -2147483648, 2147483647 ], got: "
	)
	cases := []struct {
		v    string
		body int
		want int
		err  string
	}{
		{"0", 10, 0, ""},
		{"10", 10, 10, ""},
		{"5", 10, 5, ""},
		{" \t\n\v\f\r7", 10, 7, ""},
		{"+7", 10, 7, ""},
		{"-0", 10, 0, ""},
		{"7abc", 10, 7, ""},
		{"0x10", 100, 0, ""},
		{"007", 10, 7, ""},
		{"", 10, 0, notNum},
		{"abc", 10, 0, notNum + "abc"},
		{" ", 10, 0, notNum + " "},
		{"-", 10, 0, notNum + "-"},
		{"+-1", 10, 0, notNum + "+-1"},
		{"x7", 10, 0, notNum + "x7"},
		{"99999999999", 10, 0, rng + "99999999999"},
		{"2147483648", 10, 0, rng + "2147483648"},
		{"-2147483649", 10, 0, rng + "-2147483649"},
		{"123456789012345678901234567890", 10, 0, rng + "123456789012345678901234567890"},
		{"2147483647", 10, 0, "inference header size should be in range (0, 10), got: 2147483647"},
		{"-2147483648", 10, 0, "inference header size should be in range (0, 10), got: -2147483648"},
		{"11", 10, 0, "inference header size should be in range (0, 10), got: 11"},
		{"-1", 10, 0, "inference header size should be in range (0, 10), got: -1"},
		{" 12x", 10, 0, "inference header size should be in range (0, 10), got:  12x"},
	}
	for _, c := range cases {
		got, err := ParseHeaderLength(c.v, c.body)
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("%q: %d, %v; want %d", c.v, got, err, c.want)
			}
			continue
		}
		if c.err == notNum {
			c.err += c.v
		}
		t.Run(c.v, func(t *testing.T) { wantError(t, err, core.CodeInvalidArg, c.err) })
	}
}
