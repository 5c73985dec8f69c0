package onnxrt

import "testing"

func TestParseParams(t *testing.T) {
	ints := []struct {
		in   string
		want int
		ok   bool
	}{
		{"2", 2, true}, {" -1", -1, true}, {"+3", 3, true}, {"2x", 2, true}, // std::stoi semantics
		{"", 0, false}, {"x2", 0, false}, {"-", 0, false}, {"99999999999", 0, false},
	}
	for _, tc := range ints {
		got, err := parseInt(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseInt(%q) = %d, %v", tc.in, got, err)
		}
	}
	bools := []struct {
		in       string
		want, ok bool
	}{
		{"true", true, true}, {"ON", true, true}, {"1", true, true},
		{"False", false, true}, {"off", false, true}, {"0", false, true},
		{"yes", false, false}, {"", false, false}, {"2", false, false},
	}
	for _, tc := range bools {
		got, err := parseBool(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBool(%q) = %v, %v", tc.in, got, err)
		}
	}
	if v, err := parseUint64("18446744073709551615"); err != nil || v != 1<<64-1 {
		t.Errorf("parseUint64(max) = %d, %v", v, err)
	}
	if _, err := parseUint64("-1"); err == nil {
		t.Error("parseUint64(-1) accepted")
	}
}
