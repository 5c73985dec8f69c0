package repo

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// Mapped is a local root whose model folders may be served under other
// names (folder -> model name); unmapped folders keep their own names.
// SageMaker's multi-model endpoint registers each artifact this way, so
// the model is known by SageMaker's name whatever its folder is called.
type Mapped struct {
	dir     *Dir
	mapping map[string]string // folder -> served name
}

// OpenMapped opens a local root with a folder-to-name mapping.
func OpenMapped(path string, mapping map[string]string) (*Mapped, error) {
	d, err := OpenDir(path)
	if err != nil {
		return nil, err
	}
	return &Mapped{dir: d, mapping: maps.Clone(mapping)}, nil
}

func (m *Mapped) String() string { return m.dir.String() }

// Models lists the served names.
func (m *Mapped) Models(ctx context.Context) ([]string, error) {
	folders, err := m.dir.Models(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(folders))
	for _, f := range folders {
		if n, ok := m.mapping[f]; ok {
			f = n
		}
		names = append(names, f)
	}
	slices.Sort(names)
	return names, nil
}

// folder maps a served name back to its folder.
func (m *Mapped) folder(model string) (string, error) {
	for f, n := range m.mapping {
		if n == model {
			return f, nil
		}
	}
	if _, ok := m.mapping[model]; ok {
		// The folder is served under another name only.
		return "", fmt.Errorf("model %s not found in %s", model, m.dir)
	}
	return model, nil
}

// Localize returns the folder serving model.
func (m *Mapped) Localize(ctx context.Context, model string) (string, error) {
	f, err := m.folder(model)
	if err != nil {
		return "", err
	}
	return m.dir.Localize(ctx, f)
}

// Fingerprint summarises the folder serving model.
func (m *Mapped) Fingerprint(ctx context.Context, model string) (string, error) {
	f, err := m.folder(model)
	if err != nil {
		return "", err
	}
	return m.dir.Fingerprint(ctx, f)
}
