package modelconfig

import (
	"slices"
	"strings"
	"testing"
)

func TestSelectVersions(t *testing.T) {
	tests := []struct {
		name      string
		policy    string // version_policy clause; "" = absent
		normalize bool
		available []int64
		want      []int64
		warnings  []string
	}{
		{name: "absent policy behaves as latest 1", normalize: true, available: []int64{3, 1, 2}, want: []int64{3}},
		{name: "nil policy without normalisation", available: []int64{3, 1, 2}, want: []int64{3}},
		{name: "latest {} selects nothing", policy: `version_policy { latest: {} }`, available: []int64{1, 2}, want: nil},
		{name: "latest 2", policy: `version_policy { latest { num_versions: 2 } }`, available: []int64{1, 10, 2, 7}, want: []int64{7, 10}},
		{name: "latest more than available", policy: `version_policy { latest { num_versions: 5 } }`, available: []int64{2, 1}, want: []int64{1, 2}},
		{name: "all", policy: `version_policy { all {} }`, available: []int64{5, 0, 3}, want: []int64{0, 3, 5}},
		{name: "all with none on disk", policy: `version_policy { all {} }`, available: nil, want: nil},
		{name: "specific with a missing version", policy: `version_policy { specific { versions: [ 1, 3 ] } }`, available: []int64{1},
			want: []int64{1}, warnings: []string{"version 3 is specified for model 'm', but the version directory is not present"}},
		{name: "specific listed twice and unsorted", policy: `version_policy { specific { versions: [ 3, 1, 3 ] } }`, available: []int64{1, 2, 3},
			want: []int64{1, 3}},
		{name: "specific none present", policy: `version_policy { specific { versions: [ 4 ] } }`, available: []int64{1}, want: nil,
			warnings: []string{"version 4 is specified"}},
		{name: "empty version_policy message", policy: `version_policy {}`, available: []int64{1}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, `name: "m" backend: "onnxruntime" `+tc.policy)
			if tc.normalize {
				if err := Normalize(cfg, "m", false); err != nil {
					t.Fatal(err)
				}
			}
			got, warnings := SelectVersions(cfg, tc.available)
			if !slices.Equal(got, tc.want) {
				t.Errorf("selected = %v, want %v", got, tc.want)
			}
			if len(warnings) != len(tc.warnings) {
				t.Fatalf("warnings = %q, want %q", warnings, tc.warnings)
			}
			for i := range warnings {
				if !strings.Contains(warnings[i], tc.warnings[i]) {
					t.Errorf("warning %q does not contain %q", warnings[i], tc.warnings[i])
				}
			}
		})
	}
}

func TestSelectVersionsDoesNotModifyInput(t *testing.T) {
	available := []int64{3, 1, 2}
	cfg := mustParse(t, `version_policy { all {} }`)
	SelectVersions(cfg, available)
	if !slices.Equal(available, []int64{3, 1, 2}) {
		t.Fatalf("input modified: %v", available)
	}
}
