package modelconfig

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MinComputeCapability is the lowest CUDA compute capability a GPU needs
// to be usable; it only appears in error text here (callers decide which
// GPUs are usable).
const MinComputeCapability = 6.0

// NormalizeInstanceGroups fills in and then validates cfg.instance_group
// for a model whose backend is known (NormalizeInstanceGroup in
// triton-inference-server/core src/model_config_utils.cc). gpus lists the usable GPU
// ids (CUDA-visible and meeting MinComputeCapability); empty means a
// CPU-only host. Ensembles are left untouched.
//
// Defaults: no group at all becomes one group named after the model;
// unnamed groups become "<model>_<index>"; KIND_AUTO becomes KIND_GPU when
// GPUs are usable and every listed id is among them, else KIND_CPU (the
// listed gpus are kept, which then fails validation, as in Triton); a
// count below 1 becomes 1, or 2 for KIND_CPU groups of the onnxruntime
// and tensorflow backends; KIND_GPU without gpus gets all usable GPUs.
//
// The errors are Triton's load-time instance-group errors, including
// profile on a non-TensorRT platform.
func NormalizeInstanceGroups(cfg *ModelConfig, gpus []int32) error {
	if cfg == nil {
		return errors.New("normalize instance groups: nil config")
	}
	if cfg.GetEnsembleScheduling() != nil {
		return nil
	}
	usable := sortedUniqueGPUs(gpus)

	if len(cfg.InstanceGroup) == 0 {
		cfg.InstanceGroup = []*ModelInstanceGroup{{Name: cfg.GetName()}}
	}

	for i, g := range cfg.InstanceGroup {
		if g == nil {
			g = &ModelInstanceGroup{}
			cfg.InstanceGroup[i] = g
		}
		if g.Name == "" {
			g.Name = cfg.GetName() + "_" + strconv.Itoa(i)
		}
		if g.Kind == ModelInstanceGroup_KIND_AUTO {
			g.Kind = ModelInstanceGroup_KIND_GPU
			if len(usable) == 0 || slices.ContainsFunc(g.Gpus, func(id int32) bool { return !slices.Contains(usable, id) }) {
				g.Kind = ModelInstanceGroup_KIND_CPU
			}
		}
		if g.Count < 1 {
			g.Count = defaultInstanceCount(g.Kind, cfg.GetBackend())
		}
		if g.Kind == ModelInstanceGroup_KIND_GPU && len(g.Gpus) == 0 {
			g.Gpus = slices.Clone(usable)
		}
	}
	return validateInstanceGroups(cfg, usable)
}

// defaultInstanceCount: some backends run better with two CPU instances
// by default; everything else gets one.
func defaultInstanceCount(kind ModelInstanceGroup_Kind, backend string) int32 {
	if kind == ModelInstanceGroup_KIND_CPU && (backend == BackendONNXRuntime || backend == BackendTensorFlow) {
		return 2
	}
	return 1
}

// validateInstanceGroups is Triton's ValidateInstanceGroup for a server
// built with GPU support.
func validateInstanceGroups(cfg *ModelConfig, usable []int32) error {
	model := cfg.GetName()
	if len(cfg.GetInstanceGroup()) == 0 {
		return fmt.Errorf("must specify one or more 'instance group's for %s", model)
	}
	for _, g := range cfg.GetInstanceGroup() {
		switch g.GetKind() {
		case ModelInstanceGroup_KIND_MODEL:
			if len(g.GetGpus()) > 0 {
				return fmt.Errorf("instance group %s of model %s has kind KIND_MODEL but specifies one or more GPUs",
					g.GetName(), model)
			}
		case ModelInstanceGroup_KIND_GPU:
			if len(g.GetGpus()) == 0 {
				if len(usable) == 0 {
					return fmt.Errorf("instance group %s of model %s has kind KIND_GPU but no GPUs are available",
						g.GetName(), model)
				}
				return fmt.Errorf("instance group %s of model %s has kind KIND_GPU but specifies no GPUs",
					g.GetName(), model)
			}
			for _, id := range g.GetGpus() {
				if !slices.Contains(usable, id) {
					return fmt.Errorf("instance group %s of model %s specifies invalid or unsupported gpu id %d. "+
						"GPUs with at least the minimum required CUDA compute compatibility of %f are: %s",
						g.GetName(), model, id, MinComputeCapability, joinGPUs(usable))
				}
			}
		case ModelInstanceGroup_KIND_CPU:
			if len(g.GetGpus()) > 0 {
				return fmt.Errorf("instance group %s of model %s has kind KIND_CPU but specifies one or more GPUs",
					g.GetName(), model)
			}
		default:
			return fmt.Errorf("instance group %s of model %s has unexpected kind %s", g.GetName(), model, g.GetKind())
		}

		if len(g.GetProfile()) > 0 {
			if cfg.GetPlatform() != PlatformTensorRTPlan {
				// The missing space before "specifies" is Triton's.
				return fmt.Errorf("instance group %s of model %s and platform %sspecifies profile field which is "+
					"only supported for TensorRT models", g.GetName(), model, cfg.GetPlatform())
			}
			for _, p := range g.GetProfile() {
				if err := checkProfileIndex(g.GetName(), model, cfg.GetPlatform(), p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkProfileIndex(group, model, platform, profile string) error {
	if profile == "" {
		return errors.New("profile name must not be empty")
	}
	idx, err := ParseInt(profile)
	if err != nil {
		return fmt.Errorf("unable to parse '%s': %w", profile, err)
	}
	if idx < 0 {
		//lint:ignore ST1005 Triton's exact wording.
		return fmt.Errorf("instance group %s of model %s and platform %s specifies invalid profile %s. "+
			"The field should contain the string representation of a non-negative integer.",
			group, model, platform, profile)
	}
	return nil
}

func joinGPUs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ", ")
}

func sortedUniqueGPUs(gpus []int32) []int32 {
	out := slices.Clone(gpus)
	slices.Sort(out)
	return slices.Compact(out)
}

// InstanceRef identifies one model instance to create.
type InstanceRef struct {
	// GroupName is the (normalised) instance_group name.
	GroupName string
	// GroupIndex is the group's position in cfg.instance_group.
	GroupIndex int
	// Name is "<group>_<k>", k in [0, count); the same name is used on
	// every GPU of a KIND_GPU group.
	Name string
	Kind ModelInstanceGroup_Kind
	// DeviceID is the GPU id for KIND_GPU, and 0 otherwise (as Triton
	// passes to backends).
	DeviceID int32
	// HostPolicy is the group's host_policy, or the default "cpu",
	// "model" or "gpu_<id>".
	HostPolicy string
	// Passive instances are loaded and warmed up but never scheduled.
	Passive bool
}

// Instances lists every instance a normalised configuration asks for, in
// Triton's creation order: groups in order, then k = 0..count-1, then (for
// KIND_GPU) each listed GPU. Ensembles have none.
func Instances(cfg *ModelConfig) []InstanceRef {
	if cfg.GetEnsembleScheduling() != nil {
		return nil
	}
	var refs []InstanceRef
	for gi, g := range cfg.GetInstanceGroup() {
		for k := int32(0); k < g.GetCount(); k++ {
			ref := InstanceRef{
				GroupName:  g.GetName(),
				GroupIndex: gi,
				Name:       g.GetName() + "_" + strconv.Itoa(int(k)),
				Kind:       g.GetKind(),
				Passive:    g.GetPassive(),
			}
			switch g.GetKind() {
			case ModelInstanceGroup_KIND_GPU:
				for _, id := range g.GetGpus() {
					r := ref
					r.DeviceID = id
					r.HostPolicy = hostPolicy(g, "gpu_"+strconv.Itoa(int(id)))
					refs = append(refs, r)
				}
			case ModelInstanceGroup_KIND_MODEL:
				ref.HostPolicy = hostPolicy(g, "model")
				refs = append(refs, ref)
			default:
				ref.HostPolicy = hostPolicy(g, "cpu")
				refs = append(refs, ref)
			}
		}
	}
	return refs
}

func hostPolicy(g *ModelInstanceGroup, def string) string {
	if p := g.GetHostPolicy(); p != "" {
		return p
	}
	return def
}
