package core

import (
	"slices"
	"testing"
)

// The three views of a BYTES payload (elements, count, offset) come from one
// walker; they must agree on every framing, broken or not.
func TestBytesWalker(t *testing.T) {
	two := AppendBytesElement(AppendBytesElement(nil, []byte("ab")), nil)
	tests := []struct {
		name   string
		data   []byte
		elems  []string // nil: broken framing
		offset map[int64]int
	}{
		{"empty", nil, []string{}, map[int64]int{0: 0, 1: -1}},
		{"two", two, []string{"ab", ""}, map[int64]int{0: 0, 1: 6, 2: 10, 3: -1}},
		{"truncated length", append(slices.Clone(two), 1, 0), nil, map[int64]int{2: 10, 3: -1}},
		{"length past the end", append(slices.Clone(two), 9, 0, 0, 0, 'x'), nil, map[int64]int{2: 10, 3: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			els, err := BytesElements(tt.data)
			n := CountBytesElements(tt.data)
			if tt.elems == nil {
				if err == nil || n != -1 {
					t.Fatalf("broken framing accepted: err=%v count=%d", err, n)
				}
			} else {
				got := []string{}
				for _, e := range els {
					got = append(got, string(e))
				}
				if err != nil || !slices.Equal(got, tt.elems) || n != int64(len(tt.elems)) {
					t.Fatalf("elements %q err %v count %d, want %q", got, err, n, tt.elems)
				}
			}
			for k, want := range tt.offset {
				if got := bytesOffset(tt.data, k); got != want {
					t.Errorf("bytesOffset(%d) = %d, want %d", k, got, want)
				}
			}
		})
	}
}
