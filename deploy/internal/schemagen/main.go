// Command schemagen writes the JSON schemas that deploy's tests validate
// the Kubernetes and KServe manifests against (with kubeconform, offline),
// one file per kind the manifests under deploy/kubernetes use, into
// deploy/testdata/schemas. Run it from deploy/ with `go generate` (it needs
// the Go module proxy); the tests only read its output.
//
// Sources, fetched as Go modules with `go mod download` except the last:
//
//   - Kubernetes kinds: api/openapi-spec/swagger.json of k8s.io/kubernetes,
//     the kind's definition and every definition it references.
//   - Custom resources: the openAPIV3Schema of the CRDs under
//     config/crd/full of github.com/kserve/kserve and config/crd/bases of
//     github.com/kedacore/keda/v2, and those in internal/schemagen/crds
//     (the Gateway API inference extension's InferencePool, whose module is
//     not on the proxy), with metadata checked as the API server checks it
//     (Kubernetes' ObjectMeta).
//
// The conversion follows kubeconform's openapi2jsonschema.py (the script
// behind yannh/kubernetes-json-schema's "-strict" schemas): every object
// schema with properties gets additionalProperties: false unless it has
// x-kubernetes-preserve-unknown-fields, IntOrString becomes a string or an
// integer, and Quantity a string or a number. Descriptions and x-kubernetes-*
// annotations are dropped, and subschemas that a CRD repeats (every
// container, probe and volume of InferenceService's components) are kept
// once under definitions; neither changes what validates.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

const (
	// The oldest Kubernetes the manifests support (preStop sleep is 1.30+):
	// a field added later fails here, as it would on a 1.30 cluster.
	kubernetesModule = "k8s.io/kubernetes@v1.30.14"
	kserveModule     = "github.com/kserve/kserve@v0.17.0"
	kserveCRDs       = "config/crd/full/serving.kserve.io_*.yaml"
	kedaModule       = "github.com/kedacore/keda/v2@v2.21.0"
	kedaCRDs         = "config/crd/bases/keda.sh_*.yaml"
	// Vendored CRDs, relative to deploy/ (where go generate runs).
	localCRDs = "internal/schemagen/crds/*.yaml"

	objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	quantity   = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

func main() {
	manifests := flag.String("manifests", "kubernetes", "folder of the manifests whose kinds get a schema")
	out := flag.String("out", "testdata/schemas", "output folder")
	flag.Parse()
	log.SetFlags(0)

	kinds, err := manifestKinds(*manifests)
	if err != nil {
		log.Fatal(err)
	}
	dirs, err := download(kubernetesModule, kserveModule, kedaModule)
	if err != nil {
		log.Fatal(err)
	}
	var swagger struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := readJSON(filepath.Join(dirs[kubernetesModule], "api/openapi-spec/swagger.json"), &swagger); err != nil {
		log.Fatal(err)
	}
	// The API server takes a Quantity as a string or a number.
	swagger.Definitions[quantity] = map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	crds := map[groupVersionKind]map[string]any{}
	for _, glob := range []string{filepath.Join(dirs[kserveModule], kserveCRDs), filepath.Join(dirs[kedaModule], kedaCRDs), localCRDs} {
		more, err := loadCRDs(glob)
		if err != nil {
			log.Fatal(err)
		}
		maps.Copy(crds, more)
	}
	k8sVersion := strings.TrimPrefix(kubernetesModule[strings.Index(kubernetesModule, "@")+1:], "v")

	for _, gvk := range kinds {
		var path string
		var schema map[string]any
		if name := findDefinition(swagger.Definitions, gvk); name != "" {
			schema = standalone(swagger.Definitions, name)
			path = filepath.Join("kubernetes", "v"+k8sVersion+"-standalone-strict", strings.ToLower(gvk.Kind)+kindSuffix(gvk)+".json")
		} else if s, ok := crds[gvk]; ok {
			schema = crdSchema(swagger.Definitions, s)
			path = filepath.Join("crds", gvk.Group, strings.ToLower(gvk.Kind)+"_"+gvk.Version+".json")
		} else {
			log.Fatalf("no schema for %s", gvk)
		}
		b, err := json.MarshalIndent(schema, "", " ")
		if err != nil {
			log.Fatal(err)
		}
		path = filepath.Join(*out, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s (%d bytes)\n", gvk, path, len(b)+1)
	}
}

type groupVersionKind struct {
	Group, Version, Kind string
}

func (g groupVersionKind) String() string {
	if g.Group == "" {
		return g.Version + " " + g.Kind
	}
	return g.Group + "/" + g.Version + " " + g.Kind
}

// kindSuffix is kubeconform's {{ .KindSuffix }}: -v1, -apps-v1,
// -autoscaling-v2.
func kindSuffix(g groupVersionKind) string {
	if g.Group == "" {
		return "-" + g.Version
	}
	return "-" + strings.Split(g.Group, ".")[0] + "-" + g.Version
}

// manifestKinds lists the kinds of every document in dir's YAML files.
func manifestKinds(dir string) ([]groupVersionKind, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no manifests in %s (%v)", dir, err)
	}
	seen := map[groupVersionKind]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var doc struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
			}
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			group, version, ok := strings.Cut(doc.APIVersion, "/")
			if !ok {
				group, version = "", doc.APIVersion
			}
			seen[groupVersionKind{group, version, doc.Kind}] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(a, b groupVersionKind) int {
		return strings.Compare(a.String(), b.String())
	}), nil
}

// download fetches modules (path@version) and returns their folders.
func download(mods ...string) (map[string]string, error) {
	cmd := exec.Command("go", append([]string{"mod", "download", "-json"}, mods...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download: %v", err)
	}
	dirs := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var m struct{ Path, Version, Dir, Error string }
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		if m.Error != "" {
			return nil, fmt.Errorf("%s@%s: %s", m.Path, m.Version, m.Error)
		}
		dirs[m.Path+"@"+m.Version] = m.Dir
	}
	return dirs, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func findDefinition(defs map[string]map[string]any, gvk groupVersionKind) string {
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		gvks, _ := defs[name]["x-kubernetes-group-version-kind"].([]any)
		for _, x := range gvks {
			m, _ := x.(map[string]any)
			if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
				return name
			}
		}
	}
	return ""
}

// loadCRDs reads the openAPIV3Schema of every served version of the CRDs
// in the files matching glob.
func loadCRDs(glob string) (map[groupVersionKind]map[string]any, error) {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs match %s (%v)", glob, err)
	}
	out := map[groupVersionKind]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Kind string
			Spec struct {
				Group    string
				Names    struct{ Kind string }
				Versions []struct {
					Name   string
					Served bool
					Schema struct {
						OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served && v.Schema.OpenAPIV3Schema != nil {
				out[groupVersionKind{crd.Spec.Group, v.Name, crd.Spec.Names.Kind}] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out, nil
}

// standalone is the definition name with the closure of its references
// under definitions.
func standalone(defs map[string]map[string]any, name string) map[string]any {
	root := convert(defs[name])
	root["definitions"] = closure(defs, root, nil)
	return root
}

// closure converts every definition of defs that schema (and the
// definitions it already has, in have) references, directly or not.
func closure(defs map[string]map[string]any, schema, have map[string]any) map[string]any {
	out := map[string]any{}
	var visit func(v any)
	visit = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			if ref, ok := n["$ref"].(string); ok {
				name := strings.TrimPrefix(ref, "#/definitions/")
				if _, done := out[name]; !done && have[name] == nil {
					d, ok := defs[name]
					if !ok {
						log.Fatalf("unresolved $ref %s", ref)
					}
					c := convert(d)
					out[name] = c
					visit(c)
				}
			}
			for _, x := range n {
				visit(x)
			}
		case []any:
			for _, x := range n {
				visit(x)
			}
		}
	}
	visit(schema)
	visit(have)
	return out
}

// crdSchema converts a CRD's openAPIV3Schema, checks metadata as
// ObjectMeta, and keeps repeated subschemas once.
func crdSchema(defs map[string]map[string]any, openAPI map[string]any) map[string]any {
	root := convert(openAPI)
	props, _ := root["properties"].(map[string]any)
	if props == nil || props["metadata"] == nil {
		log.Fatal("CRD schema without metadata")
	}
	props["metadata"] = map[string]any{"$ref": "#/definitions/" + objectMeta}
	before := canon(root)
	shared := dedupe(root)
	if canon(expand(root, shared)) != before {
		log.Fatal("dedupe changed the schema")
	}
	maps.Copy(shared, closure(defs, root, shared))
	root["definitions"] = shared
	return root
}

// Schema keywords kept, and those whose values are schemas.
var (
	keep = map[string]bool{
		"type": true, "format": true, "enum": true, "required": true, "pattern": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
		"minLength": true, "maxLength": true, "minItems": true, "maxItems": true, "uniqueItems": true,
		"minProperties": true, "maxProperties": true, "$ref": true,
	}
	drop = map[string]bool{"description": true, "default": true, "example": true, "nullable": true, "title": true, "readOnly": true}
)

// convert returns a copy of an OpenAPI schema as a strict JSON schema.
func convert(s map[string]any) map[string]any {
	if f, _ := s["format"].(string); f == "int-or-string" {
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	}
	out := map[string]any{}
	for k, v := range s {
		switch {
		case keep[k]:
			out[k] = v
		case k == "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = convert(p.(map[string]any))
			}
			out[k] = props
		case k == "items" || k == "not":
			out[k] = convert(v.(map[string]any))
		case k == "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				out[k] = convert(m)
			} else {
				out[k] = v
			}
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			var l []any
			for _, x := range v.([]any) {
				l = append(l, convert(x.(map[string]any)))
			}
			out[k] = l
		case drop[k] || strings.HasPrefix(k, "x-kubernetes-") && k != "x-kubernetes-embedded-resource":
		default:
			log.Fatalf("unsupported schema keyword %q", k)
		}
	}
	if _, ok := out["properties"]; ok && out["additionalProperties"] == nil && s["x-kubernetes-preserve-unknown-fields"] != true {
		out["additionalProperties"] = false
	}
	return out
}

// dedupe moves subschemas of root that occur more than once (and are not
// tiny) under definitions, named after the first property holding them
// and a hash of their content, and refers to them with $ref.
func dedupe(root map[string]any) map[string]any {
	const minSize = 256
	count := map[string]int{}
	var countAll func(s map[string]any)
	countAll = func(s map[string]any) {
		count[canon(s)]++
		eachSub(s, func(_ string, sub map[string]any) { countAll(sub) })
	}
	countAll(root)

	defs := map[string]any{}
	names := map[string]string{}
	var rewrite func(s map[string]any)
	replace := func(hint string, sub map[string]any) map[string]any {
		c := canon(sub)
		if count[c] < 2 || len(c) < minSize {
			rewrite(sub)
			return sub
		}
		name, ok := names[c]
		if !ok {
			sum := sha256.Sum256([]byte(c))
			name = hint + "-" + hex.EncodeToString(sum[:4])
			names[c] = name
			rewrite(sub)
			defs[name] = sub
		}
		return map[string]any{"$ref": "#/definitions/" + name}
	}
	rewrite = func(s map[string]any) {
		setSub(s, replace)
	}
	rewrite(root)
	inlineSingleUse(root, defs)
	return defs
}

// canon is v's JSON text, with sorted keys.
func canon(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		log.Fatal(err)
	}
	return string(b)
}

// expand returns a copy of v with the references to defs replaced by the
// definitions themselves.
func expand(v any, defs map[string]any) any {
	switch n := v.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			if d, ok := defs[strings.TrimPrefix(ref, "#/definitions/")]; ok {
				return expand(d, defs)
			}
		}
		out := map[string]any{}
		for k, x := range n {
			out[k] = expand(x, defs)
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, x := range n {
			out[i] = expand(x, defs)
		}
		return out
	}
	return v
}

// inlineSingleUse puts back the definitions used only once.
func inlineSingleUse(root map[string]any, defs map[string]any) {
	for {
		uses := map[string]int{}
		var countRefs func(s map[string]any)
		countRefs = func(s map[string]any) {
			if ref, ok := s["$ref"].(string); ok {
				uses[strings.TrimPrefix(ref, "#/definitions/")]++
			}
			eachSub(s, func(_ string, sub map[string]any) { countRefs(sub) })
		}
		countRefs(root)
		for _, d := range defs {
			countRefs(d.(map[string]any))
		}
		var single []string
		for name := range defs {
			if uses[name] == 1 {
				single = append(single, name)
			}
		}
		if len(single) == 0 {
			return
		}
		inline := func(_ string, sub map[string]any) map[string]any {
			if ref, ok := sub["$ref"].(string); ok {
				if name := strings.TrimPrefix(ref, "#/definitions/"); slices.Contains(single, name) {
					return defs[name].(map[string]any)
				}
			}
			return sub
		}
		var walk func(s map[string]any)
		walk = func(s map[string]any) {
			setSub(s, func(hint string, sub map[string]any) map[string]any {
				r := inline(hint, sub)
				walk(r)
				return r
			})
		}
		walk(root)
		for _, d := range defs {
			walk(d.(map[string]any))
		}
		for _, name := range single {
			delete(defs, name)
		}
	}
}

// eachSub calls f on every direct subschema of s, with a name hint.
func eachSub(s map[string]any, f func(hint string, sub map[string]any)) {
	setSub(s, func(hint string, sub map[string]any) map[string]any {
		f(hint, sub)
		return sub
	})
}

// setSub replaces every direct subschema of s by f's result, visiting
// keywords and property names in sorted order.
func setSub(s map[string]any, f func(hint string, sub map[string]any) map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(s)) {
		switch v := s[k].(type) {
		case map[string]any:
			switch k {
			case "properties":
				for _, name := range slices.Sorted(maps.Keys(v)) {
					v[name] = f(name, v[name].(map[string]any))
				}
			case "items", "not", "additionalProperties":
				s[k] = f(k, v)
			}
		case []any:
			if k == "allOf" || k == "anyOf" || k == "oneOf" {
				for i, x := range v {
					v[i] = f(k, x.(map[string]any))
				}
			}
		}
	}
}
