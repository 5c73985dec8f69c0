package vertex

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/httpapi"
)

// instancesWithParams is an instances body for id1 whose "parameters"
// object holds n members "<prefix><i>":<i>, then tail.
func instancesWithParams(n int, prefix, tail string) []byte {
	b := append([]byte(`{"instances":[[1]],"parameters":{`), servertest.ParamMembers(n, prefix)...)
	return append(append(b, tail...), "}}"...)
}

// TestPredictManyParameters: an instances request whose parameters object
// has 300,000 members (4.4 MB) is decoded in time linear in its size, its
// names cut at a NUL still finding the first member of their prefix. A
// scan of the object per member, as before, took minutes; the bound, a
// minute a request, is far beyond what a linear decoder needs on a slow
// machine.
func TestPredictManyParameters(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 4 MB requests")
	}
	c, api := startCore(t, map[string]testModel{"id1": id1Model}, httpapi.Options{Workers: 1})
	_, base := listen(t, c, api, "", true)
	const n = 300_000
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"distinct names", instancesWithParams(n, "p", ""), 200, `"predictions"`},
		{"NUL names finding the last member", instancesWithParams(n, `x\u0000`, `,"x":"last"`), 200, `"predictions"`},
		{"NUL name without its prefix, last", instancesWithParams(n, "p", `,"k\u0000":1`), 500, "parameter key 'k' was not found in the JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan servertest.Reply, 1)
			start := time.Now()
			go func() {
				done <- servertest.SendBody(base+predictRoute, nil, bytes.NewReader(tc.body), int64(len(tc.body)))
			}()
			select {
			case r := <-done:
				if r.Err != nil || r.Status != tc.status || !strings.Contains(r.Body, tc.want) {
					t.Fatalf("%d %.200q (%v), want %d %s", r.Status, r.Body, r.Err, tc.status, tc.want)
				}
				t.Logf("%d bytes answered in %v", len(tc.body), time.Since(start).Round(time.Millisecond))
			case <-time.After(time.Minute):
				t.Fatal("no reply after a minute")
			}
		})
	}
}
