package vertex

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/python"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/trace"
)

// TestInstancesLog: at verbose level 1 an instances request logs what its
// v2 equivalent logs on the base route: the HTTP request line of the infer
// route, and the inference request.
func TestInstancesLog(t *testing.T) {
	out := &servertest.LogBuffer{}
	logs := logging.New("", logging.State{Info: true, Warning: true, Error: true, Verbose: 1})
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Logs: logs, Logger: slog.New(logs.Handler(out))})
	_, base := listen(t, c, api, "", true)
	for _, body := range []string{id1Body, `{"instances":[[1,2,3]]}`} {
		out.Take()
		if status, _, b := do(t, http.MethodPost, base+predictRoute, nil, body); status != 200 {
			t.Fatalf("%s: %d %s", body, status, b)
		}
		got := out.Take()
		for _, want := range []string{`] "HTTP request: 2 /v2/models/id1/infer"` + "\n", `] "inference request" protocol=HTTP path=/v2/models/id1/infer model=id1 version=1` + "\n"} {
			if strings.Count(got, want) != 1 {
				t.Errorf("%s: log %q has not one %q", body, got, want)
			}
		}
	}
}

// TestInstancesReachTheModel: a model.py sees an instances request's
// parameters (binary_data_output aside) and the headers
// --http-header-forward-pattern selects, but the encodings and the JSON
// header length, which the Vertex listener takes for itself.
func TestInstancesReachTheModel(t *testing.T) {
	root := t.TempDir()
	servertest.WriteParamsModel(t, root, "params")
	py := python.New(python.Options{Executable: servertest.Python(t), ArenaBytes: python.DefaultArenaBytes})
	t.Cleanup(func() { _ = py.Close() })
	c := servertest.Start(t, servertest.Options{Repo: root, Backends: []core.Backend{py}})
	fw, err := protocol.NewHeaderForwarder("my-|encoding|inference", "")
	must(t, err)
	_, base := listen(t, c, httpapi.New(c, httpapi.Options{HeaderForward: fw, Logger: quiet}), "", true)

	status, _, body := do(t, http.MethodPost, base+predictRoute, map[string]string{
		"My-Key": "v", "Accept-Encoding": "gzip", "Content-Encoding": "gzip", codec.HeaderLengthName: "3",
	}, `{"instances":[[1]],"parameters":{"p":1,"s":"x","binary_data_output":true}}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	var preds struct{ Predictions [][]string }
	must(t, json.Unmarshal(body, &preds))
	if len(preds.Predictions) != 1 || len(preds.Predictions[0]) != 1 {
		t.Fatalf("predictions %s", body)
	}
	var params map[string]any
	must(t, json.Unmarshal([]byte(preds.Predictions[0][0]), &params))
	want := map[string]any{"p": 1.0, "s": "x", "my-key": "v"}
	if len(params) != len(want) {
		t.Errorf("parameters %v, want %v", params, want)
	}
	for k, v := range want {
		if params[k] != v {
			t.Errorf("parameter %s = %v, want %v (all: %v)", k, params[k], v, params)
		}
	}
}

// TestInstancesWorkers: an instances request decodes in one of the
// --http-thread-count slots, as a v2 body does on /infer: with the only
// slot taken it waits.
func TestInstancesWorkers(t *testing.T) {
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Workers: 1})
	_, base := listen(t, c, api, "", true)
	release := api.Work()
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(base+predictRoute, "application/json", strings.NewReader(`{"instances":[[1,2,3]]}`))
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case status := <-done:
		release()
		t.Fatalf("answered %d while the only worker slot was taken", status)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if status := <-done; status != 200 {
		t.Fatalf("status %d after the slot was given back", status)
	}
}

// TestInstancesTrace: an instances request is traced as its v2 equivalent
// is: the same timestamps, HTTP's receive and send ones around the core's.
func TestInstancesTrace(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	cfg := trace.DefaultConfig()
	cfg.File, cfg.Level, cfg.Rate = file, trace.LevelTimestamps, 1
	m, err := trace.New(cfg, nil)
	must(t, err)
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Trace: m})
	_, base := listen(t, c, api, "", true)
	for _, body := range []string{id1Body, `{"instances":[[1,2,3]]}`} {
		if status, _, b := do(t, http.MethodPost, base+predictRoute, nil, body); status != 200 {
			t.Fatalf("%s: %d %s", body, status, b)
		}
	}
	must(t, m.Close(context.Background()))
	raw, err := os.ReadFile(file)
	must(t, err)
	var recs []struct {
		ID         uint64
		ModelName  string `json:"model_name"`
		Timestamps []struct{ Name string }
	}
	must(t, json.Unmarshal(raw, &recs))
	var ids []uint64
	stamps := map[uint64][]string{}
	for _, r := range recs {
		if !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
		for _, ts := range r.Timestamps {
			stamps[r.ID] = append(stamps[r.ID], ts.Name)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("%d traces, want 2: %s", len(ids), raw)
	}
	v2Stamps, instStamps := stamps[ids[0]], stamps[ids[1]]
	if !slices.Equal(v2Stamps, instStamps) || len(instStamps) < 4 || instStamps[0] != "HTTP_RECV_START" || instStamps[len(instStamps)-1] != "HTTP_SEND_END" {
		t.Errorf("instances trace %v, v2 trace %v", instStamps, v2Stamps)
	}
}
