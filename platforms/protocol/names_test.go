package protocol_test

import (
	"fmt"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
)

// TestNamesRepeated: Names finds a repeat among few names (scanned) and
// many (mapped), and the errors keep each transport's text.
func TestNamesRepeated(t *testing.T) {
	for _, n := range []int{1, 8, 9, 100} {
		var s protocol.Names
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
	if got := protocol.DuplicateInput("r1", "X").Error(); got != "[request id: r1] input 'X' already exists in request" {
		t.Errorf("input: %q", got)
	}
	if got := protocol.DuplicateOutput("Y").Error(); got != "output 'Y' already exists in request" {
		t.Errorf("output: %q", got)
	}
	if err := protocol.RegionTooSmall("O", 4, 8); err.Error() != "shared memory size specified with the request for output 'O' (4 bytes) should be at least 8 bytes to hold the results" || protocol.ClassOf(err) != core.CodeInternal {
		t.Errorf("region: %v (%v)", err, protocol.ClassOf(err))
	}
}
