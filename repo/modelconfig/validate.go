package modelconfig

import (
	"errors"
	"fmt"
)

// Validate checks a normalised configuration against the repository- and
// config-level rules Triton enforces when it polls a model (ValidateModelConfig
// in triton-inference-server/core src/model_config_utils.cc), in
// Triton's order: the general configuration rules, then (when tensorRules
// is set) the input/output rules, then that the name equals the directory
// name.
//
// Pass tensorRules=true when auto-complete is off; with auto-complete on,
// Triton checks tensors only after the backend has completed the
// configuration, so call ValidateTensors then instead. Instance groups
// are validated by NormalizeInstanceGroups, at load time.
func Validate(cfg *ModelConfig, modelDirName string, tensorRules bool) error {
	if cfg == nil {
		return errors.New("validate model config: nil config")
	}
	if err := validateModelConfig(cfg); err != nil {
		return err
	}
	if tensorRules {
		if err := ValidateTensors(cfg); err != nil {
			return err
		}
	}
	if cfg.GetName() != modelDirName {
		return fmt.Errorf("unexpected directory name '%s' for model '%s', directory name must equal model name",
			modelDirName, cfg.GetName())
	}
	return nil
}

// validateModelConfig is Triton's ValidateModelConfig.
func validateModelConfig(cfg *ModelConfig) error {
	name := cfg.GetName()
	if name == "" {
		return errors.New("model configuration must specify 'name'")
	}

	if cfg.GetBackend() == "" {
		if cfg.GetPlatform() != PlatformEnsemble {
			return fmt.Errorf("unexpected platform type '%s' for %s", cfg.GetPlatform(), name)
		}
	} else if cfg.GetPlatform() == PlatformEnsemble {
		//lint:ignore ST1005 Triton's exact wording.
		return fmt.Errorf("Ensemble model '%s' must have platform type '%s' and empty backend type",
			name, cfg.GetPlatform())
	}

	// A backend the server does not know may be paired with any platform;
	// a known backend needs its own platform.
	if bk := backendKindOfBackend(cfg.GetBackend()); bk != kindUnknown && bk != backendKindOfPlatform(cfg.GetPlatform()) {
		return fmt.Errorf("unexpected 'platform' and 'backend' pair, got:%s, %s", cfg.GetPlatform(), cfg.GetBackend())
	}

	if cfg.GetMaxBatchSize() < 0 {
		return fmt.Errorf("'max_batch_size' must be non-negative value for %s", name)
	}

	if cfg.GetVersionPolicy() == nil {
		return fmt.Errorf("must specify 'version policy' for %s", name)
	}

	if db := cfg.GetDynamicBatching(); db != nil {
		if err := validateDynamicBatching(cfg, db); err != nil {
			return err
		}
	}

	if sb := cfg.GetSequenceBatching(); sb != nil {
		if err := validateSequenceBatching(cfg, sb); err != nil {
			return err
		}
	}

	if cfg.GetEnsembleScheduling() != nil {
		if err := validateEnsembleScheduling(cfg); err != nil {
			return err
		}
	} else if cfg.GetPlatform() == PlatformEnsemble {
		return fmt.Errorf("ensemble scheduling must be set for ensemble %s whose platform is %s",
			name, PlatformEnsemble)
	}

	if cfg.GetModelTransactionPolicy().GetDecoupled() && cfg.GetResponseCache().GetEnable() {
		//lint:ignore ST1005 Triton's exact wording.
		return fmt.Errorf("Response Cache does not currently support model %s with 'decoupled' "+
			"transaction policy. Please disable the response cache.", name)
	}

	if mm := cfg.GetModelMetrics(); mm != nil {
		if err := validateModelMetrics(mm); err != nil {
			return err
		}
	}
	return nil
}

func validateDynamicBatching(cfg *ModelConfig, db *ModelDynamicBatching) error {
	name := cfg.GetName()
	for _, size := range db.GetPreferredBatchSize() {
		if size <= 0 {
			return fmt.Errorf("dynamic batching preferred size must be positive for %s", name)
		}
		if size > cfg.GetMaxBatchSize() {
			return fmt.Errorf("dynamic batching preferred size must be <= max batch size for %s", name)
		}
	}

	levels := db.GetPriorityLevels()
	if levels != 0 {
		if def := db.GetDefaultPriorityLevel(); def == 0 || def > levels {
			return fmt.Errorf("default priority level must be in range [1, %d] for %s", levels, name)
		}
		for level := range db.GetPriorityQueuePolicy() {
			if level == 0 || level > levels {
				return fmt.Errorf("priority queue policy must have priority level in range [1, %d] for %s",
					levels, name)
			}
		}
	}

	// Reordering by priority or by delaying timed-out requests would break
	// the response order preserve_ordering promises.
	if db.GetPreserveOrdering() {
		if levels > 1 {
			//lint:ignore ST1005 Triton's exact wording.
			return fmt.Errorf("Only one priority level is allowed when 'preserve_ordering' is true for %s", name)
		}
		if delaysTimedOut(db.GetDefaultQueuePolicy()) {
			return delayWithPreserveOrderingError(name)
		}
		for _, policy := range db.GetPriorityQueuePolicy() {
			if delaysTimedOut(policy) {
				return delayWithPreserveOrderingError(name)
			}
		}
	}
	return nil
}

func delaysTimedOut(p *ModelQueuePolicy) bool {
	return p.GetDefaultTimeoutMicroseconds() != 0 && p.GetTimeoutAction() == ModelQueuePolicy_DELAY
}

func delayWithPreserveOrderingError(name string) error {
	//lint:ignore ST1005 Triton's exact wording.
	return fmt.Errorf("Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for %s", name)
}

func validateModelMetrics(mm *ModelMetrics) error {
	for _, mc := range mm.GetMetricControl() {
		if mc.GetMetricIdentifier() == nil {
			return errors.New("metric control must specify 'metric_identifier'")
		}
		if mc.GetMetricIdentifier().GetFamily() == "" {
			return errors.New("metric identifier must specify non-empty 'family'")
		}
		if mc.GetHistogramOptions() == nil {
			return errors.New("metric control must specify 'histogram_options'")
		}
		if len(mc.GetHistogramOptions().GetBuckets()) == 0 {
			return errors.New("histogram options must specify non-empty 'buckets'")
		}
	}
	return nil
}
