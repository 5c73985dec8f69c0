package perf

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

// The HTML report is checked in a real headless Chromium driven over the
// DevTools protocol (chromedp): unlike `chromium --headless --dump-dom`,
// it sees the page's console messages, uncaught exceptions and failed
// loads as they happen, and lets the test measure the drawn SVG elements
// in the rendered page.

// chromium finds Debian's chromium (or another Chrome); without one the
// test skips, or fails where INFERD_REQUIRE_CHROMIUM=1 (CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("INFERD_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("INFERD_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no chromium on PATH (apt-get install chromium), and INFERD_REQUIRE_CHROMIUM=1")
	}
	t.Skip("no chromium on PATH (apt-get install chromium; INFERD_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// chartCheck is what the page says about one chart figure.
type chartCheck struct {
	ID       string `json:"id"`
	Declared int    `json:"declared"` // the svg's data-points
	Drawn    int    `json:"drawn"`    // .pt elements with a rendered box inside the plot
	Lines    int    `json:"lines"`    // polylines with at least one point
}

// checkCharts runs in the page: every figure must hold an svg whose
// markers all render with a non-empty box inside the viewBox.
const checkCharts = `Array.from(document.querySelectorAll("figure.chart")).map(f => {
  const svg = f.querySelector("svg");
  if (!svg) return {id: f.id, declared: -1, drawn: 0, lines: 0};
  const vb = svg.viewBox.baseVal;
  const drawn = Array.from(svg.querySelectorAll(".pt")).filter(e => {
    const b = e.getBBox();
    return (b.width > 0 || b.height > 0) && b.x >= 0 && b.y >= 0 && b.x + b.width <= vb.width && b.y + b.height <= vb.height;
  }).length;
  const lines = Array.from(svg.querySelectorAll("polyline")).filter(p => p.points.numberOfItems > 0).length;
  return {id: f.id, declared: Number(svg.dataset.points), drawn: drawn, lines: lines};
})`

// pageReport is what a browser saw of one page.
type pageReport struct {
	charts   []chartCheck
	console  []string
	fetched  int // resources the page loaded
	png      []byte
	printed  int // charts that lay out at a readable size under print media
	tableLen int
}

// browse opens each file in one headless browser and reports on it.
func browse(t *testing.T, files ...string) []pageReport {
	t.Helper()
	exe := chromium(t)
	profile, err := os.MkdirTemp("", "inferd-chromium-")
	must(t, err)
	t.Cleanup(func() {
		// Chromium's children may still write there for a moment after it exits.
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.WindowSize(1100, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// Start the browser and its tab on bctx: a tab first opened through
	// a console subscription's context would close when it ends.
	must(t, chromedp.Do(bctx))
	var out []pageReport
	for _, f := range files {
		var rep pageReport
		cctx, stopConsole := context.WithCancel(bctx)
		msgs := chromedp.Console(cctx)
		var mu sync.Mutex
		var wg sync.WaitGroup
		wg.Go(func() {
			for m, err := range msgs {
				if err != nil {
					return
				}
				mu.Lock()
				rep.console = append(rep.console, strings.TrimSpace(m.String()+" "+m.URL))
				mu.Unlock()
			}
		})
		abs, err := filepath.Abs(f)
		must(t, err)
		must(t, chromedp.Do(bctx, chromedp.Navigate("file://"+abs)))
		rep.charts, err = chromedp.Run(bctx, chromedp.Evaluate[[]chartCheck](checkCharts))
		must(t, err)
		rep.fetched, err = chromedp.Run(bctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").length`))
		must(t, err)
		rep.tableLen, err = chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("table tbody tr").length`))
		must(t, err)
		rep.png, err = chromedp.Run(bctx, chromedp.FullScreenshot(100))
		must(t, err)
		// The page is read printed too: @media print lays the charts out
		// one per block, each still drawn at a readable size.
		must(t, chromedp.Do(bctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"})
			return err
		})))
		rep.printed, err = chromedp.Run(bctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("figure.chart svg")).filter(s => {
  const r = s.getBoundingClientRect(); return r.width > 200 && r.height > 80 && getComputedStyle(s).display !== "none";
}).length`))
		must(t, err)
		must(t, chromedp.Do(bctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: ""})
			return err
		})))
		// Late messages (a failed load reported after the page's load
		// event) have a moment to arrive.
		time.Sleep(200 * time.Millisecond)
		stopConsole()
		wg.Wait()
		mu.Lock()
		out = append(out, rep)
		mu.Unlock()
	}
	return out
}

// screenshotPath is where a test leaves a screenshot: in
// $INFERD_SCREENSHOT_DIR, to be looked at (CI can keep it as an artifact),
// or else in the test's own temporary folder, which goes with the test.
func screenshotPath(t *testing.T, name string) string {
	dir := os.Getenv("INFERD_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	return filepath.Join(dir, name)
}

// TestReportInBrowser loads a sweep's and a search's report in headless
// Chromium: no console messages of any kind, nothing fetched, every
// chart's points drawn inside its plot, and a screenshot written.
func TestReportInBrowser(t *testing.T) {
	chromium(t) // skip before starting a server
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": {Config: servertest.SimpleConfig("simple"), ONNX: onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))},
	})
	addr := startExplicit(t, root, []string{"simple"})
	dir := t.TempDir()
	sweep, search := filepath.Join(dir, "sweep.html"), filepath.Join(dir, "search.html")
	if code, stdout, stderr := runPerf(t, append([]string{"-m", "simple", "-u", addr, "--concurrency-range", "1:2", "--report", sweep}, fast...)...); code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := runPerf(t, append([]string{"search", "-m", "simple", "-u", addr, "--instance-counts", "1,2",
		"--max-batch-sizes", "8", "--dynamic-batching-delays", "off", "--concurrency", "1,2",
		"--config-out", filepath.Join(dir, "best.pbtxt"), "--report", search}, fast...)...); code != 0 {
		t.Fatalf("search: exit %d\n%s\n%s", code, stdout, stderr)
	}

	pages := browse(t, sweep, search)
	for i, name := range []string{"sweep", "search"} {
		p := pages[i]
		if len(p.console) > 0 {
			t.Errorf("%s report: console messages: %q", name, p.console)
		}
		if p.fetched != 0 {
			t.Errorf("%s report fetched %d resources; it must be self-contained", name, p.fetched)
		}
		if len(p.charts) != 5 {
			t.Errorf("%s report: %d charts, want 5: %+v", name, len(p.charts), p.charts)
		}
		for _, c := range p.charts {
			if c.Declared <= 0 || c.Drawn != c.Declared {
				t.Errorf("%s report, chart %s: %d points declared, %d drawn", name, c.ID, c.Declared, c.Drawn)
			}
			if c.ID != "server-split" && c.Lines == 0 {
				t.Errorf("%s report, chart %s: no line drawn", name, c.ID)
			}
		}
		if p.printed != len(p.charts) {
			t.Errorf("%s report: %d of %d charts lay out at a readable size when printed", name, p.printed, len(p.charts))
		}
		path := screenshotPath(t, "inferd-perf-"+name+"-report.png")
		if err := os.WriteFile(path, p.png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
		} else {
			t.Logf("%s report screenshot: %s (%d bytes)", name, path, len(p.png))
		}
	}
	if want := 2 + 2*2; pages[1].tableLen != want {
		t.Errorf("search report: %d table rows, want %d (2 configurations, 2 settings each)", pages[1].tableLen, want)
	}
}

// TestBrowserSeesErrors proves the check above can fail: a page with a
// script error, a console.error and a missing image is reported.
func TestBrowserSeesErrors(t *testing.T) {
	chromium(t)
	page := filepath.Join(t.TempDir(), "broken.html")
	must(t, os.WriteFile(page, []byte(`<!DOCTYPE html><html><body>
<img src="missing.png"><script>console.error("drawn wrong"); undefinedFunction();</script></body></html>`), 0o644))
	p := browse(t, page)[0]
	all := strings.Join(p.console, "\n")
	for _, want := range []string{"drawn wrong", "undefinedFunction", "missing.png"} {
		if !strings.Contains(all, want) {
			t.Errorf("console messages miss %q:\n%s", want, all)
		}
	}
}
