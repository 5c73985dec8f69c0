package protocol

import (
	"maps"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

func TestHeaderForwarder(t *testing.T) {
	for _, tt := range []struct {
		name    string
		pattern string
		never   []string
		headers map[string][]string
		params  map[string]any // the request's own parameters
		want    map[string]any // nil: no parameters
		err     string
	}{
		{name: "off", pattern: "", headers: map[string][]string{"My-Key": {"v"}}},
		{name: "partial match, any case", pattern: "my-",
			headers: map[string][]string{"X-My-Key": {"v"}, "Other": {"o"}},
			want:    map[string]any{"x-my-key": "v"}},
		{name: "pattern made case-insensitive", pattern: "MY_HEADER.*",
			headers: map[string][]string{"My_header_1": {"1"}, "my_header_2": {"2"}, "header_3": {"3"}},
			want:    map[string]any{"my_header_1": "1", "my_header_2": "2"}},
		{name: "case-sensitive on request, upper-case never matches", pattern: "(?-i)MY_HEADER.*",
			headers: map[string][]string{"MY_HEADER_1": {"1"}}},
		{name: "anchored by the pattern", pattern: "^key$",
			headers: map[string][]string{"Key": {"k"}, "My-Key": {"m"}},
			want:    map[string]any{"key": "k"}},
		{name: "values in order, the last wins", pattern: "dup",
			headers: map[string][]string{"Dup": {"first", "second"}},
			want:    map[string]any{"dup": "second"}},
		{name: "over the request's own parameter", pattern: "^k$",
			headers: map[string][]string{"K": {"header"}}, params: map[string]any{"k": int64(1), "other": true},
			want: map[string]any{"k": "header", "other": true}},
		{name: "reserved sequence_id", pattern: "sequence_id",
			headers: map[string][]string{"Sequence_id": {"1"}},
			err:     "Header 'sequence_id' is reserved for Triton usage and cannot be forwarded."},
		{name: "reserved timeout", pattern: ".*",
			headers: map[string][]string{"timeout": {"1"}, "a": {"x"}},
			err:     "Header 'timeout' is reserved for Triton usage and cannot be forwarded."},
		{name: "reserved triton_ prefix", pattern: ".*",
			headers: map[string][]string{"triton_x": {"1"}},
			err:     "Header 'triton_x' is reserved for Triton usage and cannot be forwarded."},
		{name: "reserved only when matched", pattern: "^my",
			headers: map[string][]string{"priority": {"1"}, "my": {"m"}},
			want:    map[string]any{"my": "m"}},
		{name: "restricted headers never forwarded", pattern: ".*", never: []string{"Infer-Key", "triton-grpc-protocol-k"},
			headers: map[string][]string{"Infer-Key": {"secret"}, "triton-grpc-protocol-k": {"secret"}, "user-agent": {"ua"}},
			want:    map[string]any{"user-agent": "ua"}},
		{name: "transport keys never forwarded", pattern: ".*",
			headers: map[string][]string{":authority": {"h"}, "grpc-timeout": {"1S"}, "grpc-accept-encoding": {"gzip"}, "content-type": {"application/grpc"}},
			want:    map[string]any{"content-type": "application/grpc"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewHeaderForwarder(tt.pattern, tt.never...)
			if err != nil {
				t.Fatal(err)
			}
			req := &core.InferRequest{Parameters: maps.Clone(tt.params)}
			fh := f.Select(tt.headers)
			err = fh.Apply(req)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || ClassOf(err) != core.CodeInvalidArg {
					t.Fatalf("error %v, want INVALID_ARG %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(req.Parameters, tt.want) {
				t.Fatalf("parameters %v, want %v", req.Parameters, tt.want)
			}
		})
	}
}

func TestHeaderForwarderBadPattern(t *testing.T) {
	if _, err := NewHeaderForwarder("my-(", "x"); err == nil || !strings.Contains(err.Error(), `"my-("`) {
		t.Fatalf("error %v", err)
	}
}

// One selection serves every request of a gRPC stream: each gets its own
// parameters.
func TestForwardedHeadersReused(t *testing.T) {
	f, err := NewHeaderForwarder("k")
	if err != nil {
		t.Fatal(err)
	}
	fh := f.Select(map[string][]string{"k": {"v"}})
	a, b := &core.InferRequest{}, &core.InferRequest{}
	if fh.Apply(a) != nil || fh.Apply(b) != nil {
		t.Fatal("apply failed")
	}
	a.Parameters["k"] = "changed"
	if b.Parameters["k"] != "v" {
		t.Fatalf("requests share parameters: %v", b.Parameters)
	}
}

// FuzzHeaderForward feeds header names and values from clients: whatever
// arrives, forwarding never panics, and what it forwards is a lower-case
// name the pattern matches, carrying one of that header's values as a
// string.
func FuzzHeaderForward(f *testing.F) {
	for _, s := range [][2]string{{"My-Key", "v"}, {"sequence_id", "1"}, {"Triton_X", ""}, {":path", "/"}, {"grpc-timeout", "1S"}, {"\xff", "\x00"}} {
		f.Add(s[0], s[1], "my|seq|triton|path")
	}
	f.Fuzz(func(t *testing.T, name, value, pattern string) {
		fw, err := NewHeaderForwarder(pattern, "restricted")
		if err != nil {
			return
		}
		req := &core.InferRequest{}
		fh := fw.Select(map[string][]string{name: {value}, "Restricted": {"r"}})
		if err := fh.Apply(req); err != nil {
			if !strings.Contains(err.Error(), "is reserved for Triton usage") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for k, v := range req.Parameters {
			if k != string(lower(nil, name)) || v != value || k == "restricted" || !fw.re.MatchString(k) {
				t.Fatalf("forwarded %q=%v from %q=%q", k, v, name, value)
			}
		}
	})
}

// BenchmarkHeaderForward is the cost of forwarding on one request with a
// browser-sized header set, one name of which matches.
func BenchmarkHeaderForward(b *testing.B) {
	f, err := NewHeaderForwarder("^x-tenant", "x-api-key")
	if err != nil {
		b.Fatal(err)
	}
	h := map[string][]string{
		"Accept": {"*/*"}, "Accept-Encoding": {"gzip, deflate"}, "Content-Type": {"application/json"},
		"Content-Length": {"312"}, "User-Agent": {"python-requests/2.32"}, "X-Api-Key": {"secret"},
		"X-Tenant-Id": {"a"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	b.ReportAllocs()
	for b.Loop() {
		req := &core.InferRequest{}
		fh := f.Select(h)
		if err := fh.Apply(req); err != nil || req.Parameters["x-tenant-id"] != "a" {
			b.Fatal(err, req.Parameters)
		}
	}
}
