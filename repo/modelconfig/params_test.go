package modelconfig

import "testing"

func TestParseBool(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{"true", true, false}, {"TRUE", true, false}, {"On", true, false}, {"1", true, false},
		{"false", false, false}, {"False", false, false}, {"OFF", false, false}, {"0", false, false},
		{"", false, true}, {"yes", false, true}, {"2", false, true}, {" true", false, true}, {"t", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseBool(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("ParseBool(%q) = %v, %v; want %v, err=%v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestStringParameter(t *testing.T) {
	cfg := mustParse(t, `parameters { key: "a" value { string_value: "x" } } parameters { key: "b" value {} }`)
	for _, tc := range []struct {
		key   string
		want  string
		found bool
	}{{"a", "x", true}, {"b", "", true}, {"c", "", false}} {
		if got, ok := StringParameter(cfg, tc.key); got != tc.want || ok != tc.found {
			t.Errorf("StringParameter(%q) = %q, %v", tc.key, got, ok)
		}
	}
}
