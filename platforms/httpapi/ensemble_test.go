package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// TestEnsembleOverHTTP serves a two-step ensemble of `simple` over a real
// listener: /infer (JSON), its metadata and config (platform "ensemble"),
// its statistics beside its composing model's, and a step's failure.
func TestEnsembleOverHTTP(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"chain":  servertest.Chain("chain"),
		// an ensemble of ensembles: chain twice.
		"outer": servertest.Twice("outer", "chain"),
		// BYTES between two identity steps.
		"id_bytes": servertest.IDBytes("id_bytes"),
		"bytes2":   servertest.BytesChain("bytes2", "id_bytes"),
	})
	base, _ := startServer(t, root, serverOpts{})
	if status, _, out := post(t, base+"/v2/models/bytes2/infer", `{"inputs":[{"name":"TEXT","shape":[2],"datatype":"BYTES","data":["héllo","wörld"]}]}`); status != 200 ||
		!strings.Contains(string(out), `"data":["héllo","wörld"]`) {
		t.Fatalf("BYTES through two steps: %d %s", status, out)
	}
	outerBody := `{"inputs":[{"name":"IN0","shape":[1,16],"datatype":"INT32","data":[` + strings.Trim(intSeq(0, 16), "[]") + `]},` +
		`{"name":"IN1","shape":[1,16],"datatype":"INT32","data":[` + strings.TrimSuffix(strings.Repeat("3,", 16), ",") + `]}]}`
	if status, _, out := post(t, base+"/v2/models/outer/infer", outerBody); status != 200 || !strings.Contains(string(out), `"data":[0,4,8,12,`) ||
		!strings.Contains(string(out), `"data":[12,12,`) {
		t.Fatalf("ensemble of ensembles: %d %s", status, out)
	}
	body := `{"id":"e1","inputs":[{"name":"IN0","shape":[1,16],"datatype":"INT32","data":[` + strings.Trim(intSeq(0, 16), "[]") + `]},` +
		`{"name":"IN1","shape":[1,16],"datatype":"INT32","data":[` + strings.TrimSuffix(strings.Repeat("3,", 16), ",") + `]}]}`
	status, _, out := post(t, base+"/v2/models/chain/infer", body)
	if status != 200 {
		t.Fatalf("infer: %d %s", status, out)
	}
	var resp struct {
		ID      string `json:"id"`
		Model   string `json:"model_name"`
		Outputs []struct {
			Name string  `json:"name"`
			Data []int32 `json:"data"`
		} `json:"outputs"`
	}
	must(t, json.Unmarshal(out, &resp))
	if resp.ID != "e1" || resp.Model != "chain" || len(resp.Outputs) != 2 {
		t.Fatalf("response %s", out)
	}
	for _, o := range resp.Outputs {
		for i, v := range o.Data {
			want := int32(2 * i)
			if o.Name == "OUT1" {
				want = 6
			}
			if v != want {
				t.Fatalf("%s[%d] = %d, want %d", o.Name, i, v, want)
			}
		}
	}
	if status, _, md := do(t, "GET", base+"/v2/models/chain", nil, nil); status != 200 || !strings.Contains(string(md), `"platform":"ensemble"`) {
		t.Fatalf("metadata: %d %s", status, md)
	}
	if status, _, cfg := do(t, "GET", base+"/v2/models/chain/config", nil, nil); status != 200 || !strings.Contains(string(cfg), `"ensemble_scheduling"`) {
		t.Fatalf("config: %d %s", status, cfg)
	}
	status, _, stats := do(t, "GET", base+"/v2/models/stats", nil, nil)
	if status != 200 || !strings.Contains(string(stats), `"name":"chain"`) {
		t.Fatalf("stats: %d %s", status, stats)
	}
	// The ensemble's own validation speaks for it; a step's error names it.
	status, _, out = post(t, base+"/v2/models/chain/infer", `{"inputs":[{"name":"IN0","shape":[1,15],"datatype":"INT32","data":[`+strings.Trim(intSeq(0, 15), "[]")+`]}]}`)
	if status != 400 || !strings.Contains(string(out), "for model 'chain'") {
		t.Fatalf("invalid ensemble request: %d %s", status, out)
	}
}

// TestEnsembleRepositoryAPI: in explicit mode, loading an ensemble loads
// its composing model, and unload with unload_dependents takes it along.
func TestEnsembleRepositoryAPI(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": servertest.Simple("simple"),
		"one": servertest.Ensemble(servertest.EnsembleConfig("one", 8,
			[]string{"IN0:TYPE_INT32:[ 16 ]", "IN1:TYPE_INT32:[ 16 ]"}, []string{"OUT0:TYPE_INT32:[ 16 ]"},
			servertest.Step{Model: "simple", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=OUT0"}})),
	})
	base, _ := startServer(t, root, serverOpts{mode: core.ModeExplicit})
	ready := func(m string) int {
		status, _, _ := do(t, "GET", base+"/v2/models/"+m+"/ready", nil, nil)
		return status
	}
	if status, _, body := post(t, base+"/v2/repository/models/one/load", ""); status != 200 {
		t.Fatalf("load: %d %s", status, body)
	}
	if ready("one") != 200 || ready("simple") != 200 {
		t.Fatal("loading the ensemble did not load its composing model")
	}
	if status, _, body := post(t, base+"/v2/repository/models/one/unload", `{"parameters":{"unload_dependents":true}}`); status != 200 {
		t.Fatalf("unload: %d %s", status, body)
	}
	if ready("one") == 200 || ready("simple") == 200 {
		t.Fatal("unload_dependents left a model ready")
	}
}
