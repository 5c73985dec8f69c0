package deploy

// Schema validation of the Kubernetes and KServe manifests: kubeconform's
// validator, in strict mode, against the JSON schemas vendored in
// testdata/schemas (see the README there; `go generate` rewrites them).
// No network: a kind without a vendored schema is an error.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
	"go.yaml.in/yaml/v3"
)

//go:generate go run ./internal/schemagen -manifests kubernetes -out testdata/schemas

// Where kubeconform looks for a kind's schema: Kubernetes' own kinds in
// yannh/kubernetes-json-schema's layout, custom resources in
// datreeio/CRDs-catalog's.
var schemaLocations = []string{
	"testdata/schemas/kubernetes/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json",
	"testdata/schemas/crds/{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json",
}

var manifestValidator = sync.OnceValues(func() (validator.Validator, error) {
	dirs, err := filepath.Glob("testdata/schemas/kubernetes/v*-standalone-strict")
	if err != nil || len(dirs) != 1 {
		return nil, fmt.Errorf("want one testdata/schemas/kubernetes/v<version>-standalone-strict folder, have %v (%v)", dirs, err)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(dirs[0]), "v"), "-standalone-strict")
	return validator.New(schemaLocations, validator.Opts{KubernetesVersion: version, Strict: true})
})

// validate runs kubeconform over the documents in src.
func validate(t *testing.T, name string, src []byte) []validator.Result {
	t.Helper()
	v, err := manifestValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v.Validate(name, io.NopCloser(bytes.NewReader(src)))
}

func describe(r validator.Result) string {
	s := r.Resource.Path + ": a document"
	if sig, err := r.Resource.Signature(); err == nil {
		s = r.Resource.Path + ": " + sig.Version + " " + sig.Kind + " " + sig.Name
	}
	for _, e := range schemaErrors(r) {
		s += "\n\t" + e
	}
	return s
}

// schemaErrors lists the errors of a result, nested ones included, as
// "<instance path>: <message>". (kubeconform's ValidationErrors hold only
// the outermost ones, such as "/spec: validation failed" above a $ref;
// its Err has the whole tree, one "- at '<path>': <message>" each.)
func schemaErrors(r validator.Result) []string {
	if r.Err == nil {
		return nil
	}
	parts := strings.Split(r.Err.Error(), "- at '")
	if len(parts) == 1 {
		return parts
	}
	var out []string
	for _, p := range parts[1:] {
		if path, msg, ok := strings.Cut(p, "': "); ok {
			out = append(out, path+": "+strings.TrimSpace(msg))
		}
	}
	return out
}

// kubeconform validates every document of the manifest at path against
// its vendored schema.
func kubeconform(t *testing.T, path string) {
	t.Helper()
	results := validate(t, path, []byte(read(t, path)))
	if len(results) != len(docs(t, path)) {
		t.Errorf("kubeconform %s: %d results for %d documents", path, len(results), len(docs(t, path)))
	}
	for _, r := range results {
		if r.Status != validator.Valid {
			t.Errorf("kubeconform: %s", describe(r))
		}
	}
}

// edit returns the manifest src with one field of the document of the
// given kind set to value (YAML text), or removed when value is "".
// path is dotted, with list indexes as numbers.
func edit(t *testing.T, src []byte, kind, path, value string) []byte {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var nodes []*yaml.Node
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &n)
	}
	field := func(m *yaml.Node, key string) int {
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return i
			}
		}
		return -1
	}
	var doc *yaml.Node
	for _, n := range nodes {
		if m := n.Content[0]; m.Kind == yaml.MappingNode && field(m, "kind") >= 0 && m.Content[field(m, "kind")+1].Value == kind {
			doc = m
		}
	}
	if doc == nil {
		t.Fatalf("no %s document", kind)
	}
	parts := strings.Split(path, ".")
	n := doc
	for _, p := range parts[:len(parts)-1] {
		switch n.Kind {
		case yaml.MappingNode:
			i := field(n, p)
			if i < 0 {
				t.Fatalf("%s: no %s in %s", kind, p, path)
			}
			n = n.Content[i+1]
		case yaml.SequenceNode:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(n.Content) {
				t.Fatalf("%s: no item %s in %s", kind, p, path)
			}
			n = n.Content[i]
		}
	}
	if n.Kind != yaml.MappingNode {
		t.Fatalf("%s: %s is not in a mapping", kind, path)
	}
	last := parts[len(parts)-1]
	i := field(n, last)
	switch {
	case value == "" && i < 0:
		t.Fatalf("%s: no %s to remove", kind, path)
	case value == "":
		n.Content = append(n.Content[:i], n.Content[i+2:]...)
	default:
		var v yaml.Node
		if err := yaml.Unmarshal([]byte(value), &v); err != nil {
			t.Fatal(err)
		}
		if i >= 0 {
			n.Content[i+1] = v.Content[0]
		} else {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: last}, v.Content[0])
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	for _, n := range nodes {
		if err := enc.Encode(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestManifestSchemasCatchMistakes makes sure the schema check has teeth:
// each mistake (an unknown field, a wrong type, a missing required field)
// put into a copy of a manifest makes kubeconform report exactly that
// document invalid at that place, while the other documents stay valid.
func TestManifestSchemasCatchMistakes(t *testing.T) {
	for _, c := range []struct {
		file, kind, path, value string
		at, msg                 string // where kubeconform reports it, and what
	}{
		{"inferd.yaml", "Deployment", "spec.template.spec.containers.0.imagee", "ghcr.io/x", "/spec/template/spec/containers/0", "'imagee'"},
		{"inferd.yaml", "Deployment", "spec.replicas", "two", "/spec/replicas", "want integer"},
		{"inferd.yaml", "Deployment", "spec.template.spec.containers.0.lifecycle.preStop.sleep.seconds", `"10s"`, "/spec/template/spec/containers/0/lifecycle/preStop/sleep/seconds", "want integer"},
		{"inferd.yaml", "Deployment", "spec.template.spec.containers.0.name", "", "/spec/template/spec/containers/0", "'name'"},
		{"inferd.yaml", "Deployment", "metadata.lables", "{a: b}", "/metadata", "'lables'"},
		{"inferd.yaml", "Service", "spec.ports.0.port", "http", "/spec/ports/0/port", "want integer"},
		{"inferd.yaml", "Service", "spec.selectors", "{a: b}", "/spec", "'selectors'"},
		{"inferd.yaml", "HorizontalPodAutoscaler", "spec.maxReplicas", "ten", "/spec/maxReplicas", "want integer"},
		{"inferd.yaml", "HorizontalPodAutoscaler", "spec.metrics.0.resource.target.averageUtilisation", "70", "/spec/metrics/0/resource/target", "'averageUtilisation'"},
		{"kserve.yaml", "ServingRuntime", "spec.containers.0.imagee", "ghcr.io/x", "/spec/containers/0", "'imagee'"},
		{"kserve.yaml", "ServingRuntime", "spec.protocolVersions", "v2", "/spec/protocolVersions", "want array"},
		{"kserve.yaml", "ServingRuntime", "spec.containers.0.ports.0.containerPort", "http", "/spec/containers/0/ports/0/containerPort", "want integer"},
		{"kserve.yaml", "ServingRuntime", "metadata.lables", "{a: b}", "/metadata", "'lables'"},
		{"kserve.yaml", "InferenceService", "spec.predictor.model.storageURI", "s3://b/m", "/spec/predictor/model", "'storageURI'"},
		{"kserve.yaml", "InferenceService", "spec.predictor.minReplicas", "one", "/spec/predictor/minReplicas", "want integer"},
		{"kserve.yaml", "InferenceService", "spec.predictor.model.modelFormat.name", "", "/spec/predictor/model/modelFormat", "'name'"},
		{"keda.yaml", "ScaledObject", "spec.maxReplicaCount", "ten", "/spec/maxReplicaCount", "want integer"},
		{"keda.yaml", "ScaledObject", "spec.scaleTargetRef.name", "", "/spec/scaleTargetRef", "'name'"},
		{"keda.yaml", "ScaledObject", "spec.triggers.0.metadata.threshold", "8", "/spec/triggers/0/metadata/threshold", "want string"},
		{"keda.yaml", "ScaledObject", "spec.pollingIntervall", "15", "/spec", "'pollingIntervall'"},
		{"keda.yaml", "InferenceService", "spec.predictor.autoScaling.metrics.0.external.metric.backend", "datadog", "/spec/predictor/autoScaling/metrics/0/external/metric/backend", "must be one of"},
		{"hpa-custom-metrics.yaml", "ConfigMap", "data", "{config.yaml: 1}", "/data/config.yaml", "want string"},
		{"hpa-custom-metrics.yaml", "HorizontalPodAutoscaler", "spec.metrics.0.pods.metric.name", "", "/spec/metrics/0/pods/metric", "'name'"},
		{"inference-pool.yaml", "InferencePool", "spec.targetPorts.0.number", "http", "/spec/targetPorts/0/number", "want integer"},
		{"inference-pool.yaml", "InferencePool", "spec.endpointPickerRef.name", "", "/spec/endpointPickerRef", "'name'"},
		{"inference-pool.yaml", "InferencePool", "spec.endpointPickerRef.failureMode", "Retry", "/spec/endpointPickerRef/failureMode", "must be one of"},
		{"inference-pool.yaml", "InferencePool", "spec.selectors", "{a: b}", "/spec", "'selectors'"},
	} {
		what := "set to " + c.value
		if c.value == "" {
			what = "removed"
		}
		t.Run(c.kind+"/"+c.path, func(t *testing.T) {
			path := filepath.Join("kubernetes", c.file)
			src := edit(t, []byte(read(t, path)), c.kind, c.path, c.value)
			var bad []validator.Result
			for _, r := range validate(t, path, src) {
				if r.Status != validator.Valid {
					bad = append(bad, r)
				}
			}
			if len(bad) != 1 {
				t.Fatalf("%s %s %s: %d invalid documents, want 1 (the %s)", c.file, c.path, what, len(bad), c.kind)
			}
			r := bad[0]
			if sig, _ := r.Resource.Signature(); r.Status != validator.Invalid || sig == nil || sig.Kind != c.kind {
				t.Fatalf("%s %s %s: %s", c.file, c.path, what, describe(r))
			}
			for _, e := range schemaErrors(r) {
				if msg, ok := strings.CutPrefix(e, c.at+": "); ok && strings.Contains(msg, c.msg) {
					return
				}
			}
			t.Errorf("%s %s %s: want an error at %s mentioning %s, have %s", c.file, c.path, what, c.at, c.msg, describe(r))
		})
	}
}

// TestManifestSchemasStrict checks what kubeconform's strict mode adds to
// the schemas: duplicate keys are rejected, and a kind with no vendored
// schema is an error, not a skip.
func TestManifestSchemasStrict(t *testing.T) {
	dup := "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  name: b\nspec:\n  ports:\n    - port: 80\n"
	unknown := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: a\n"
	for name, src := range map[string]string{"duplicate key": dup, "unknown kind": unknown} {
		rs := validate(t, name, []byte(src))
		if len(rs) != 1 || rs[0].Status == validator.Valid || rs[0].Status == validator.Skipped {
			t.Errorf("%s: %v", name, rs)
		}
	}
	ok := strings.Replace(dup, "  name: b\n", "", 1)
	if rs := validate(t, "service", []byte(ok)); len(rs) != 1 || rs[0].Status != validator.Valid {
		t.Errorf("minimal Service: %s", describe(rs[0]))
	}
}

// TestVendoredSchemas checks that every schema file is JSON and that the
// README names each of them.
func TestVendoredSchemas(t *testing.T) {
	readme := read(t, "testdata/schemas/README.md")
	var n int
	err := filepath.WalkDir("testdata/schemas", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
			return err
		}
		n++
		if b, err := os.ReadFile(path); err != nil || !json.Valid(b) {
			t.Errorf("%s: not JSON (%v)", path, err)
		}
		rel, _ := filepath.Rel("testdata/schemas", path)
		if !strings.Contains(readme, filepath.ToSlash(rel)) {
			t.Errorf("README.md does not list %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no schemas in testdata/schemas")
	}
}
