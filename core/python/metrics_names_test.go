package python

import "testing"

// TestCustomFamilyNames checks which custom family names a model may
// register: the server's own prefixes, Triton's and inferd_, are refused;
// other names, nv_ ones included, are the model's.
func TestCustomFamilyNames(t *testing.T) {
	cases := []struct {
		name  string
		taken bool
	}{
		{"nv_inference_pending_request_count", true},
		{"nv_cache_num_hits", true},
		{"inferd_inference_running_request_count", true},
		{"inferd_python_worker_restarts_total", true},
		{"nv_kv_cache_usage", false},
		{"inferd_tokens", true}, // all of inferd_ is the server's
		{"my_requests_total", false},
	}
	for _, c := range cases {
		err := newCustomMetrics().family(c.name, "help", kindGauge)
		if (err != nil) != c.taken {
			t.Errorf("%s: error %v, want taken %v", c.name, err, c.taken)
		}
	}
}
