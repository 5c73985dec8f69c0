package perf

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// metricsPoller reads the server's Prometheus endpoint every interval
// while settings are measured, as perf_analyzer does with
// --collect-metrics (triton-inference-server/perf_analyzer
// docs/measurements_metrics.md), keeping the utilisation gauges Triton
// exports: nv_cpu_utilization and nv_gpu_utilization, per GPU
// (triton-inference-server/server docs/user_guide/metrics.md).
type metricsPoller struct {
	url    string
	hc     *http.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	samples []metricsSample
	lastErr error
}

// metricsSample is one scrape: utilisation in percent, NaN when the
// server does not export it (no GPU, or CPU metrics off).
type metricsSample struct {
	at       time.Time
	cpu, gpu float64
}

func startMetricsPoller(ctx context.Context, url string, interval time.Duration) *metricsPoller {
	if url == "" {
		url = defaultMetricsURL
	}
	if interval <= 0 {
		interval = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &metricsPoller{url: url, hc: &http.Client{Timeout: 5 * time.Second}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			p.scrape(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *metricsPoller) stop() {
	p.cancel()
	<-p.done
}

func (p *metricsPoller) scrape(ctx context.Context) {
	s, err := p.fetch(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			p.lastErr = err
		}
		return
	}
	p.samples = append(p.samples, s)
}

func (p *metricsPoller) fetch(ctx context.Context) (metricsSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return metricsSample{}, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return metricsSample{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return metricsSample{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return metricsSample{}, fmt.Errorf("metrics %s: HTTP %d", p.url, resp.StatusCode)
	}
	cpu, gpu := parseUtilization(body)
	return metricsSample{at: time.Now(), cpu: cpu, gpu: gpu}, nil
}

// between averages the samples taken from a to b: server CPU and the
// mean over GPUs, in percent; NaN where none.
func (p *metricsPoller) between(a, b time.Time) (cpu, gpu float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cs, gs []float64
	for _, s := range p.samples {
		if s.at.Before(a) || s.at.After(b) {
			continue
		}
		if !math.IsNaN(s.cpu) {
			cs = append(cs, s.cpu)
		}
		if !math.IsNaN(s.gpu) {
			gs = append(gs, s.gpu)
		}
	}
	return average(cs), average(gs)
}

// err is the last failed scrape, if any.
func (p *metricsPoller) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

func average(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// parseUtilization reads nv_cpu_utilization and the mean of the
// nv_gpu_utilization series from Prometheus text, as percentages (the
// gauges are fractions).
func parseUtilization(body []byte) (cpu, gpu float64) {
	cpu = math.NaN()
	var gpus []float64
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			// labels may hold spaces: the value follows the closing brace
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			rest = line[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		switch name {
		case "nv_cpu_utilization":
			cpu = 100 * v
		case "nv_gpu_utilization":
			gpus = append(gpus, 100*v)
		}
	}
	return cpu, average(gpus)
}

const defaultMetricsURL = "http://localhost:8002/metrics"

// setMetricsURL reads --metrics-url: host:port/path, or a full http(s) URL.
func (o *options) setMetricsURL(v string) error {
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: want HOST:PORT/PATH or an http(s) URL", v)
	}
	o.metricsURL = u.String()
	return nil
}

// setMetricsInterval reads --metrics-interval in milliseconds.
func (o *options) setMetricsInterval(v string) error {
	ms, err := strconv.Atoi(v)
	if err != nil || ms <= 0 {
		return fmt.Errorf("%q: want a whole number of milliseconds above 0", v)
	}
	o.metricsInterval = time.Duration(ms) * time.Millisecond
	return nil
}
