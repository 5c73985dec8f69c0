package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// TestRunningRequestsSeries scrapes a real /metrics listener while a gated
// model holds two requests (one per instance) and a third
// waits, then after all are answered: inferd_inference_running_request_count
// sits beside nv_inference_pending_request_count with the same labels.
func TestRunningRequestsSeries(t *testing.T) {
	gate := servertest.NewGate()
	root := servertest.WriteRepo(t, map[string]servertest.Model{"slow": {Config: `backend: "gate"
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 2 } ]
metric_tags { key: "team" value: "search" }
`}})
	s := servertest.Start(t, servertest.Options{Repo: root, Backends: []core.Backend{gate}})
	srv := httptest.NewServer(NewHandler(s, DefaultConfig()))
	t.Cleanup(srv.Close)

	scrape := func() string {
		t.Helper()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	const labels = `{_team="search",model="slow",version="1"}`
	// until waits for the two gauges to read pending and running.
	until := func(pending, running int) {
		t.Helper()
		want := []*regexp.Regexp{
			regexp.MustCompile(`(?m)^nv_inference_pending_request_count` + regexp.QuoteMeta(labels) + ` ` + strconv.Itoa(pending) + `$`),
			regexp.MustCompile(`(?m)^inferd_inference_running_request_count` + regexp.QuoteMeta(labels) + ` ` + strconv.Itoa(running) + `$`),
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			text := scrape()
			if want[0].MatchString(text) && want[1].MatchString(text) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("want pending %d and running %d, scraped:\n%s", pending, running, text)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	until(0, 0)
	if !regexp.MustCompile(`(?m)^# TYPE inferd_inference_running_request_count gauge$`).MatchString(scrape()) {
		t.Fatal("inferd_inference_running_request_count is not a gauge")
	}

	done := make(chan error, 3)
	for i := range 3 {
		req := &core.InferRequest{ModelName: "slow", ModelVersion: core.LatestVersion, Inputs: []*core.Tensor{
			{Name: "INPUT0", DataType: core.TypeInt32, Shape: []int64{1}, Data: []byte{byte(i), 0, 0, 0}}}}
		go func() {
			_, err := s.Infer(context.Background(), req)
			done <- err
		}()
	}
	// Two instances hold two; the third waits for one of them.
	until(1, 2)
	close(gate.Release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	until(0, 0)
}
