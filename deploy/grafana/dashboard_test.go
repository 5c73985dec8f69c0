// Package grafana_test checks the Grafana dashboard (inferd.json) against a
// running server: every series its queries name must be on /metrics.
package grafana_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/onnxrt"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/metrics"
	"github.com/inferd/inferd/repo"
)

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

// load reads inferd.json and returns it with every PromQL text it holds:
// panel targets and the template variables' queries.
func load(t *testing.T) (dashboard, []string) {
	t.Helper()
	raw, err := os.ReadFile("inferd.json")
	servertest.Must(t, err)
	var d dashboard
	servertest.Must(t, json.Unmarshal(raw, &d))
	if d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard without title or uid")
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeated", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: want the ${datasource} variable and at least one query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: a target without expr or refId", p.Title)
			}
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	return d, exprs
}

var seriesName = regexp.MustCompile(`\bnv_[a-z0-9_]+\b`)

// TestDashboardSeriesExist starts a server (a model, the metrics endpoint
// with summaries and the histogram on, CPU polling), sends requests, and
// looks up every series the dashboard names on /metrics. GPU series may be
// missing only where NVML cannot start (no NVIDIA driver).
func TestDashboardSeriesExist(t *testing.T) {
	_, exprs := load(t)
	want := map[string]bool{}
	for _, e := range exprs {
		for _, n := range seriesName.FindAllString(e, -1) {
			want[n] = true
		}
	}
	if len(want) < 20 {
		t.Fatalf("the dashboard names %d series; want the nv_inference_*, nv_cpu_* and nv_gpu_* families", len(want))
	}

	cfg := metrics.DefaultConfig()
	for _, s := range []string{"summary_latencies=true", "histogram_latencies=true"} {
		servertest.Must(t, cfg.ParseSetting(s))
	}
	cfg.Interval = 20 * time.Millisecond
	srv := startCore(t, cfg)
	mh := metrics.NewHandler(srv, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	go mh.Run(ctx, quiet)
	api := httptest.NewServer(httpapi.New(srv, httpapi.Options{Logger: quiet}))
	defer api.Close()
	ms := httptest.NewServer(mh)
	defer ms.Close()

	body := `{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},` +
		`{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	for range 3 {
		resp, err := http.Post(api.URL+"/v2/models/simple/infer", "application/json", strings.NewReader(body))
		servertest.Must(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("infer: %d", resp.StatusCode)
		}
	}
	time.Sleep(50 * time.Millisecond) // a poll or two

	have := scrapeNames(t, ms.URL+"/metrics")
	var gpuMissing []string
	for _, n := range slices.Sorted(maps.Keys(want)) {
		switch {
		case have[n]:
		case strings.HasPrefix(n, "nv_gpu_") || n == "nv_energy_consumption":
			gpuMissing = append(gpuMissing, n)
		default:
			t.Errorf("the dashboard queries %s, which the server does not export", n)
		}
	}
	if len(gpuMissing) > 0 {
		lib := nvml.New()
		if ret := lib.Init(); ret == nvml.SUCCESS {
			_ = lib.Shutdown()
			t.Errorf("NVML works here but %v are missing", gpuMissing)
		} else {
			t.Logf("GPU series %v not checked: no GPU monitoring on this machine (NVML: %s)", gpuMissing, lib.ErrorString(ret))
		}
	}
}

// scrapeNames returns the sample names on a metrics page.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	servertest.Must(t, err)
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end > 0 {
			names[line[:end]] = true
		}
	}
	servertest.Must(t, sc.Err())
	return names
}

// startCore runs the core over `simple` with the metrics' observers
// (summaries, histogram), which servertest.Start does not take.
func startCore(t *testing.T, cfg metrics.Config) *core.Server {
	t.Helper()
	lib, err := onnxrt.FindLibrary("")
	if err != nil {
		t.Fatalf("%v (run `make ort` or set ORT_LIB_PATH)", err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	backend, err := onnxrt.New(onnxrt.Options{LibraryPath: lib, Logger: quiet})
	servertest.Must(t, err)
	root := servertest.WriteRepo(t, map[string]servertest.Model{"simple": servertest.Simple("simple")})
	repos, err := repo.OpenAll(context.Background(), []string{root})
	servertest.Must(t, err)
	srv := core.NewServer(core.Options{Batching: dynamic.Batchers{}, Repos: repos, Backends: []core.Backend{backend}, Observers: cfg.Observers(quiet), Logger: quiet})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		_ = backend.Close()
	})
	servertest.Must(t, srv.Start(context.Background()))
	return srv
}

// TestDashboardShape checks what Grafana needs to import the file: the
// datasource and model variables the queries use.
func TestDashboardShape(t *testing.T) {
	d, exprs := load(t)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["model"] != "query" {
		t.Fatalf("template variables %v; want datasource (datasource) and model (query)", vars)
	}
	for _, e := range exprs {
		if strings.Contains(e, "nv_inference_") && !strings.Contains(e, `model=~"$model"`) && !strings.HasPrefix(e, "label_values") {
			t.Errorf("%q does not follow the model variable", e)
		}
	}
}
