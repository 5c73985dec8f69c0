package deploy

// Tests of the scale-out manifests: KEDA (keda.yaml), the custom-metrics
// HPA with prometheus-adapter rules (hpa-custom-metrics.yaml) and the
// Gateway API inference extension's InferencePool with the endpoint
// picker's configuration (inference-pool.yaml). Each is checked against
// what inferd serves (its metric families, inferd.yaml's Deployment and
// ports, kserve.yaml's runtime) and validated against the vendored CRD
// schemas with kubeconform.

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// inferdSeries are the metric families inferd exports, read from
// platforms/metrics (Triton's nv_* and inferd's own inferd_*): a query
// naming another one would never see data.
func inferdSeries(t *testing.T) map[string]bool {
	t.Helper()
	src := read(t, "../platforms/metrics/metrics.go")
	out := map[string]bool{}
	for _, m := range seriesName.FindAllStringSubmatch(src, -1) {
		out[m[1]] = true
	}
	for _, want := range []string{pendingSeries, runningSeries, capacitySeries, headroomSeries} {
		if !out[want] {
			t.Fatalf("platforms/metrics/metrics.go: no %s", want)
		}
	}
	return out
}

const (
	pendingSeries = "nv_inference_pending_request_count"
	runningSeries = "inferd_inference_running_request_count"
	// The autopilot's, for models with a latency target (docs/autopilot.md).
	capacitySeries = "inferd_model_capacity_infer_per_second"
	headroomSeries = "inferd_model_slo_headroom_ratio"
)

// seriesName finds the names of Triton's and inferd's series.
var seriesName = regexp.MustCompile(`\b((?:nv|inferd)_[a-z_]+)`)

// checkSeries fails unless every nv_* and inferd_* series query names is
// one inferd exports, and query names at least one.
func checkSeries(t *testing.T, where, query string, exported map[string]bool) {
	t.Helper()
	names := seriesName.FindAllString(query, -1)
	if len(names) == 0 {
		t.Errorf("%s: query %q names no inferd series", where, query)
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s: query %q names %s, which inferd does not export", where, query, n)
		}
	}
}

// checkPodMatch fails unless query's pod matcher matches the pods of a
// Deployment named deployment (pod names are <deployment>-<hash>-<id>).
func checkPodMatch(t *testing.T, where, query, deployment string) {
	t.Helper()
	m := regexp.MustCompile(`pod=~"([^"]+)"`).FindStringSubmatch(query)
	if m == nil {
		t.Errorf("%s: query %q has no pod matcher", where, query)
		return
	}
	re, err := regexp.Compile("^(?:" + m[1] + ")$")
	if err != nil || !re.MatchString(deployment+"-7d9f8c6b5-x2x4q") {
		t.Errorf("%s: pod matcher %q does not match %s's pods (%v)", where, m[1], deployment, err)
	}
}

func TestKEDA(t *testing.T) {
	const path = "kubernetes/keda.yaml"
	exported := inferdSeries(t)
	k := byKind(t, path)
	so, isvc := k["ScaledObject"], k["InferenceService"]
	if so == nil || isvc == nil {
		t.Fatalf("%s: want a ScaledObject and an InferenceService", path)
	}
	dep := byKind(t, "kubernetes/inferd.yaml")["Deployment"]
	name := str(get(dep, "metadata.name"))
	if str(get(so, "spec.scaleTargetRef.kind")) != "Deployment" || str(get(so, "spec.scaleTargetRef.name")) != name {
		t.Errorf("ScaledObject scaleTargetRef %v does not name inferd.yaml's Deployment %s", get(so, "spec.scaleTargetRef"), name)
	}
	var pending, queueTime, running, capacity bool
	for i, tr := range list(get(so, "spec.triggers")) {
		where := "ScaledObject trigger " + str(get(tr, "name"))
		if str(get(tr, "type")) != "prometheus" {
			t.Errorf("%s: type %q, want prometheus", where, str(get(tr, "type")))
		}
		q := str(get(tr, "metadata.query"))
		checkSeries(t, where, q, exported)
		checkPodMatch(t, where, q, name)
		if !strings.HasPrefix(str(get(tr, "metadata.serverAddress")), "http") || str(get(tr, "metadata.threshold")) == "" {
			t.Errorf("trigger %d: want serverAddress and threshold, have %v", i, get(tr, "metadata"))
		}
		pending = pending || strings.Contains(q, pendingSeries)
		queueTime = queueTime || strings.Contains(q, "nv_inference_queue_duration_us")
		running = running || strings.Contains(q, runningSeries)
		capacity = capacity || strings.Contains(q, capacitySeries)
	}
	if !pending || !queueTime || !running || !capacity {
		t.Errorf("ScaledObject: want triggers on the pending requests (%v), on queue time (%v), on the running requests (%v) and on the capacity within the latency target (%v)",
			pending, queueTime, running, capacity)
	}

	// KServe's own KEDA integration: Standard mode, autoscalerClass keda,
	// the runtime kserve.yaml defines.
	rt := byKind(t, "kubernetes/kserve.yaml")["ServingRuntime"]
	if got := str(get(isvc, "spec.predictor.model.runtime")); got != str(get(rt, "metadata.name")) {
		t.Errorf("InferenceService runtime %q, want kserve.yaml's %q", got, str(get(rt, "metadata.name")))
	}
	ann, _ := get(isvc, "metadata.annotations").(map[string]any)
	if str(ann["serving.kserve.io/autoscalerClass"]) != "keda" || str(ann["serving.kserve.io/deploymentMode"]) != "Standard" {
		t.Errorf("InferenceService annotations %v: want autoscalerClass keda in Standard mode", ann)
	}
	ms := list(get(isvc, "spec.predictor.autoScaling.metrics"))
	if len(ms) == 0 {
		t.Fatal("InferenceService: no autoScaling metrics")
	}
	for _, m := range ms {
		q := str(get(m, "external.metric.query"))
		checkSeries(t, "InferenceService metric", q, exported)
		checkPodMatch(t, "InferenceService metric", q, str(get(isvc, "metadata.name"))+"-predictor")
	}
	kubeconform(t, path)
}

func TestCustomMetricsHPA(t *testing.T) {
	const path = "kubernetes/hpa-custom-metrics.yaml"
	exported := inferdSeries(t)
	k := byKind(t, path)
	cm, hpa := k["ConfigMap"], k["HorizontalPodAutoscaler"]
	if cm == nil || hpa == nil {
		t.Fatalf("%s: want a ConfigMap and a HorizontalPodAutoscaler", path)
	}
	var cfg struct {
		Rules []struct {
			SeriesQuery string `yaml:"seriesQuery"`
			Resources   struct {
				Overrides map[string]struct{ Resource string } `yaml:"overrides"`
			} `yaml:"resources"`
			Name struct {
				Matches string `yaml:"matches"`
				As      string `yaml:"as"`
			} `yaml:"name"`
			MetricsQuery string `yaml:"metricsQuery"`
		} `yaml:"rules"`
	}
	data, _ := get(cm, "data").(map[string]any)
	if err := yaml.Unmarshal([]byte(str(data["config.yaml"])), &cfg); err != nil || len(cfg.Rules) == 0 {
		t.Fatalf("ConfigMap config.yaml: %v, %d rules", err, len(cfg.Rules))
	}
	served := map[string]bool{}
	for _, r := range cfg.Rules {
		checkSeries(t, "adapter rule "+r.Name.As, r.SeriesQuery, exported)
		// <<.Series>> is the series seriesQuery found.
		series, _, _ := strings.Cut(r.SeriesQuery, "{")
		checkSeries(t, "adapter rule "+r.Name.As, strings.ReplaceAll(r.MetricsQuery, "<<.Series>>", series), exported)
		if r.Resources.Overrides["pod"].Resource != "pod" || r.Resources.Overrides["namespace"].Resource != "namespace" {
			t.Errorf("adapter rule %s: want pod and namespace mapped to their resources, have %v", r.Name.As, r.Resources.Overrides)
		}
		if !strings.Contains(r.MetricsQuery, "<<.LabelMatchers>>") || !strings.Contains(r.MetricsQuery, "<<.GroupBy>>") {
			t.Errorf("adapter rule %s: metricsQuery %q lacks <<.LabelMatchers>> or <<.GroupBy>>", r.Name.As, r.MetricsQuery)
		}
		if _, err := regexp.Compile(r.Name.Matches); err != nil || r.Name.As == "" {
			t.Errorf("adapter rule: name %+v", r.Name)
		}
		served[r.Name.As] = true
	}
	dep := byKind(t, "kubernetes/inferd.yaml")["Deployment"]
	if str(get(hpa, "spec.scaleTargetRef.name")) != str(get(dep, "metadata.name")) {
		t.Errorf("HPA scaleTargetRef %v does not name inferd.yaml's Deployment", get(hpa, "spec.scaleTargetRef"))
	}
	ms := list(get(hpa, "spec.metrics"))
	if len(ms) == 0 {
		t.Fatal("HPA: no metrics")
	}
	used := map[string]bool{}
	for _, m := range ms {
		name := str(get(m, "pods.metric.name"))
		if str(get(m, "type")) != "Pods" || !served[name] {
			t.Errorf("HPA metric %v: want a Pods metric the adapter serves (%v)", m, served)
		}
		used[name] = true
	}
	for _, want := range []string{pendingSeries, runningSeries, "inferd_model_slo_utilization"} {
		if !used[want] {
			t.Errorf("HPA: no metric on %s (have %v)", want, used)
		}
	}
	kubeconform(t, path)
}

func TestInferencePool(t *testing.T) {
	const path = "kubernetes/inference-pool.yaml"
	exported := inferdSeries(t)
	k := byKind(t, path)
	pool, cm := k["InferencePool"], k["ConfigMap"]
	if pool == nil || cm == nil {
		t.Fatalf("%s: want an InferencePool and a ConfigMap", path)
	}
	dep := byKind(t, "kubernetes/inferd.yaml")["Deployment"]
	podLabels, _ := get(dep, "spec.template.metadata.labels").(map[string]any)
	sel, _ := get(pool, "spec.selector.matchLabels").(map[string]any)
	for key, v := range sel {
		if podLabels[key] != v {
			t.Errorf("InferencePool selector %s=%v matches no pod label of inferd.yaml", key, v)
		}
	}
	container, _ := get(dep, "spec.template.spec.containers.0").(map[string]any)
	if got, want := str(get(pool, "spec.targetPorts.0.number")), portNumber(container, "http"); got != "8000" || want != 8000 {
		t.Errorf("InferencePool targetPorts %v, want the Deployment's http port %d", get(pool, "spec.targetPorts"), want)
	}

	var cfg map[string]any
	files, _ := get(cm, "data").(map[string]any)
	if len(files) != 1 {
		t.Fatalf("ConfigMap: want one EPP configuration file, have %d", len(files))
	}
	for _, v := range files {
		if err := yaml.Unmarshal([]byte(str(v)), &cfg); err != nil {
			t.Fatal(err)
		}
	}
	if str(cfg["kind"]) != "EndpointPickerConfig" {
		t.Fatalf("ConfigMap: kind %q, want EndpointPickerConfig", str(cfg["kind"]))
	}
	plugins := map[string]any{}
	for _, p := range list(cfg["plugins"]) {
		name := str(get(p, "name"))
		if name == "" {
			name = str(get(p, "type"))
		}
		plugins[name] = p
	}
	for _, prof := range list(cfg["schedulingProfiles"]) {
		for _, ref := range list(get(prof, "plugins")) {
			if plugins[str(get(ref, "pluginRef"))] == nil {
				t.Errorf("scheduling profile %s: plugin %s is not declared", str(get(prof, "name")), str(get(ref, "pluginRef")))
			}
		}
	}
	if parsers := list(get(cfg, "requestHandler.parsers")); len(parsers) != 1 || str(get(parsers[0], "pluginRef")) != "passthrough-parser" {
		t.Errorf("requestHandler parsers %v: want the passthrough parser alone (KServe v2 bodies)", parsers)
	}
	if got := fmt.Sprint(get(plugins["metrics-data-source"], "parameters.port")); got != "8002" || portNumber(container, "metrics") != 8002 {
		t.Errorf("metrics-data-source port %q, want the Deployment's metrics port 8002", got)
	}
	ext := plugins["core-metrics-extractor"]
	engine := str(get(ext, "parameters.defaultEngine"))
	var found bool
	for _, e := range list(get(ext, "parameters.engineConfigs")) {
		if str(get(e, "name")) != engine {
			continue
		}
		found = true
		for spec, series := range map[string]string{"queuedRequestsSpec": pendingSeries, "runningRequestsSpec": runningSeries} {
			q := str(get(e, spec))
			checkSeries(t, "engine "+engine+" "+spec, q, exported)
			if !strings.HasPrefix(q, series+"{") && q != series {
				t.Errorf("engine %s: %s %q, want %s", engine, spec, q, series)
			}
		}
		// No KV cache and no LoRA: those specs stay empty.
		for _, spec := range []string{"kvUsageSpec", "loraSpec", "cacheInfoSpec"} {
			if v := str(get(e, spec)); v != "" {
				t.Errorf("engine %s: %s %q; inferd has no such series", engine, spec, v)
			}
		}
	}
	if !found {
		t.Errorf("core-metrics-extractor: no engineConfigs entry for defaultEngine %q", engine)
	}
	for _, p := range []string{"kv-cache-utilization-scorer", "prefix-cache-scorer", "lora-affinity-scorer"} {
		if plugins[p] != nil {
			t.Errorf("EPP plugin %s reads what inferd does not have", p)
		}
	}
	kubeconform(t, path)
}
