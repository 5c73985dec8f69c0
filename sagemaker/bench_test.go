package sagemaker

import (
	"strings"
	"testing"
)

// BenchmarkRecords serves /invocations bodies of 8 records on "simple" (two
// INT32 [16] inputs) and "fixed" over a real listener: JSON Lines of
// {"instances"} objects (two instances a record) and CSV rows, the shared
// instances translator's path (platforms/instances) with SageMaker's
// envelopes.
func BenchmarkRecords(b *testing.B) {
	root := recordsRepo(b)
	startup := []string{"simple", "id1", "fixed"}
	simple := start(b, setup{repo: root, startup: startup, sm: Options{DefaultModel: "simple"}})
	fixed := start(b, setup{repo: root, startup: startup, sm: Options{DefaultModel: "fixed"}})
	line := `{"instances":[{"INPUT0":` + ints(16, 0) + `,"INPUT1":` + ints(16, 1) + `},{"INPUT0":` + ints(16, 1) + `,"INPUT1":` + ints(16, 0) + `}]}` + "\n"
	cases := []struct {
		name, ct, body, prefix string
		e                      *env
	}{
		{"jsonlines-instances-8", "application/jsonlines", strings.Repeat(line, 8), `{"predictions":[{"OUTPUT0":[1,3,`, simple},
		{"csv-rows-8", "text/csv", strings.Repeat("1,2,3\n", 8), "1.0,2.0,3.0\n", fixed},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			header := map[string]string{"Content-Type": c.ct}
			for b.Loop() {
				r := c.e.do(b, "POST", "/invocations", header, c.body)
				if r.status != 200 || !strings.HasPrefix(r.body, c.prefix) {
					b.Fatalf("%d %.200s", r.status, r.body)
				}
			}
		})
	}
}
