package trace

import (
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

// FuzzUpdateSet feeds the settings API's numeric values (untrusted text)
// through Set: it never panics, errors are INVALID_ARG with Triton's
// texts, and a value made only of digits reads as strconv reads it.
func FuzzUpdateSet(f *testing.F) {
	for _, s := range []string{"5", "-1", "-2", " 12abc", "x", "", "+", "2147483647", "2147483648", "-2147483649", "0x10", "\t7"} {
		f.Add("trace_rate", s)
		f.Add("trace_count", s)
		f.Add("log_frequency", s)
	}
	f.Fuzz(func(t *testing.T, key, s string) {
		var u Update
		err := u.Set(key, s, GRPCCountMsg)
		if err != nil {
			if core.CodeOf(err) != core.CodeInvalidArg || !strings.HasPrefix(err.Error(), "Unable to parse '"+key+"'") {
				t.Fatalf("%s=%q: %v", key, s, err)
			}
			return
		}
		if n, perr := strconv.ParseInt(s, 10, 32); perr == nil && s != "" && s[0] >= '0' && s[0] <= '9' {
			switch key {
			case "trace_rate":
				if int64(*u.Rate) != n {
					t.Fatalf("rate %q read as %d", s, *u.Rate)
				}
			case "trace_count":
				if int64(*u.Count) != n {
					t.Fatalf("count %q read as %d", s, *u.Count)
				}
			}
		}
	})
}

// FuzzParseConfig: any --trace-config values parse or fail cleanly.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"rate=100", "level=TIMESTAMPS", "triton,file=/tmp/t", "mode=opentelemetry", "opentelemetry,resource=a=b",
		",x=1", "x", "opentelemetry,bsp_max_queue_size=-1", "jaeger,url=x", "level=OFF"} {
		f.Add(s, "mode=opentelemetry")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := ParseConfig([]string{a, b}, Deprecated{})
		if err == nil && c.Level&^(LevelTimestamps|LevelTensors) != 0 {
			t.Fatalf("level %v", c.Level)
		}
	})
}
