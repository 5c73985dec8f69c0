package core

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
)

// A load override's configuration is the client's, not the repository's.
// The files of the model a config names are confined to the model's folder
// whatever the config's source: data files and labels, which the core
// reads, also after symbolic links (modelfile); the model file, which a
// backend hands to ONNX Runtime or Python, as written, with links followed
// as Triton follows them, except that a model file an override names and
// the repository's config does not is confined after links too
// (modelFile below). The paths Triton documents as host paths are not
// confined: op_library_filename ("/path/to/libonnxcustom.so",
// triton-inference-server/server docs/user_guide/custom_operations.md),
// EXECUTION_ENV_PATH (an absolute path or $$TRITON_MODEL_DIRECTORY/...,
// triton-inference-server/python_backend README.md) and the execution
// accelerators' file and address settings. The repository's own config
// keeps naming any of those, as in Triton; an override may name only the
// values the repository's config names, or (op_library_filename,
// EXECUTION_ENV_PATH) an absolute path that resolves inside the model's
// folder, which --allow-model-file-override=false also takes away: then it
// may not name libraries or Python code or environments the repository's
// config does not. docs/repositories.md, "Paths a config may name", says
// the same.

const (
	// errNotOwn: an override names a host path the repository's config
	// does not, and no other is allowed.
	errNotOwn = modelfile.Reason("is not what the repository's own config names, and a load override may name no other")
	// errNotOwnLocked: as errNotOwn, under --allow-model-file-override=false.
	errNotOwnLocked = modelfile.Reason("is not what the repository's own config names, and with --allow-model-file-override=false a load override may name no other")
	// errNotInside: an override names a host path that is neither the
	// repository's nor an absolute path inside the model folder.
	errNotInside = modelfile.Reason("is neither what the repository's own config names nor an absolute path inside the model directory")
)

// checkOverride applies these rules to the configuration of a load
// override, m.Config, before any backend sees it (auto-complete included).
// own is the repository's config for the model, read again from its
// folder; with override files there is no repository config to compare
// with.
func (s *Server) checkOverride(m *repo.Model, ov *LoadOverride) error {
	if ov == nil || ov.ConfigJSON == "" {
		return nil
	}
	own := &modelconfig.ModelConfig{}
	if len(ov.Files) == 0 {
		// A repository config that does not read names nothing.
		if rm, err := repo.ReadModel(m.Dir, m.Name, nil, repo.ReadOptions{ConfigName: s.opts.ConfigName, AutoComplete: s.opts.AutoComplete}); err == nil {
			own = rm.Config
		}
	}
	p := overridePolicy{model: m.Name, dir: m.Dir, own: own, locked: s.opts.NoFileOverrides}
	for _, v := range m.Versions {
		p.versions = append(p.versions, m.VersionDir(v))
	}
	return p.check(m.Config)
}

// overridePolicy checks an override's config against the repository's.
type overridePolicy struct {
	model    string
	dir      string   // the model folder
	versions []string // its version folders
	own      *modelconfig.ModelConfig
	locked   bool // --allow-model-file-override=false
}

func (p overridePolicy) check(cfg *modelconfig.ModelConfig) error {
	checks := []func(*modelconfig.ModelConfig) error{p.opLibraries, p.executionEnv, p.pythonFile, p.modelFile, p.accelerators, p.sessionFiles}
	for _, c := range checks {
		if err := c(cfg); err != nil {
			return err
		}
	}
	return nil
}

// opLibraries: each model_operations.op_library_filename is one of the
// repository config's, or an absolute path to a file in the model folder.
func (p overridePolicy) opLibraries(cfg *modelconfig.ModelConfig) error {
	own := p.own.GetModelOperations().GetOpLibraryFilename()
	for _, lib := range cfg.GetModelOperations().GetOpLibraryFilename() {
		if slices.Contains(own, lib) {
			continue
		}
		if err := p.hostPath(lib, false); err != nil {
			return FileError("model_operations op_library_filename", lib, err)
		}
	}
	return nil
}

// executionEnv: EXECUTION_ENV_PATH is the repository config's, or, with
// $$TRITON_MODEL_DIRECTORY replaced, an absolute path to an archive or a
// folder in the model folder.
func (p overridePolicy) executionEnv(cfg *modelconfig.ModelConfig) error {
	const key = "EXECUTION_ENV_PATH"
	env := cfg.GetParameters()[key].GetStringValue()
	if env == "" || env == p.own.GetParameters()[key].GetStringValue() {
		return nil
	}
	if err := p.hostPath(modelfile.ExpandModelDir(env, p.dir), true); err != nil {
		return FileError("parameters "+key, env, err)
	}
	return nil
}

// hostPath checks a host path the repository's config does not name: only
// an absolute path that resolves (after links) to a regular file, or with
// folder to a folder too, inside the model folder, and none at all under
// --allow-model-file-override=false.
func (p overridePolicy) hostPath(host string, folder bool) error {
	if p.locked {
		return errNotOwnLocked
	}
	rel, ok := modelfile.Local(p.dir, host)
	if !filepath.IsAbs(host) || !ok {
		return errNotInside
	}
	_, st, err := modelfile.Resolve(p.dir, rel)
	switch {
	case errors.Is(err, modelfile.ErrOutside):
		return errNotInside
	case err != nil:
		return err
	case !st.Mode().IsRegular() && !(folder && st.IsDir()):
		return modelfile.ErrNotRegular
	}
	return nil
}

// pythonFile: under --allow-model-file-override=false, a Python model's
// code file (default_model_filename, or model.py) is the one the
// repository's config makes it run. Which files of the version folder a
// Python worker imports is code execution; ONNX files are not.
func (p overridePolicy) pythonFile(cfg *modelconfig.ModelConfig) error {
	if !p.locked || cfg.GetBackend() != modelconfig.BackendPython {
		return nil
	}
	file := pythonFileOf(cfg)
	if p.own.GetBackend() == modelconfig.BackendPython && pythonFileOf(p.own) == file {
		return nil
	}
	return FileError("default_model_filename of a python model", file, errNotOwnLocked)
}

// modelFile: a model file (default_model_filename) the override names
// that the repository's config does not must resolve inside each version
// folder also after symbolic links. The backends follow links for the
// repository's own names, as Triton does (modelfile.Locate); a client's
// name may not lead out through them. A folder of that name is checked
// with the inner model.onnx the ONNX backend reads from it.
func (p overridePolicy) modelFile(cfg *modelconfig.ModelConfig) error {
	name := cfg.GetDefaultModelFilename()
	if name == "" || name == p.own.GetDefaultModelFilename() {
		return nil
	}
	for _, dir := range p.versions {
		_, st, err := modelfile.Resolve(dir, name)
		if err == nil && st.IsDir() {
			_, _, err = modelfile.Resolve(dir, path.Join(name, modelconfig.FilenameONNX))
		}
		if errors.Is(err, modelfile.ErrOutside) {
			return FileError(fmt.Sprintf("model '%s' default_model_filename", p.model), name, err)
		}
	}
	return nil
}

func pythonFileOf(cfg *modelconfig.ModelConfig) string {
	if f := cfg.GetDefaultModelFilename(); f != "" {
		return f
	}
	return modelconfig.FilenamePython
}

// hostAcceleratorKeys are the execution accelerator parameters that name
// files ONNX Runtime reads, writes or loads as code, or addresses in the
// process (triton-inference-server/onnxruntime_backend README.md,
// onnxruntime's provider options): an override keeps the repository's.
var hostAcceleratorKeys = map[string]bool{
	// TensorRT
	"int8_calibration_table_name": true, "trt_engine_cache_path": true, "trt_engine_cache_prefix": true,
	"trt_timing_cache_path": true, "trt_extra_plugin_lib_paths": true, "trt_ep_context_file_path": true,
	"trt_dump_subgraphs": true, "trt_dump_ep_context_model": true,
	// CUDA
	"user_compute_stream": true, "gpu_external_alloc": true, "gpu_external_free": true, "gpu_external_empty_cache": true,
}

// accelerators: the host settings of each execution accelerator are the
// repository config's (the same key, value and accelerator name).
func (p overridePolicy) accelerators(cfg *modelconfig.ModelConfig) error {
	own := map[string]string{}
	for _, ea := range allAccelerators(p.own) {
		for k, v := range ea.GetParameters() {
			own[ea.GetName()+"\x00"+k] = v
		}
	}
	for _, ea := range allAccelerators(cfg) {
		for k, v := range ea.GetParameters() {
			if !hostAcceleratorKeys[k] {
				continue
			}
			if ov, ok := own[ea.GetName()+"\x00"+k]; !ok || ov != v {
				return FileError(fmt.Sprintf("execution accelerator '%s' parameter %s", ea.GetName(), k), v, errNotOwn)
			}
		}
	}
	return nil
}

func allAccelerators(cfg *modelconfig.ModelConfig) []*modelconfig.ModelOptimizationPolicy_ExecutionAccelerators_Accelerator {
	eas := cfg.GetOptimization().GetExecutionAccelerators()
	return append(slices.Clone(eas.GetGpuExecutionAccelerator()), eas.GetCpuExecutionAccelerator()...)
}

// sessionFiles: ONNX Runtime session entries (session.* parameters, passed
// through verbatim) whose key names a file, path or folder are the
// repository config's: ORT reads or writes those files.
func (p overridePolicy) sessionFiles(cfg *modelconfig.ModelConfig) error {
	for k, v := range cfg.GetParameters() {
		if !strings.HasPrefix(k, "session.") || !namesFile(k) {
			continue
		}
		if ov, ok := p.own.GetParameters()[k]; !ok || ov.GetStringValue() != v.GetStringValue() {
			return FileError("parameters "+k, v.GetStringValue(), errNotOwn)
		}
	}
	return nil
}

// namesFile reports whether a session config key has a word that says it
// names a file ("session.collect_node_memory_stats_to_file",
// "session.model_external_initializers_file_folder_path").
func namesFile(key string) bool {
	for w := range strings.FieldsFuncSeq(key, func(r rune) bool { return r == '.' || r == '_' }) {
		switch w {
		case "file", "files", "path", "paths", "folder", "dir", "directory", "filename", "filepath":
			return true
		}
	}
	return false
}
