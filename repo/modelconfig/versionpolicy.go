package modelconfig

import (
	"fmt"
	"slices"
)

// SelectVersions applies cfg's version policy to the versions found on
// disk (as VersionsToLoad in triton-inference-server/core
// src/model_repository_manager/model_lifecycle.cc) and returns the ones to load, ascending.
//
//   - latest {num_versions: n}: the n highest; n = 0 selects nothing (only
//     an absent policy means one, and Normalize makes that explicit).
//   - all {}: every available version.
//   - specific {versions: [...]}: the listed versions that exist; each
//     missing one yields a warning (Triton logs it as an error but still
//     loads the rest).
//
// A nil policy is treated as latest {num_versions: 1}. Callers report
// "at least one version must be available under the version policy of
// model ..." when the result is empty.
func SelectVersions(cfg *ModelConfig, available []int64) (selected []int64, warnings []string) {
	versions := slices.Clone(available)
	slices.Sort(versions)
	versions = slices.Compact(versions)

	policy := cfg.GetVersionPolicy()
	switch {
	case policy == nil:
		return latest(versions, 1), nil
	case policy.GetAll() != nil:
		return versions, nil
	case policy.GetSpecific() != nil:
		for _, v := range policy.GetSpecific().GetVersions() {
			if slices.Contains(versions, v) {
				if !slices.Contains(selected, v) {
					selected = append(selected, v)
				}
				continue
			}
			warnings = append(warnings, fmt.Sprintf("version %d is specified for model '%s', but the version directory is not present",
				v, cfg.GetName()))
		}
		slices.Sort(selected)
		return selected, warnings
	case policy.GetLatest() != nil:
		return latest(versions, int(policy.GetLatest().GetNumVersions())), nil
	}
	// A version_policy message with no choice set selects nothing, like
	// Triton, which only matches the three known choices.
	return nil, nil
}

// latest returns the n highest of the ascending versions, ascending.
func latest(versions []int64, n int) []int64 {
	if n <= 0 {
		return nil
	}
	if n > len(versions) {
		n = len(versions)
	}
	return slices.Clone(versions[len(versions)-n:])
}
