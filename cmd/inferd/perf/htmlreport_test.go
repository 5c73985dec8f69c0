package perf

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// chartPoints maps each chart figure of a report to its SVG's
// data-points count and the markers actually drawn (circles or rects of
// class "pt").
func chartPoints(t *testing.T, page string) map[string][2]int {
	t.Helper()
	figRE := regexp.MustCompile(`(?s)<figure id="([^"]+)" class="chart[^"]*">(.*?)</figure>`)
	countRE := regexp.MustCompile(`data-points="(\d+)"`)
	out := map[string][2]int{}
	for _, m := range figRE.FindAllStringSubmatch(page, -1) {
		declared := -1
		if c := countRE.FindStringSubmatch(m[2]); c != nil {
			declared, _ = strconv.Atoi(c[1])
		}
		out[m[1]] = [2]int{declared, strings.Count(m[2], `class="pt"`)}
	}
	return out
}

func TestSweepReport(t *testing.T) {
	addr, _, _ := startInferd(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	code, stdout, stderr := runPerf(t, append([]string{"-m", "simple", "-u", addr, "--concurrency-range", "1:3", "--report", report}, fast...)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(report)
	must(t, err)
	page := string(raw)
	// Nothing is fetched: no scripts, style sheets, images or fonts from
	// anywhere.
	for _, banned := range []string{"<script", "<link", "<img", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("report holds %q: it must be self-contained", banned)
		}
	}
	charts := chartPoints(t, page)
	want := map[string]int{"latency-throughput": 3, "percentiles": 9, "batch": 3, "cpu": 3}
	for id, n := range want {
		got, ok := charts[id]
		if !ok {
			t.Errorf("no chart %q; charts: %v", id, charts)
			continue
		}
		if got[0] != n || got[1] != n {
			t.Errorf("chart %q: %d points declared, %d drawn; want %d", id, got[0], got[1], n)
		}
	}
	if got := charts["server-split"]; got[0] < 3 || got[0] != got[1] {
		t.Errorf("server-split chart: %d segments declared, %d drawn; want at least one per setting", got[0], got[1])
	}
	if !strings.Contains(page, "@media print") {
		t.Error("no print styles")
	}
	if n := strings.Count(page, "<tr><td>"); n != 3 {
		t.Errorf("measurement table has %d rows, want 3", n)
	}
	_ = os.WriteFile("/tmp/p2/sweep.html", raw, 0o644)
}
