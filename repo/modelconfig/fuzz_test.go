package modelconfig

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzParse feeds arbitrary text through the whole pipeline; beyond "no
// panic" it checks that whatever parses renders as valid JSON that
// ParseJSON accepts back. Seeds live in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`name: "m" backend: "onnxruntime" max_batch_size: 4 dynamic_batching {}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		cfg, err := Parse(text)
		if err != nil {
			return
		}
		checkRendering(t, cfg)

		for _, hasONNX := range []bool{false, true} {
			c := proto.Clone(cfg).(*ModelConfig)
			if Normalize(c, "m", hasONNX) != nil {
				continue
			}
			_ = Validate(c, "m", true)
			_ = ValidateTensors(c)
			SelectVersions(c, []int64{0, 1, 2, 3})
			for _, gpus := range [][]int32{nil, {0, 1}} {
				g := proto.Clone(c).(*ModelConfig)
				// Instances allocates one entry per instance; skip configs
				// asking for absurd counts rather than exhaust memory.
				if NormalizeInstanceGroups(g, gpus) == nil && instanceTotal(g) <= 1<<12 {
					if got, want := len(Instances(g)), instanceTotal(g); got != want {
						t.Fatalf("Instances returned %d entries, want %d", got, want)
					}
				}
				checkRendering(t, g)
			}
		}
	})
}

func checkRendering(t *testing.T, cfg *ModelConfig) {
	t.Helper()
	out, err := MarshalJSON(cfg)
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	if len(out) == 0 {
		return // empty configuration
	}
	if !json.Valid(out) {
		t.Fatalf("MarshalJSON produced invalid JSON: %s", out)
	}
	if _, err := ParseJSON(out); err != nil {
		t.Fatalf("ParseJSON(MarshalJSON()) = %v for %s", err, out)
	}
}

// instanceTotal is the number of instances a normalised config asks for.
func instanceTotal(cfg *ModelConfig) int {
	total := 0
	for _, g := range cfg.GetInstanceGroup() {
		n := int(g.GetCount())
		if g.GetKind() == ModelInstanceGroup_KIND_GPU {
			n *= len(g.GetGpus())
		}
		total += n
	}
	return total
}
