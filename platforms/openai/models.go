package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/textmodel"
)

// descriptions holds each loaded version's textmodel description, read
// from its folder on first use. An entry is keyed by name and version
// and remembers which loaded copy it describes (weakly, so an unloaded
// copy is not kept alive): a reload of the same version reads the
// folder again.
type descriptions struct {
	mu sync.Mutex
	m  map[descKey]*descEntry
}

type descKey struct {
	name    string
	version int64
}

type descEntry struct {
	mv   weak.Pointer[core.ModelVersion]
	once sync.Once
	desc *textmodel.Model
	err  error
}

func newDescriptions() *descriptions { return &descriptions{m: map[descKey]*descEntry{}} }

// of describes mv (held by the caller), reading its folder once.
func (d *descriptions) of(mv *core.ModelVersion) (*textmodel.Model, error) {
	key, wp := descKey{mv.Name, mv.Version}, weak.Make(mv)
	d.mu.Lock()
	e := d.m[key]
	if e == nil || e.mv != wp {
		e = &descEntry{mv: wp}
		d.m[key] = e
		d.prune()
	}
	d.mu.Unlock()
	e.once.Do(func() {
		if mv.Dir == "" {
			e.err = fmt.Errorf("model '%s' has no local folder", mv.Name)
			return
		}
		e.desc, e.err = textmodel.Describe(mv.Dir, mv.Config)
	})
	return e.desc, e.err
}

// prune drops the entries of copies that are gone; d.mu is held.
func (d *descriptions) prune() {
	for k, e := range d.m {
		if e.mv.Value() == nil {
			delete(d.m, k)
		}
	}
}

// target is the model a call runs on: the version found, and what it
// serves.
type target struct {
	name    string
	version int64
	desc    *textmodel.Model
}

// resolve finds model name's latest ready version and describes it; the
// model must serve one of kinds. An unknown or unready model is OpenAI's
// model_not_found.
func (s *Server) resolve(name string, kinds ...textmodel.Kind) (target, error) {
	if name == "" {
		return target{}, invalid("model", "you must provide a model parameter")
	}
	mv, release, err := s.core.Acquire(name, core.LatestVersion)
	if err != nil {
		return target{}, modelNotFound(name)
	}
	defer release()
	desc, err := s.models.of(mv)
	if err != nil {
		return target{}, invalid("model", "model `%s`: %v", name, err)
	}
	if !slices.Contains(kinds, desc.Kind) {
		why := ""
		if desc.Reason != "" {
			why = " (" + desc.Reason + ")"
		}
		return target{}, invalid("model", "model `%s` is %s, not %s%s", name, desc.Kind, kindList(kinds), why)
	}
	return target{name: mv.Name, version: mv.Version, desc: desc}, nil
}

// resolveDefault is resolve for the TEI routes, whose requests may name
// no model: then the one ready model that serves kinds, else a 400
// listing them.
func (s *Server) resolveDefault(ctx context.Context, name string, kinds ...textmodel.Kind) (target, error) {
	if name != "" {
		return s.resolve(name, kinds...)
	}
	names, err := s.index.get(ctx, s.readyModels)
	if err != nil {
		return target{}, err
	}
	var found []target
	for _, n := range names {
		if t, err := s.resolve(n, kinds...); err == nil {
			found = append(found, t)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	var list []string
	for _, t := range found {
		list = append(list, t.name)
	}
	var e *Error
	if len(found) == 0 {
		e = invalid("model", "no ready model serves %s", kindList(kinds))
	} else {
		e = invalid("model", "several models serve %s: name one with \"model\" (%s)", kindList(kinds), strings.Join(list, ", "))
	}
	e.TEIStatus = http.StatusBadRequest // not a validation of the inputs
	return target{}, e
}

func kindList(kinds []textmodel.Kind) string {
	var s []string
	for _, k := range kinds {
		s = append(s, string(k))
	}
	return strings.Join(s, " or ")
}

// readyModels lists the names of the models with a ready version, once
// each, in the repository index's order.
func (s *Server) readyModels(ctx context.Context) ([]string, error) {
	idx, err := s.core.Index(ctx, true)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range idx {
		if len(names) == 0 || names[len(names)-1] != e.Name {
			names = append(names, e.Name)
		}
	}
	return names, nil
}

// modelObject is OpenAI's Model (openai/openai-python types/model.py).
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func newModelObject(name string) modelObject {
	return modelObject{ID: name, Object: "model", OwnedBy: "inferd"}
}

// listModels is GET /v1/models: every model with a ready version.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	names, err := s.index.get(r.Context(), s.readyModels)
	if err != nil {
		return err
	}
	data := make([]modelObject, 0, len(names))
	for _, n := range names {
		data = append(data, newModelObject(n))
	}
	body, err := json.Marshal(struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// getModel is GET /v1/models/{id}: 404 model_not_found unless ready.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "id")
	if !s.core.ModelReady(name, core.LatestVersion) {
		return modelNotFound(name)
	}
	body, err := json.Marshal(newModelObject(name))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// indexTTL is how long /v1/models and the TEI routes reuse the list of
// ready models: the list is the repository index, a listing
// of every repository root (a request to the store for a remote one).
const indexTTL = time.Second

// indexCache keeps the ready models' names for indexTTL.
type indexCache struct {
	mu    sync.Mutex
	at    time.Time
	names []string
}

// get returns the cached names, or fresh ones from list once they are
// older than indexTTL.
func (c *indexCache) get(ctx context.Context, list func(context.Context) ([]string, error)) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names != nil && time.Since(c.at) < indexTTL {
		return c.names, nil
	}
	names, err := list(ctx)
	if err != nil {
		return nil, err
	}
	c.names, c.at = names, time.Now()
	return names, nil
}
