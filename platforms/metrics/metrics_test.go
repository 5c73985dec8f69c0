package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
)

type noModels struct{}

func (noModels) ReadyVersions(string) []*core.ModelVersion { return nil }

func TestParseSetting(t *testing.T) {
	cases := []struct {
		arg      string
		wantErr  bool
		counters bool
	}{
		{"counter_latencies=false", false, false},
		{"counter_latencies=FALSE", false, true}, // only the literal "false" turns them off
		{"counter_latencies=true", false, true},
		{"unknown_setting=1", false, true}, // ignored, as Triton
		{"foo", true, true},
		{"a,b=c", true, true},
		{"=x", true, true},
		{"k=", true, true},
	}
	for _, c := range cases {
		t.Run(c.arg, func(t *testing.T) {
			cfg := DefaultConfig()
			err := cfg.ParseSetting(c.arg)
			if (err != nil) != c.wantErr || cfg.CounterLatencies != c.counters {
				t.Fatalf("err %v, counters %v", err, cfg.CounterLatencies)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	srv := httptest.NewServer(NewHandler(noModels{}, DefaultConfig()))
	defer srv.Close()
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/metrics", 200}, {"GET", "/metrics/", 200}, {"POST", "/metrics", 405}, {"GET", "/other", 404},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s = %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
		if c.status == 200 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; charset=utf-8") {
			t.Errorf("Content-Type %q", resp.Header.Get("Content-Type"))
		}
	}
}
