package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// TestInstanceStartSeries: one inferd_model_instance_start_duration_secs
// gauge per instance, labelled like the version's series plus `instance`,
// holding the start time the core recorded.
func TestInstanceStartSeries(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{"slow": {Config: `backend: "gate"
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
metric_tags { key: "team" value: "search" }
`}})
	s := servertest.Start(t, servertest.Options{Repo: root, Backends: []core.Backend{servertest.NewGate()}})
	srv := httptest.NewServer(NewHandler(s, DefaultConfig()))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	if !regexp.MustCompile(`(?m)^# TYPE inferd_model_instance_start_duration_secs gauge$`).MatchString(text) {
		t.Fatalf("no gauge family in:\n%s", text)
	}
	versions := s.ReadyVersions("")
	if len(versions) != 1 || len(versions[0].InstanceStarts()) != 2 {
		t.Fatalf("want one version with two instance starts, got %d versions", len(versions))
	}
	for _, st := range versions[0].InstanceStarts() {
		series := regexp.MustCompile(`(?m)^inferd_model_instance_start_duration_secs\{_team="search",instance="` +
			regexp.QuoteMeta(st.Instance) + `",model="slow",version="1"\} (\S+)$`)
		m := series.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("no series for %s in:\n%s", st.Instance, text)
		}
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || v <= 0 || v != st.Duration.Seconds() {
			t.Errorf("%s: %s, want %v", st.Instance, m[1], st.Duration.Seconds())
		}
	}
}
