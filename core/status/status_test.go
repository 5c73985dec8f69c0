package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestCodeOf: the class of an *Error anywhere in the chain, CANCELLED for a
// context's end, INTERNAL for anything else; each class prints as Triton
// names it.
func TestCodeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Code
		name string
	}{
		{Errorf(CodeNotFound, "no model %q", "m"), CodeNotFound, "NOT_FOUND"},
		{fmt.Errorf("wrapped: %w", Errorf(CodeInvalidArg, "bad")), CodeInvalidArg, "INVALID_ARG"},
		{fmt.Errorf("late: %w", context.DeadlineExceeded), CodeCancelled, "CANCELLED"},
		{context.Canceled, CodeCancelled, "CANCELLED"},
		{io.EOF, CodeInternal, "INTERNAL"},
		{errors.New("x"), CodeInternal, "INTERNAL"},
	} {
		if got := CodeOf(c.err); got != c.want || got.String() != c.name {
			t.Errorf("CodeOf(%v) = %v, want %v", c.err, got, c.name)
		}
	}
	if got := Code(99).String(); got != "UNKNOWN" {
		t.Errorf("Code(99) = %s, want UNKNOWN", got)
	}
	if e := Errorf(CodeUnavailable, "%d left", 3); e.Error() != "3 left" || e.Code != CodeUnavailable {
		t.Errorf("Errorf = %+v", e)
	}
}
