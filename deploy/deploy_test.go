package deploy

// Checks of the deployment files. Docker is never run; the Dockerfiles are
// read as text. YAML is parsed with go.yaml.in/yaml/v3 (CloudFormation's
// short-form functions stay visible as tags), and the Kubernetes and KServe
// manifests are validated in-process with kubeconform against the strict
// JSON schemas vendored in testdata/schemas (schema_test.go). When cfn-lint
// is on PATH it runs too, as an extra assertion on the CloudFormation
// templates; without it those subtests are skipped, saying why.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tagged is a node carrying a local tag such as !Ref or !If.
type tagged struct {
	Tag   string
	Value any
}

// parseYAMLDocs parses a file into its documents as a tree of
// map[string]any (mappings), []any (sequences), strings (scalars, as
// written), nil (null) and tagged (nodes with a local tag: CloudFormation's
// !Ref, !If, ...). Empty documents are dropped; duplicate keys and merge
// keys are errors.
func parseYAMLDocs(src string) ([]any, error) {
	dec := yaml.NewDecoder(strings.NewReader(src))
	var docs []any
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			return docs, nil
		} else if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 || n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null" {
			continue // empty, or only comments
		}
		v, err := yamlTree(n.Content[0])
		if err != nil {
			return nil, err
		}
		docs = append(docs, v)
	}
}

func yamlTree(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.AliasNode:
		return yamlTree(n.Alias)
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, nil
		}
		v = n.Value
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			x, err := yamlTree(c)
			if err != nil {
				return nil, err
			}
			l = append(l, x)
		}
		v = l
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, fmt.Errorf("line %d: unsupported key %q", k.Line, k.Value)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			x, err := yamlTree(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = x
		}
		v = m
	default:
		return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		return tagged{n.Tag, v}, nil
	}
	return v, nil
}

// get walks a dotted path: map keys, or list indexes as numbers.
func get(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		switch n := v.(type) {
		case map[string]any:
			v = n[part]
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			v = n[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func strs(v any) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, str(x))
	}
	return out
}

func docs(t *testing.T, path string) []map[string]any {
	t.Helper()
	ds, err := parseYAMLDocs(read(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []map[string]any
	for i, d := range ds {
		m, ok := d.(map[string]any)
		if !ok {
			t.Fatalf("%s: document %d is not a mapping", path, i+1)
		}
		out = append(out, m)
	}
	return out
}

// makefileORTVersion is ORT_VERSION from the repository's Makefile.
func makefileORTVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ORT_VERSION\s*:?=\s*(\S+)\s*$`).FindStringSubmatch(read(t, "../Makefile"))
	if m == nil {
		t.Fatal("Makefile: no ORT_VERSION")
	}
	return m[1]
}

// TestYAMLTree checks the tree parseYAMLDocs builds from the library's
// nodes: scalars as written, CloudFormation tags kept, empty documents
// dropped, and the YAML the files must not contain rejected.
func TestYAMLTree(t *testing.T) {
	good := `# comment
a: 1
b:
  c: "x: y" # trailing
  d: [p, "q, r", {k: v}]
e:
- one
- k: v
  l: w
- - nested
f: !If
  - Cond
  - !Ref X
g: |
  line 1

  line 2
h: 'it''s'
i:
j: !GetAtt R.Arn
---
# only a comment
---
second: doc
`
	ds, err := parseYAMLDocs(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("got %d documents, want 2", len(ds))
	}
	d := ds[0]
	for path, want := range map[string]string{
		"a": "1", "b.c": "x: y", "b.d.1": "q, r", "b.d.2.k": "v", "e.0": "one", "e.1.l": "w",
		"e.2.0": "nested", "g": "line 1\n\nline 2\n", "h": "it's",
	} {
		if got := get(d, path); got != want {
			t.Errorf("%s = %#v, want %q", path, got, want)
		}
	}
	if f, ok := get(d, "f").(tagged); !ok || f.Tag != "!If" || len(list(f.Value)) != 2 || !isTag(list(f.Value)[1], "!Ref", "X") {
		t.Errorf("f = %#v", get(d, "f"))
	}
	if v, ok := d.(map[string]any)["i"]; !ok || v != nil {
		t.Errorf("i = %#v, want null", v)
	}
	if !isTag(get(d, "j"), "!GetAtt", "R.Arn") {
		t.Errorf("j = %#v", get(d, "j"))
	}
	if got := str(get(ds[1], "second")); got != "doc" {
		t.Errorf("second document: %#v", ds[1])
	}
	for name, bad := range map[string]string{
		"tab":          "a:\n\tb: 1\n",
		"indent":       "a: 1\n  b: 2\n",
		"duplicate":    "a: 1\na: 2\n",
		"nested value": "a: b: c\n",
		"alias":        "a: *x\n",
		"merge":        "x: &x {k: v}\ny:\n  <<: *x\n",
		"unterminated": "a: \"x\n",
		"open flow":    "a: [1, 2\n",
	} {
		if _, err := parseYAMLDocs(bad); err == nil {
			t.Errorf("%s: %q parsed without error", name, bad)
		}
	}
}

// TestYAMLFilesParse parses every YAML file under deploy/.
func TestYAMLFilesParse(t *testing.T) {
	var n int
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		n++
		if len(docs(t, path)) == 0 {
			t.Errorf("%s: no documents", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Errorf("found %d YAML files, want at least 4", n)
	}
}

// ---- Kubernetes ------------------------------------------------------------

func byKind(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for i, d := range docs(t, path) {
		kind := str(d["kind"])
		if str(d["apiVersion"]) == "" || kind == "" || str(get(d, "metadata.name")) == "" {
			t.Errorf("%s document %d: want apiVersion, kind and metadata.name", path, i+1)
		}
		if _, dup := out[kind]; dup {
			t.Errorf("%s: two %s documents", path, kind)
		}
		out[kind] = d
	}
	return out
}

// portNumber resolves a probe or Service port (number or container port
// name) against a container.
func portNumber(container map[string]any, port any) int {
	if n, err := strconv.Atoi(str(port)); err == nil {
		return n
	}
	for _, p := range list(container["ports"]) {
		if str(get(p, "name")) == str(port) {
			n, _ := strconv.Atoi(str(get(p, "containerPort")))
			return n
		}
	}
	return 0
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestKubernetesManifest(t *testing.T) {
	const path = "kubernetes/inferd.yaml"
	k := byKind(t, path)
	dep, svc, hpa := k["Deployment"], k["Service"], k["HorizontalPodAutoscaler"]
	if dep == nil || svc == nil || hpa == nil {
		t.Fatalf("%s: want a Deployment, a Service and a HorizontalPodAutoscaler, have %v", path, slices.Sorted(maps.Keys(k)))
	}
	if v := str(dep["apiVersion"]); v != "apps/v1" {
		t.Errorf("Deployment apiVersion %q", v)
	}
	selector, _ := get(dep, "spec.selector.matchLabels").(map[string]any)
	podLabels, _ := get(dep, "spec.template.metadata.labels").(map[string]any)
	if len(selector) == 0 {
		t.Error("Deployment: empty selector")
	}
	for key, v := range selector {
		if podLabels[key] != v {
			t.Errorf("Deployment: selector %s=%v does not match the pod template", key, v)
		}
	}
	c, _ := get(dep, "spec.template.spec.containers.0").(map[string]any)
	if c == nil {
		t.Fatal("Deployment: no container")
	}
	var ports []int
	for _, p := range list(c["ports"]) {
		n, _ := strconv.Atoi(str(get(p, "containerPort")))
		ports = append(ports, n)
	}
	for _, want := range []int{8000, 8001, 8002} {
		if !slices.Contains(ports, want) {
			t.Errorf("Deployment: container ports %v lack %d", ports, want)
		}
	}
	for probe, want := range map[string]string{"readinessProbe": "/v2/health/ready", "livenessProbe": "/v2/health/live"} {
		if got := str(get(c, probe+".httpGet.path")); got != want {
			t.Errorf("Deployment %s path %q, want %q", probe, got, want)
		}
		if got := portNumber(c, get(c, probe+".httpGet.port")); got != 8000 {
			t.Errorf("Deployment %s port resolves to %d, want 8000", probe, got)
		}
	}
	args := strs(c["args"])
	if repo, _ := flagValue(args, "model-repository"); !strings.HasPrefix(repo, "s3://") {
		t.Errorf("Deployment args %v: want an s3:// --model-repository example", args)
	}
	exitTimeout := 30 // inferd's default
	if v, ok := flagValue(args, "exit-timeout-secs"); ok {
		exitTimeout, _ = strconv.Atoi(v)
	}
	preStop, err := strconv.Atoi(str(get(c, "lifecycle.preStop.sleep.seconds")))
	if err != nil || preStop <= 0 {
		t.Errorf("Deployment: want a lifecycle.preStop.sleep drain hook, have %v", get(c, "lifecycle.preStop"))
	}
	grace, _ := strconv.Atoi(str(get(dep, "spec.template.spec.terminationGracePeriodSeconds")))
	if grace <= exitTimeout+preStop {
		t.Errorf("Deployment: terminationGracePeriodSeconds %d must exceed preStop %d s + --exit-timeout-secs %d", grace, preStop, exitTimeout)
	}
	for _, r := range []string{"requests.cpu", "requests.memory", "limits.cpu", "limits.memory"} {
		if str(get(c, "resources."+r)) == "" {
			t.Errorf("Deployment: no resources.%s", r)
		}
	}
	if str(get(dep, "spec.template.spec.securityContext.runAsNonRoot")) != "true" {
		t.Error("Deployment: want securityContext.runAsNonRoot: true")
	}

	// Service: 8000, 8001 (gRPC) and 8002, on the Deployment's pods, each
	// to the same container port.
	svcPorts := map[int]bool{}
	for _, p := range list(get(svc, "spec.ports")) {
		n, _ := strconv.Atoi(str(get(p, "port")))
		svcPorts[n] = true
		if target := portNumber(c, get(p, "targetPort")); target == 0 {
			t.Errorf("Service port %d: targetPort %v is no container port", n, get(p, "targetPort"))
		} else if target != n {
			t.Errorf("Service port %d targets container port %d", n, target)
		}
		if n == 8001 && str(get(p, "appProtocol")) != "kubernetes.io/h2c" {
			t.Errorf("Service gRPC port 8001: appProtocol %q, want kubernetes.io/h2c", str(get(p, "appProtocol")))
		}
	}
	if !svcPorts[8000] || !svcPorts[8001] || !svcPorts[8002] {
		t.Errorf("Service ports %v, want 8000, 8001 and 8002", svcPorts)
	}
	svcSel, _ := get(svc, "spec.selector").(map[string]any)
	for key, v := range svcSel {
		if podLabels[key] != v {
			t.Errorf("Service selector %s=%v matches no pod label", key, v)
		}
	}
	if len(svcSel) == 0 {
		t.Error("Service: empty selector")
	}

	// HPA: autoscaling/v2 on the Deployment, by CPU.
	if v := str(hpa["apiVersion"]); v != "autoscaling/v2" {
		t.Errorf("HPA apiVersion %q, want autoscaling/v2", v)
	}
	if str(get(hpa, "spec.scaleTargetRef.kind")) != "Deployment" || str(get(hpa, "spec.scaleTargetRef.name")) != str(get(dep, "metadata.name")) {
		t.Errorf("HPA scaleTargetRef %v does not name the Deployment", get(hpa, "spec.scaleTargetRef"))
	}
	var cpu bool
	for _, m := range list(get(hpa, "spec.metrics")) {
		if str(get(m, "type")) == "Resource" && str(get(m, "resource.name")) == "cpu" && str(get(m, "resource.target.averageUtilization")) != "" {
			cpu = true
		}
	}
	if !cpu {
		t.Error("HPA: want a CPU utilization target")
	}
	kubeconform(t, path)
}

func TestKServe(t *testing.T) {
	const path = "kubernetes/kserve.yaml"
	k := byKind(t, path)
	rt, isvc := k["ServingRuntime"], k["InferenceService"]
	if rt == nil || isvc == nil {
		t.Fatalf("%s: want a ServingRuntime and an InferenceService", path)
	}
	for _, v := range []string{"v2", "grpc-v2"} {
		if !slices.Contains(strs(get(rt, "spec.protocolVersions")), v) {
			t.Errorf("ServingRuntime protocolVersions %v lack %s", get(rt, "spec.protocolVersions"), v)
		}
	}
	var onnx bool
	for _, f := range list(get(rt, "spec.supportedModelFormats")) {
		onnx = onnx || str(get(f, "name")) == "onnx"
	}
	if !onnx {
		t.Error("ServingRuntime: supportedModelFormats lacks onnx")
	}
	c, _ := get(rt, "spec.containers.0").(map[string]any)
	if str(c["name"]) != "kserve-container" {
		t.Errorf("ServingRuntime container name %q, want kserve-container", str(c["name"]))
	}
	// Triton's command line, as KServe's kserve-tritonserver runtime runs
	// it, through the tritonserver link the CPU image puts on PATH.
	if cmd := strs(c["command"]); !slices.Equal(cmd, []string{"tritonserver"}) {
		t.Errorf("ServingRuntime command %v, want [tritonserver]", cmd)
	} else {
		in := readImgInstall(t, "docker/Dockerfile")
		if _, runs := in.lookup(cmd[0]); runs != in.binary {
			t.Errorf("ServingRuntime command %s: deploy/docker/Dockerfile's image runs no %s by that name", cmd[0], in.binary)
		}
	}
	args := strs(c["args"])
	repo, ok := flagValue(args, "model-store")
	if !ok {
		repo, _ = flagValue(args, "model-repository")
	}
	if repo != "/mnt/models" {
		t.Errorf("ServingRuntime args %v: want --model-store=/mnt/models (or --model-repository)", args)
	}
	port, _ := flagValue(args, "http-port")
	if port != "8080" || str(get(c, "ports.0.containerPort")) != port {
		t.Errorf("ServingRuntime: --http-port=%q and containerPort %v, want both 8080", port, get(c, "ports.0.containerPort"))
	}
	// gRPC (grpc-v2) on 8001, as in the image and inferd.yaml. The runtime
	// declares the REST port only: Knative, under KServe's default
	// Serverless mode, rejects a container with more than one port.
	if v, _ := flagValue(args, "grpc-port"); v != "8001" {
		t.Errorf("ServingRuntime args %v: want --grpc-port=8001", args)
	}
	if v, ok := flagValue(args, "allow-grpc"); ok && v != "true" {
		t.Errorf("ServingRuntime args %v: --allow-grpc=%s turns gRPC off", args, v)
	}
	if n := len(list(c["ports"])); n != 1 {
		t.Errorf("ServingRuntime container declares %d ports; Knative (Serverless mode) accepts one", n)
	}
	if p := str(get(c, "readinessProbe.httpGet.path")); p != "/v2/health/ready" {
		t.Errorf("ServingRuntime readiness path %q", p)
	}
	if got, want := str(get(isvc, "spec.predictor.model.runtime")), str(get(rt, "metadata.name")); got != want {
		t.Errorf("InferenceService runtime %q, want the ServingRuntime %q", got, want)
	}
	if str(get(isvc, "spec.predictor.model.modelFormat.name")) != "onnx" || str(get(isvc, "spec.predictor.model.protocolVersion")) != "v2" {
		t.Errorf("InferenceService model %v: want modelFormat onnx and protocolVersion v2", get(isvc, "spec.predictor.model"))
	}
	if str(get(isvc, "spec.predictor.model.storageUri")) == "" {
		t.Error("InferenceService: no storageUri")
	}
	kubeconform(t, path)
}

func runTool(t *testing.T, bin string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// ---- CloudFormation --------------------------------------------------------

type cfn struct {
	path       string
	doc        map[string]any
	params     map[string]any
	resources  map[string]any
	conditions map[string]any
}

func loadCFN(t *testing.T, path string) *cfn {
	t.Helper()
	ds := docs(t, path)
	if len(ds) != 1 {
		t.Fatalf("%s: %d documents, want 1", path, len(ds))
	}
	c := &cfn{path: path, doc: ds[0]}
	c.params, _ = ds[0]["Parameters"].(map[string]any)
	c.resources, _ = ds[0]["Resources"].(map[string]any)
	c.conditions, _ = ds[0]["Conditions"].(map[string]any)
	if v := str(ds[0]["AWSTemplateFormatVersion"]); v != "2010-09-09" {
		t.Errorf("%s: AWSTemplateFormatVersion %q, want 2010-09-09", path, v)
	}
	if len(c.resources) == 0 {
		t.Fatalf("%s: no Resources", path)
	}
	c.checkRefs(t)
	cfnLint(t, path)
	return c
}

// resource returns the one resource of the given type.
func (c *cfn) resource(t *testing.T, typ string) map[string]any {
	t.Helper()
	var found map[string]any
	for name, r := range c.resources {
		if str(get(r, "Type")) == typ {
			if found != nil {
				t.Errorf("%s: two %s resources (%s and another)", c.path, typ, name)
			}
			found, _ = r.(map[string]any)
		}
	}
	if found == nil {
		t.Fatalf("%s: no %s resource", c.path, typ)
	}
	return found
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// checkRefs makes sure every !Ref, !GetAtt, !Sub variable, !Condition, !If
// and resource Condition names something declared.
func (c *cfn) checkRefs(t *testing.T) {
	t.Helper()
	known := func(name string) bool {
		_, p := c.params[name]
		_, r := c.resources[name]
		return p || r || strings.HasPrefix(name, "AWS::")
	}
	cond := func(name string) {
		if _, ok := c.conditions[name]; !ok {
			t.Errorf("%s: condition %q is not declared", c.path, name)
		}
	}
	for name, r := range c.resources {
		if str(get(r, "Type")) == "" {
			t.Errorf("%s: resource %s has no Type", c.path, name)
		}
		if cn := str(get(r, "Condition")); cn != "" {
			cond(cn)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			for _, x := range n {
				walk(x)
			}
		case []any:
			for _, x := range n {
				walk(x)
			}
		case tagged:
			switch n.Tag {
			case "!Ref":
				if !known(str(n.Value)) {
					t.Errorf("%s: !Ref %v names nothing declared", c.path, n.Value)
				}
			case "!GetAtt":
				res, _, _ := strings.Cut(str(n.Value), ".")
				if _, ok := c.resources[res]; !ok {
					t.Errorf("%s: !GetAtt %v names no resource", c.path, n.Value)
				}
			case "!Condition":
				cond(str(n.Value))
			case "!If":
				cond(str(get(n.Value, "0")))
			case "!Sub":
				tmpl, vars := n.Value, map[string]bool{}
				if l := list(n.Value); l != nil {
					tmpl = get(l, "0")
					m, _ := get(l, "1").(map[string]any)
					for k := range m {
						vars[k] = true
					}
				}
				for _, m := range subVar.FindAllStringSubmatch(str(tmpl), -1) {
					name, _, _ := strings.Cut(m[1], ".")
					if !vars[name] && !known(name) {
						t.Errorf("%s: !Sub variable ${%s} names nothing declared", c.path, m[1])
					}
				}
			}
			walk(n.Value)
		}
	}
	walk(c.doc["Resources"])
	walk(c.doc["Outputs"])
	walk(c.doc["Conditions"])
}

// cfnLint runs cfn-lint on path as a subtest of its own, which is skipped,
// with the reason, when cfn-lint is not installed or does not run: the
// Go checks of the template still run, and `go test -v` shows the SKIP.
// cfn-lint is a Python package (PyPI's cfn-lint); Debian 12 packages no
// cfn-lint, so .ci/run cannot install it from apt.
func cfnLint(t *testing.T, path string) {
	t.Helper()
	t.Run("cfn-lint", func(t *testing.T) {
		bin, err := exec.LookPath("cfn-lint")
		if err != nil {
			t.Skipf("SKIP: cfn-lint is not installed (pip install cfn-lint; Debian has no package of it), so %s gets the Go checks only", path)
		}
		if out, err := runTool(t, bin, "--version"); err != nil {
			t.Skipf("SKIP: cfn-lint on PATH does not run (%v), so %s gets the Go checks only:\n%s", err, path, out)
		}
		if out, err := runTool(t, bin, path); err != nil {
			t.Errorf("cfn-lint %s: %v\n%s", path, err, out)
		}
	})
}

// isTag reports whether v is the tag with a scalar value, e.g. !Ref X.
func isTag(v any, tag, value string) bool {
	n, ok := v.(tagged)
	return ok && n.Tag == tag && str(n.Value) == value
}

// yamlText renders a node for substring checks (actions, env names).
func yamlText(v any) string { return fmt.Sprint(v) }

func TestSageMakerTemplate(t *testing.T) {
	t.Parallel() // cfn-lint takes seconds
	c := loadCFN(t, "sagemaker/cloudformation.yaml")
	for _, p := range []string{"ImageUri", "ModelDataUrl", "InstanceType", "Mode"} {
		if _, ok := c.params[p]; !ok {
			t.Errorf("no parameter %s", p)
		}
	}
	if got := strs(get(c.params, "Mode.AllowedValues")); !slices.Equal(got, []string{"SingleModel", "MultiModel"}) {
		t.Errorf("Mode AllowedValues %v", got)
	}
	model := c.resource(t, "AWS::SageMaker::Model")
	pc := get(model, "Properties.PrimaryContainer")
	if !isTag(get(pc, "Image"), "!Ref", "ImageUri") || !isTag(get(pc, "ModelDataUrl"), "!Ref", "ModelDataUrl") {
		t.Errorf("PrimaryContainer Image/ModelDataUrl %v", pc)
	}
	mode, ok := get(pc, "Mode").(tagged)
	if !ok || mode.Tag != "!If" || !slices.Equal(strs(mode.Value)[1:], []string{"MultiModel", "SingleModel"}) {
		t.Errorf("PrimaryContainer Mode %v: want !If [<condition>, MultiModel, SingleModel]", get(pc, "Mode"))
	} else if !strings.Contains(yamlText(c.conditions[str(get(mode.Value, "0"))]), "Mode") {
		t.Errorf("condition %v does not test the Mode parameter", get(mode.Value, "0"))
	}
	if get(pc, "Environment.SAGEMAKER_TRITON_DEFAULT_MODEL_NAME") == nil {
		t.Error("PrimaryContainer Environment lacks SAGEMAKER_TRITON_DEFAULT_MODEL_NAME")
	}
	if !isTag(get(model, "Properties.ExecutionRoleArn"), "!GetAtt", "ExecutionRole.Arn") {
		t.Errorf("ExecutionRoleArn %v", get(model, "Properties.ExecutionRoleArn"))
	}
	role := yamlText(c.resource(t, "AWS::IAM::Role"))
	for _, want := range []string{"sagemaker.amazonaws.com", "s3:GetObject", "s3:ListBucket", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:GetAuthorizationToken"} {
		if !strings.Contains(role, want) {
			t.Errorf("execution role lacks %s", want)
		}
	}
	ec := c.resource(t, "AWS::SageMaker::EndpointConfig")
	v := get(ec, "Properties.ProductionVariants.0")
	if !isTag(get(v, "ModelName"), "!GetAtt", "Model.ModelName") || !isTag(get(v, "InstanceType"), "!Ref", "InstanceType") {
		t.Errorf("ProductionVariants[0] %v", v)
	}
	ep := c.resource(t, "AWS::SageMaker::Endpoint")
	if !isTag(get(ep, "Properties.EndpointConfigName"), "!GetAtt", "EndpointConfig.EndpointConfigName") {
		t.Errorf("Endpoint EndpointConfigName %v", get(ep, "Properties.EndpointConfigName"))
	}
}

func TestLambdaTemplate(t *testing.T) {
	t.Parallel()
	c := loadCFN(t, "lambda/template.yaml")
	fn := c.resource(t, "AWS::Lambda::Function")
	props := get(fn, "Properties")
	if str(get(props, "PackageType")) != "Image" || get(props, "Code.ImageUri") == nil {
		t.Errorf("Function: want PackageType Image and Code.ImageUri, have %v", props)
	}
	for _, p := range []string{"MemorySize", "Timeout", "EphemeralStorage.Size", "Role"} {
		if get(props, p) == nil {
			t.Errorf("Function: no %s", p)
		}
	}
	env := yamlText(get(props, "Environment.Variables"))
	if !strings.Contains(env, "TRITON_AWS_MOUNT_DIRECTORY") || !strings.Contains(env, "/tmp") {
		t.Errorf("Function environment %s: want TRITON_AWS_MOUNT_DIRECTORY under /tmp", env)
	}
	if !strings.Contains(yamlText(get(props, "ImageConfig")), "--model-repository=${ModelRepository}") {
		t.Errorf("Function ImageConfig %v: want --model-repository from the ModelRepository parameter", get(props, "ImageConfig"))
	}
	url := c.resource(t, "AWS::Lambda::Url")
	if get(url, "Properties.AuthType") == nil || get(url, "Properties.TargetFunctionArn") == nil {
		t.Errorf("Function URL %v: want AuthType and TargetFunctionArn", url)
	}
	var urlPerm, invokePerm bool
	for _, r := range c.resources {
		if str(get(r, "Type")) == "AWS::Lambda::Permission" {
			urlPerm = urlPerm || str(get(r, "Properties.Action")) == "lambda:InvokeFunctionUrl"
			invokePerm = invokePerm || str(get(r, "Properties.InvokedViaFunctionUrl")) == "true"
		}
	}
	if !urlPerm || !invokePerm {
		t.Error("a public Function URL needs lambda:InvokeFunctionUrl and lambda:InvokeFunction (InvokedViaFunctionUrl) permissions")
	}
	role := yamlText(c.resource(t, "AWS::IAM::Role"))
	for _, want := range []string{"lambda.amazonaws.com", "AWSLambdaBasicExecutionRole", "s3:GetObject"} {
		if !strings.Contains(role, want) {
			t.Errorf("function role lacks %s", want)
		}
	}
}

// ---- Dockerfiles -----------------------------------------------------------

type instr struct {
	op, args string
}

type stage struct {
	from, name string
	instrs     []instr
}

type dockerfile struct {
	globalArgs map[string]string
	stages     []stage
}

// parseDockerfile joins continuation lines, drops comments and groups the
// instructions by stage.
func parseDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	df := &dockerfile{globalArgs: map[string]string{}}
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(read(t, path), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s: ends in a continuation line", path)
	}
	for _, l := range logical {
		op, args, _ := strings.Cut(l, " ")
		op = strings.ToUpper(op)
		args = strings.TrimSpace(args)
		switch {
		case op == "FROM":
			f := strings.Fields(args)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			df.stages = append(df.stages, s)
		case len(df.stages) == 0 && op == "ARG":
			k, v, _ := strings.Cut(args, "=")
			df.globalArgs[k] = v
		case len(df.stages) == 0:
			t.Errorf("%s: %s before the first FROM", path, op)
		default:
			s := &df.stages[len(df.stages)-1]
			s.instrs = append(s.instrs, instr{op, args})
		}
	}
	if len(df.stages) == 0 {
		t.Fatalf("%s: no FROM", path)
	}
	return df
}

// base resolves a stage's FROM through global ARG defaults.
func (df *dockerfile) base(s stage) string {
	return os.Expand(s.from, func(k string) string { return df.globalArgs[k] })
}

func (s stage) all(op string) []string {
	var out []string
	for _, in := range s.instrs {
		if in.op == op {
			out = append(out, in.args)
		}
	}
	return out
}

func (s stage) text() string {
	var b strings.Builder
	for _, in := range s.instrs {
		b.WriteString(in.op + " " + in.args + "\n")
	}
	return b.String()
}

// effective returns the last value of op in the final stage, following
// FROM <earlier stage> chains (as USER and ENTRYPOINT are inherited).
func (df *dockerfile) effective(op string) string {
	for i := len(df.stages) - 1; i >= 0; {
		s := df.stages[i]
		if v := s.all(op); len(v) > 0 {
			return v[len(v)-1]
		}
		j := slices.IndexFunc(df.stages[:i], func(p stage) bool { return p.name != "" && p.name == s.from })
		if j < 0 {
			return ""
		}
		i = j
	}
	return ""
}

func (df *dockerfile) stage(name string) *stage {
	for i := range df.stages {
		if df.stages[i].name == name {
			return &df.stages[i]
		}
	}
	return nil
}

// TestPythonStage: the CPU Dockerfile's python target has Debian's python3
// and numpy, the binary and library, and runs as non-root; the default
// target stays the last, small one.
func TestPythonStage(t *testing.T) {
	df := parseDockerfile(t, filepath.Join("docker", "Dockerfile"))
	py := df.stage("python")
	if py == nil {
		t.Fatal("no python stage")
	}
	text := py.text()
	for _, want := range []string{"python3 python3-numpy", "COPY --from=ort /out/onnxruntime /opt/onnxruntime", "COPY --from=build /out/bin/ /usr/local/bin/",
		"ORT_LIB_PATH=/opt/onnxruntime/lib/libonnxruntime.so.1", "EXPOSE 8000 8001 8002 8080"} {
		if !strings.Contains(text, want) {
			t.Errorf("python stage lacks %q", want)
		}
	}
	if df.base(*py) != "debian:bookworm-slim" || !slices.Contains(py.all("USER"), "65532:65532") {
		t.Errorf("python stage: base %q, users %v", df.base(*py), py.all("USER"))
	}
	if last := df.stages[len(df.stages)-1]; df.base(last) != "runtime" {
		t.Errorf("the default target is based on %q, want the distroless runtime", df.base(last))
	}
}

func TestDockerfiles(t *testing.T) {
	ortVersion := makefileORTVersion(t)
	if ortVersion != "1.29.0" {
		t.Logf("Makefile ORT_VERSION is %s", ortVersion)
	}
	ignore := dockerignore(t)
	for _, file := range []string{"Dockerfile", "Dockerfile.gpu", "Dockerfile.lambda"} {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join("docker", file)
			df := parseDockerfile(t, path)
			final := df.stages[len(df.stages)-1]

			entry := df.effective("ENTRYPOINT")
			if !strings.HasPrefix(entry, "[") {
				t.Errorf("ENTRYPOINT %q: want the exec form", entry)
			}
			ort := df.stage("ort")
			if ort == nil {
				t.Fatal("no ort stage")
			}
			if got := strings.TrimPrefix(ort.all("ARG")[0], "ORT_VERSION="); got != ortVersion {
				t.Errorf("ORT_VERSION %q, Makefile has %q", got, ortVersion)
			}
			ortText := ort.text()
			for _, want := range []string{
				"https://github.com/microsoft/onnxruntime/releases/download/v${ORT_VERSION}/",
				`if [ -n "${ORT_SHA256}" ]`, "sha256sum -c", "libonnxruntime.so",
			} {
				if !strings.Contains(ortText, want) {
					t.Errorf("ort stage lacks %q", want)
				}
			}
			var envs []string
			for i := range df.stages {
				envs = append(envs, df.stages[i].all("ENV")...)
			}
			if !strings.Contains(strings.Join(envs, "\n"), "ORT_LIB_PATH=/opt/onnxruntime/lib/libonnxruntime.so.1") {
				t.Error("no ENV ORT_LIB_PATH naming the copied library")
			}
			build := df.stage("build")
			if build == nil {
				t.Fatal("no build stage")
			}
			bt := build.text()
			for _, want := range []string{"CGO_ENABLED=1", "go build -trimpath", `-ldflags "-s -w`, "./cmd/inferd"} {
				if !strings.Contains(bt, want) {
					t.Errorf("build stage lacks %q", want)
				}
			}
			// Every COPY from the build context names something that exists
			// and that .dockerignore lets through.
			for _, s := range df.stages {
				for _, c := range s.all("COPY") {
					if strings.HasPrefix(c, "--from=") {
						continue
					}
					f := strings.Fields(c)
					for _, src := range f[:len(f)-1] {
						if strings.HasPrefix(src, "--") {
							continue
						}
						if _, err := os.Stat(filepath.Join("..", src)); err != nil {
							t.Errorf("COPY %s: %v", src, err)
						}
						if ignored(ignore, src) {
							t.Errorf("COPY %s: excluded by .dockerignore", src)
						}
					}
				}
			}

			user := df.effective("USER")
			switch file {
			case "Dockerfile.lambda":
				if b := df.base(final); b != "public.ecr.aws/lambda/provided:al2023" {
					t.Errorf("final base %q, want public.ecr.aws/lambda/provided:al2023", b)
				}
				if user != "" {
					t.Errorf("USER %q: Lambda picks the user itself", user)
				}
				if !strings.Contains(bt, "-tags lambda.norpc,inferd_lambda") || !strings.Contains(bt, "-o /out/bootstrap") {
					t.Error("build stage: want -tags lambda.norpc,inferd_lambda (the Lambda build) and a bootstrap binary")
				}
				ft := final.text()
				for _, want := range []string{"/var/runtime/bootstrap", "COPY examples/model_repository /opt/models", "TRITON_AWS_MOUNT_DIRECTORY=/tmp"} {
					if !strings.Contains(ft, want) {
						t.Errorf("final stage lacks %q", want)
					}
				}
				if entry != `["/var/runtime/bootstrap"]` {
					t.Errorf("ENTRYPOINT %s", entry)
				}
			default:
				if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root:") {
					t.Errorf("final stage USER %q: want non-root", user)
				}
				if entry != `["inferd"]` {
					t.Errorf(`ENTRYPOINT %s, want ["inferd"]`, entry)
				}
				b := df.base(final)
				if file == "Dockerfile.gpu" {
					if r := df.stage("runtime"); r == nil || !strings.HasPrefix(df.base(*r), "nvidia/cuda:13.") || !strings.Contains(df.base(*r), "cudnn-runtime") {
						t.Errorf("GPU runtime base must be nvidia/cuda:13.x-cudnn-runtime")
					}
					if !strings.Contains(ortText, "ORT_GPU_ARCHIVE=") {
						t.Error("GPU archive name is not a build ARG")
					}
				} else if r := df.stage("runtime"); r == nil || !slices.Contains([]string{"gcr.io/distroless/cc-debian12", "debian:bookworm-slim"}, df.base(*r)) {
					t.Errorf("runtime base %q: want distroless/cc-debian12 or debian:bookworm-slim", b)
				}
				sm := df.stage("sagemaker")
				if sm == nil || !slices.Contains(sm.all("USER"), "0:0") {
					t.Error("want a sagemaker stage running as root (SageMaker mounts /opt/ml for root)")
				}
				var exposed []string
				var labels string
				for _, s := range df.stages {
					for _, e := range s.all("EXPOSE") {
						exposed = append(exposed, strings.Fields(e)...)
					}
					labels += strings.Join(s.all("LABEL"), " ")
				}
				for _, p := range []string{"8000", "8001", "8002", "8080"} {
					if !slices.Contains(exposed, p) {
						t.Errorf("EXPOSE %v lacks %s", exposed, p)
					}
				}
				for _, l := range []string{"com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true", "com.amazonaws.sagemaker.capabilities.multi-models=true"} {
					if !strings.Contains(labels, l) {
						t.Errorf("no LABEL %s", l)
					}
				}
			}
		})
	}
}

func dockerignore(t *testing.T) []string {
	var pats []string
	for _, l := range strings.Split(read(t, "../.dockerignore"), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/"))
		}
	}
	return pats
}

// ignored is a rough .dockerignore match: a pattern equal to the path or
// one of its parents, or a glob matching it.
func ignored(pats []string, path string) bool {
	path = filepath.Clean(path)
	for _, p := range pats {
		for q := path; q != "." && q != "/"; q = filepath.Dir(q) {
			if ok, _ := filepath.Match(strings.TrimPrefix(p, "**/"), filepath.Base(q)); ok && strings.HasPrefix(p, "**/") {
				return true
			}
			if ok, _ := filepath.Match(p, q); ok {
				return true
			}
		}
	}
	return false
}

func TestDockerignore(t *testing.T) {
	pats := dockerignore(t)
	for _, want := range []string{"bin", "third_party", ".git"} {
		if !slices.Contains(pats, want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "cmd/inferd/main.go", "examples/model_repository/simple/config.pbtxt", "core", "platforms", "repo"} {
		if ignored(pats, keep) {
			t.Errorf(".dockerignore excludes %s, which the image build needs", keep)
		}
	}
	if !ignored(pats, "third_party/onnxruntime/libonnxruntime.so.1") || !ignored(pats, "bin/inferd") || !ignored(pats, "httpapi.test") ||
		!ignored(pats, ".gpu-bundle/gpu-0123abcd.01of04") {
		t.Error(".dockerignore lets build outputs through")
	}
}

// ---- READMEs ---------------------------------------------------------------

func TestREADMEs(t *testing.T) {
	for path, wants := range map[string][]string{
		"sagemaker/README.md": {"docker build", "--target sagemaker", "aws ecr create-repository", "aws ecr get-login-password", "docker push",
			"model.tar.gz", "aws cloudformation deploy", "aws sagemaker-runtime invoke-endpoint", "--target-model"},
		"vertex/README.md": {"gcloud ai models upload", "--container-image-uri", "--container-ports=8080", "--container-health-route",
			"--container-predict-route", "--container-env-vars", "--artifact-uri", "AIP_STORAGE_URI", "gcloud ai endpoints create", "deploy-model", "raw-predict"},
		"lambda/README.md": {"Dockerfile.lambda", "docker push", "aws cloudformation deploy", "curl", `"inputs"`},
		"kubernetes/README.md": {"kubectl apply", "inferd.yaml", "kserve.yaml", "/v2/health/ready", "tritonserver --model-store=/mnt/models",
			"8001:8001", "grpc-v2", "--grpc-port=8001", "keda.yaml", "hpa-custom-metrics.yaml", "inference-pool.yaml", "kubectl delete hpa inferd"},
		// The images' tritonserver link, as Docker and Kubernetes start it,
		// and gRPC on 8001 through grpcurl (with the protos: inferd has no
		// reflection service) and tritonclient.grpc.
		"../README.md": {"--entrypoint tritonserver", `command: ["tritonserver", "--model-repository=/models"]`,
			"-import-path platforms/grpcapi/inferencepb -import-path repo/modelconfig", "-proto grpc_service.proto",
			"localhost:8001 inference.GRPCInferenceService/ServerReady", "tritonclient.grpc", `InferenceServerClient(url="localhost:8001")`},
	} {
		text := read(t, path)
		for _, want := range wants {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not mention %q", path, want)
			}
		}
	}
}
