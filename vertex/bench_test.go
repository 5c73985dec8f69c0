package vertex

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/platforms/httpapi"
)

// BenchmarkPredictInstances serves Vertex {"instances": [...]} predictions
// on "simple" (two INT32 [16] inputs, two outputs) in-process, for one
// instance and for a batch of eight: the translation's own cost on top of
// a small model's run.
func BenchmarkPredictInstances(b *testing.B) {
	c, api := startCore(b, map[string]testModel{"simple": simpleModel}, httpapi.Options{})
	h := New(c, api, Options{HealthRoute: healthRoute, PredictRoute: predictRoute, Logger: quiet})
	must(b, h.Resolve())
	row := make([]string, 16)
	for i := range row {
		row[i] = strconv.Itoa(i)
	}
	instance := `{"INPUT0":[` + strings.Join(row, ",") + `],"INPUT1":[` + strings.Join(row, ",") + `]}`
	for _, n := range []int{1, 8} {
		body := `{"instances":[` + strings.TrimSuffix(strings.Repeat(instance+",", n), ",") + `]}`
		b.Run("instances="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, predictRoute, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `{"predictions":[{"OUTPUT0":[0,2,`) {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
