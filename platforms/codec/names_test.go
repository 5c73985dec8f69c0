package codec

import (
	"fmt"
	"testing"
)

// TestNamesRepeated: Names finds a repeat among few names (scanned) and
// many (mapped), and the errors keep each transport's text.
func TestNamesRepeated(t *testing.T) {
	for _, n := range []int{1, 8, 9, 100} {
		var s Names
		for i := 0; i < n; i++ {
			if s.Add(fmt.Sprint("T", i)) {
				t.Fatalf("n=%d: T%d repeated", n, i)
			}
		}
		for i := 0; i < n; i++ {
			if !s.Add(fmt.Sprint("T", i)) {
				t.Fatalf("n=%d: T%d not repeated", n, i)
			}
		}
	}
	if got := DuplicateInput("r1", "X").Error(); got != "[request id: r1] input 'X' already exists in request" {
		t.Errorf("input: %q", got)
	}
	if got := DuplicateOutput("Y").Error(); got != "output 'Y' already exists in request" {
		t.Errorf("output: %q", got)
	}
}
