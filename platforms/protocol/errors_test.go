package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
)

// TestStatuses checks the gRPC and HTTP status of every Triton error class.
func TestStatuses(t *testing.T) {
	for _, tc := range []struct {
		code core.Code
		http int
		grpc protocol.GRPCCode
		num  uint32 // google.golang.org/grpc/codes
	}{
		{core.CodeUnknown, 400, protocol.GRPCUnknown, 2},
		{core.CodeInternal, 500, protocol.GRPCInternal, 13},
		{core.CodeNotFound, 404, protocol.GRPCNotFound, 5},
		{core.CodeInvalidArg, 400, protocol.GRPCInvalidArgument, 3},
		{core.CodeUnavailable, 503, protocol.GRPCUnavailable, 14},
		{core.CodeUnsupported, 501, protocol.GRPCUnimplemented, 12},
		{core.CodeAlreadyExists, 400, protocol.GRPCAlreadyExists, 6},
		{core.CodeCancelled, 400, protocol.GRPCCanceled, 1},
		{core.Code(99), 400, protocol.GRPCUnknown, 2},
		{core.Code(-1), 400, protocol.GRPCUnknown, 2},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			if got := protocol.HTTPStatus(tc.code); got != tc.http {
				t.Errorf("HTTP %d, want %d", got, tc.http)
			}
			if got := protocol.GRPCStatus(tc.code); got != tc.grpc || uint32(got) != tc.num {
				t.Errorf("gRPC %d, want %d", got, tc.num)
			}
		})
	}
}

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want core.Code
	}{
		{"core error", core.Errorf(core.CodeNotFound, "x"), core.CodeNotFound},
		{"wrapped", fmt.Errorf("ctx: %w", core.Errorf(core.CodeAlreadyExists, "x")), core.CodeAlreadyExists},
		{"plain", errors.New("x"), core.CodeInternal},
		{"context", context.Canceled, core.CodeInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := protocol.ClassOf(tc.err); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	const stol = "failed to get model version from specified version string '%s' (details: stol), version should be an integral value > 0"
	const negative = "invalid model version specified '%s' , version should be an integral value > 0"
	for _, tc := range []struct {
		in   string
		want int64
		msg  string // format of the error, "" for none
	}{
		{"", core.LatestVersion, ""},
		{"1", 1, ""},
		{"0", 0, ""},
		{"007", 7, ""},
		{"1abc", 1, ""},
		{" 2", 2, ""},
		{"\t+3", 3, ""},
		{"-0", 0, ""},
		{"9223372036854775807", 9223372036854775807, ""},
		{"9223372036854775808", 0, stol},
		{"99999999999999999999", 0, stol},
		{"abc", 0, stol},
		{"-", 0, stol},
		{" ", 0, stol},
		{"-1", 0, negative},
		{"-9223372036854775808", 0, negative},
		{"-9223372036854775809", 0, stol},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := protocol.ParseVersion(tc.in)
			if tc.msg == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
				return
			}
			if err == nil || protocol.ClassOf(err) != core.CodeInvalidArg || err.Error() != fmt.Sprintf(tc.msg, tc.in) {
				t.Fatalf("got %d, %v; want INVALID_ARG %q", got, err, fmt.Sprintf(tc.msg, tc.in))
			}
		})
	}
}
