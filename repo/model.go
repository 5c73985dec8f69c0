package repo

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
)

// ReadOptions are the repository-wide settings that shape how a model
// folder is read.
type ReadOptions struct {
	// ConfigName selects configs/<name>.pbtxt when it exists (--model-config-name).
	ConfigName string
	// AutoComplete allows a missing config.pbtxt (the backend fills it in).
	AutoComplete bool
	// Renamed says the folder is served under another name (a Mapped
	// root): the config's own name is replaced by the served one.
	Renamed bool
	Logger  *slog.Logger
}

// Model is a model folder as read from disk, before any backend has seen it.
type Model struct {
	Name string
	// Namespace is the model's namespace under --model-namespacing (its
	// root, set by whoever loads it), empty without.
	Namespace string
	Dir       string
	// Config is the parsed and normalised configuration (see
	// modelconfig.Normalize); with
	// auto-complete it may still lack inputs and outputs.
	Config *modelconfig.ModelConfig
	// HasConfigFile is false when the config was started empty.
	HasConfigFile bool
	// Versions are all numeric version folders found, ascending.
	Versions []int64
}

// ErrNoConfig is returned when config.pbtxt is missing and auto-complete is off.
var ErrNoConfig = errors.New("model configuration is not provided")

// ReadModel reads the model folder dir for model name. A non-nil override
// replaces the on-disk configuration (the load API's `config` parameter).
func ReadModel(dir, name string, override *modelconfig.ModelConfig, opts ReadOptions) (*Model, error) {
	m := &Model{Name: name, Dir: dir}
	switch {
	case override != nil:
		m.Config = override
		m.HasConfigFile = true
	default:
		cfg, found, err := readConfig(dir, opts.ConfigName)
		if err != nil {
			return nil, err
		}
		if !found {
			if !opts.AutoComplete {
				return nil, fmt.Errorf("%w: %s", ErrNoConfig, filepath.Join(dir, "config.pbtxt"))
			}
			cfg = &modelconfig.ModelConfig{}
		}
		m.Config, m.HasConfigFile = cfg, found
	}
	versions, err := listVersions(dir, opts.Logger)
	if err != nil {
		return nil, err
	}
	m.Versions = versions
	if opts.Renamed {
		m.Config.Name = name
	}
	tree := treeOf(dir)
	if m.Config.GetBackend() == "" && m.Config.GetPlatform() == "" && m.Config.GetDefaultModelFilename() == "" && firstSubdirHas(tree, modelconfig.FilenamePython) {
		// A version folder holding model.py makes a Python model
		// (AutoCompleteBackendFields, triton-inference-server/core
		// src/model_config_utils.cc).
		m.Config.Backend = modelconfig.BackendPython
	}
	if err := modelconfig.Normalize(m.Config, name, firstSubdirHasModelONNX(tree)); err != nil {
		return nil, err
	}
	if err := modelconfig.Validate(m.Config, name, !opts.AutoComplete); err != nil {
		return nil, err
	}
	return m, nil
}

func readConfig(dir, configName string) (*modelconfig.ModelConfig, bool, error) {
	path := filepath.Join(dir, "config.pbtxt")
	if configName != "" {
		if p := filepath.Join(dir, "configs", configName+".pbtxt"); fileExists(p) {
			path = p
		}
	}
	text, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	cfg, err := modelconfig.Parse(text)
	if err != nil {
		return nil, false, fmt.Errorf("parse %s: %w", path, err)
	}
	return cfg, true, nil
}

var versionName = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// listVersions applies the version-folder rules: warmup, initial_state and
// configs are never versions; names with leading zeros or that are not
// plain integers are skipped with a warning (stricter than Triton's stoll,
// which reads "1abc" as 1).
func listVersions(dir string, log *slog.Logger) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []int64
	for _, e := range entries {
		name := e.Name()
		if !isDir(filepath.Join(dir, name), e) {
			continue
		}
		switch name {
		case "warmup", "initial_state", "configs":
			continue
		}
		if !versionName.MatchString(name) {
			if log != nil {
				log.Warn("ignoring folder that is not a version number", "model_dir", dir, "folder", name)
			}
			continue
		}
		v, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			if log != nil {
				log.Warn("ignoring version folder out of range", "model_dir", dir, "folder", name)
			}
			continue
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// firstSubdirHasModelONNX implements Triton's backend detection
// (AutoCompleteBackendFields, triton-inference-server/core
// src/model_config_utils.cc): the
// first sub-folder in plain lexicographic order holds a model.onnx entry
// (file or folder).
func firstSubdirHasModelONNX(t folderTree) bool { return firstSubdirHas(t, "model.onnx") }

// firstSubdirHas reports whether the first sub-folder holds an entry file.
func firstSubdirHas(t folderTree, file string) bool {
	subdirs := t.subdirs()
	return len(subdirs) > 0 && t.has(subdirs[0]+"/"+file)
}

// folderTree is what a model folder holds, for the checks made before the
// versions are fetched.
type folderTree interface {
	// subdirs lists the sub-folders in plain lexicographic order.
	subdirs() []string
	// has reports whether the "/"-separated path names a file or folder.
	has(rel string) bool
}

// treeOf answers for the model folder dir: from disk, or, for the local
// copy of a remote model (whose version folders stay empty until their
// version is selected), from the listing of the store that the sync
// recorded beside it. Every kind of root thus gives the same answer.
func treeOf(dir string) folderTree {
	if t, ok := listedTree(dir); ok {
		return t
	}
	return diskTree(dir)
}

// diskTree is a folder on local disk; links are followed.
type diskTree string

func (d diskTree) subdirs() []string {
	entries, err := os.ReadDir(string(d)) // sorted by name
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if isDir(filepath.Join(string(d), e.Name()), e) {
			out = append(out, e.Name())
		}
	}
	return out
}

func (d diskTree) has(rel string) bool {
	_, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(rel)))
	return err == nil
}

// listing is a model folder as an object store lists it: a folder exists
// when some object's path lies below it (a "name/" folder marker counts).
type listing struct {
	entries map[string]bool // every object path and every folder above one
	top     []string        // first-level folders, sorted
}

// newListing builds the tree of the paths (relative to the model folder).
func newListing(paths []string) listing {
	l := listing{entries: map[string]bool{}}
	top := map[string]bool{}
	for _, p := range paths {
		if first, _, nested := strings.Cut(p, "/"); nested && first != "" {
			top[first] = true
		}
		p = strings.TrimSuffix(p, "/")
		for p != "" {
			l.entries[p] = true
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	l.top = slices.Sorted(maps.Keys(top))
	return l
}

func (l listing) subdirs() []string   { return l.top }
func (l listing) has(rel string) bool { return l.entries[rel] }

// VersionDir is the folder of one version.
func (m *Model) VersionDir(v int64) string {
	return filepath.Join(m.Dir, strconv.FormatInt(v, 10))
}

// maxLabelBytes bounds one label file: a large vocabulary's labels are a
// few MiB.
const maxLabelBytes = 64 << 20

// Labels reads every output's label_filename (relative to the model folder,
// as Triton's JoinPath(model folder, label_filename)). A label file may
// not leave the model folder, also not through a symbolic link, must be a
// regular file, and at most maxLabelBytes (modelfile). Keys are output
// names.
func (m *Model) Labels() (map[string][]string, error) {
	out := map[string][]string{}
	for _, o := range m.Config.GetOutput() {
		if o.GetLabelFilename() == "" {
			continue
		}
		data, err := modelfile.ReadFile(m.Dir, o.GetLabelFilename(), maxLabelBytes)
		if err != nil {
			return nil, &modelfile.FieldError{Field: fmt.Sprintf("output '%s' label_filename", o.GetName()), Path: o.GetLabelFilename(), Err: err}
		}
		// Lines split on \n with no trimming, as Triton's label provider.
		lines := strings.Split(string(data), "\n")
		if n := len(lines); n > 0 && lines[n-1] == "" {
			lines = lines[:n-1]
		}
		out[o.GetName()] = lines
	}
	return out, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
