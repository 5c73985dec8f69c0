package sagemaker

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// targetModelHeader names the served model of an MME artifact.
const targetModelHeader = "X-Amzn-Sagemaker-Target-Model"

// mmeModel is one loaded MME artifact.
type mmeModel struct {
	repoPath   string // registered repository, reported as modelUrl
	tritonName string // name it is served under
}

// maxLoadBody bounds a load request, which is two short strings.
const maxLoadBody = 1 << 20

// ensemblePlatform spots an ensemble config in Case B (see resolveModelDir).
var ensemblePlatform = regexp.MustCompile(`platform:\s*"ensemble"`)

// load is POST /models.
func (h *handler) load(w http.ResponseWriter, r *http.Request) error {
	if h.restricted(w, r, "model-repository") {
		return nil
	}
	body, err := httpapi.ReadBody(r, maxLoadBody)
	if err != nil {
		return httpapi.Errorf(http.StatusBadRequest, "failed to read the request body")
	}
	var id, url string
	if len(body) > 0 { // an empty body is not parsed: both fields stay ""
		if id, url, err = loadFields(body); err != nil {
			return httpapi.Errorf(http.StatusBadRequest, "%s", err)
		}
	}
	norm := url
	if !filepath.IsAbs(norm) {
		wd, _ := os.Getwd()
		norm = filepath.Join(wd, norm)
	}
	// Keep a trailing slash through cleaning: ".../model/<sub>/" must not match.
	trailing := strings.HasSuffix(url, "/") && len(url) > 1
	norm = filepath.Clean(norm)
	if trailing && norm != "/" {
		norm += "/"
	}
	for _, p := range []string{"/dev/", "/proc/", "/sys/"} {
		if strings.HasPrefix(norm, p) {
			return httpapi.Empty(http.StatusBadRequest)
		}
	}
	if !h.urlPattern().MatchString(norm) {
		return httpapi.Errorf(http.StatusBadRequest, `Invalid "url" '%s': expected a path of the form %s/<hash>/model[/<subdir>]`, url, h.opts.ModelsRoot)
	}
	repoPath, modelDir, err := resolveModelDir(filepath.Clean(norm), h.log)
	if err != nil {
		return httpapi.Errorf(http.StatusBadRequest, "%s", err)
	}
	name := servedFromHeader(r.Header.Get(targetModelHeader))
	if name == "" {
		name = id
	}

	h.mu.Lock()
	if h.loaded[id] != nil || h.pending[id] {
		h.mu.Unlock()
		return httpapi.Errorf(http.StatusConflict, "Model %s is already loaded.", id)
	}
	h.pending[id] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.pending, id)
		h.mu.Unlock()
	}()

	// Loads finish even if SageMaker gives up on the request, so the
	// registry and the core never disagree.
	ctx := context.WithoutCancel(r.Context())
	if err := h.core.RegisterRepository(repoPath, map[string]string{modelDir: name}); err != nil {
		status := http.StatusBadRequest
		if core.CodeOf(err) == core.CodeAlreadyExists {
			status = http.StatusConflict
		}
		return httpapi.Errorf(status, "%s", err)
	}
	if err := h.core.Load(ctx, name, nil); err != nil {
		// Clear the failed state (strict readiness would count it) and
		// the registration, so a retry starts clean.
		_ = h.core.Unload(ctx, name)
		_ = h.core.UnregisterRepository(repoPath)
		status := http.StatusBadRequest
		switch {
		case core.CodeOf(err) == core.CodeAlreadyExists:
			status = http.StatusConflict
		case hasOOMMarker(err.Error()):
			status = http.StatusInsufficientStorage
		}
		h.log.Warn("sagemaker: model load failed", "model", id, "name", name, "url", url, "status", status, "err", err)
		return httpapi.Errorf(status, "%s", err)
	}
	h.mu.Lock()
	h.loaded[id] = &mmeModel{repoPath: repoPath, tritonName: name}
	h.mu.Unlock()
	h.log.Info("sagemaker: model loaded", "model", id, "name", name, "repository", repoPath)
	httpapi.WriteEmpty(w, http.StatusOK)
	return nil
}

// urlPattern is Triton's load-url pattern rooted at ModelsRoot.
func (h *handler) urlPattern() *regexp.Regexp {
	root := regexp.QuoteMeta(strings.TrimSuffix(h.opts.ModelsRoot, "/"))
	return regexp.MustCompile(`^(` + root + `/[0-9A-Za-z._]+)/(model)/?([0-9A-Za-z._]+)?$`)
}

// loadFields reads model_name and url of a load body; JSON errors and
// non-string members are client errors here (400), not INTERNAL.
func loadFields(body []byte) (id, url string, err error) {
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return "", "", err
	}
	root := doc.Root()
	if v, ok := root.Find("model_name"); ok {
		if id, err = v.Str(); err != nil {
			return "", "", core.Errorf(core.CodeInvalidArg, "Unable to parse 'model_name': %v", err)
		}
	}
	if v, ok := root.Find("url"); ok {
		if url, err = v.Str(); err != nil {
			return "", "", core.Errorf(core.CodeInvalidArg, "Unable to parse 'url': %v", err)
		}
	}
	return id, url, nil
}

// resolveModelDir finds the model folder as Triton's SageMakerMMELoadModel
// does (triton-inference-server/server src/sagemaker_server.cc). Case A: url holds config.pbtxt,
// so it is the model folder inside its parent. Case B: url is a repository;
// its ensemble folder (else its only, else its last folder) is the model.
func resolveModelDir(url string, log interface{ Warn(string, ...any) }) (repoPath, modelDir string, err error) {
	if st, err := os.Stat(filepath.Join(url, "config.pbtxt")); err == nil && !st.IsDir() {
		return filepath.Dir(url), filepath.Base(url), nil
	}
	entries, err := os.ReadDir(url)
	if err != nil {
		return "", "", core.Errorf(core.CodeInvalidArg, "failed to read model directory '%s': %v", url, err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dirs = append(dirs, e.Name())
		if cfg, err := os.ReadFile(filepath.Join(url, e.Name(), "config.pbtxt")); err == nil && ensemblePlatform.Match(cfg) {
			return url, e.Name(), nil
		}
	}
	switch len(dirs) {
	case 0:
		return "", "", core.Errorf(core.CodeInvalidArg, "no model directory found in '%s'", url)
	case 1:
	default:
		// Triton takes whichever the listing returns last; be deterministic.
		sort.Strings(dirs)
		log.Warn("sagemaker: several model directories and no ensemble; using the last", "url", url, "dirs", dirs, "using", dirs[len(dirs)-1])
	}
	return url, dirs[len(dirs)-1], nil
}

// list is GET /models: loaded ids whose served model is READY.
func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	if h.restricted(w, r, "model-repository") {
		return
	}
	h.mu.Lock()
	ids := make([]string, 0, len(h.loaded))
	for id := range h.loaded {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	recs := make([]*mmeModel, len(ids))
	for i, id := range ids {
		recs[i] = h.loaded[id]
	}
	h.mu.Unlock()
	b := []byte(`{"models":[`)
	n := 0
	for i, id := range ids {
		if !h.core.ModelReady(recs[i].tritonName, core.LatestVersion) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = appendModel(b, id, recs[i].repoPath)
	}
	writeJSON(w, http.StatusOK, append(b, "]}"...))
}

func appendModel(b []byte, id, url string) []byte {
	b = append(b, `{"modelName":`...)
	b = tritonjson.AppendString(b, id)
	b = append(b, `,"modelUrl":`...)
	b = tritonjson.AppendString(b, url)
	return append(b, '}')
}

// lookup returns the record of a loaded id.
func (h *handler) lookup(id string) *mmeModel {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.loaded[id]
}

// get is GET /models/{m}.
func (h *handler) get(w http.ResponseWriter, r *http.Request, id string) error {
	if h.restricted(w, r, "model-repository") {
		return nil
	}
	rec := h.lookup(id)
	if rec == nil {
		return httpapi.Empty(http.StatusNotFound)
	}
	writeJSON(w, http.StatusOK, appendModel(nil, id, rec.repoPath))
	return nil
}

// servedName is the target-model header, else the name recorded at load
// (Triton falls back to the id, which fails when the two differ).
func servedName(r *http.Request, rec *mmeModel) string {
	if n := servedFromHeader(r.Header.Get(targetModelHeader)); n != "" {
		return n
	}
	return rec.tritonName
}

// servedFromHeader turns a TargetModel value into a model name. SageMaker
// sends the artifact's path ("dir/x.tar.gz"); a model name cannot hold
// "/" (it is a path segment of every v2 route), so it becomes "_".
// Triton serves the raw value; responses name the model with "_" here.
func servedFromHeader(v string) string { return strings.ReplaceAll(v, "/", "_") }

// invoke is POST /models/{m}/invoke; an unknown id is 404 before the
// restriction check, so it never yields 403.
func (h *handler) invoke(w http.ResponseWriter, r *http.Request, id string) error {
	rec := h.lookup(id)
	if rec == nil {
		return httpapi.Empty(http.StatusNotFound)
	}
	return h.infer(w, r, servedName(r, rec), true)
}

// unload is DELETE /models/{m}. It answers only once the model's resources
// are released, since SageMaker loads the next model right after a 200.
func (h *handler) unload(w http.ResponseWriter, r *http.Request, id string) error {
	if h.restricted(w, r, "model-repository") {
		return nil
	}
	rec := h.lookup(id)
	if rec == nil {
		return httpapi.Empty(http.StatusNotFound)
	}
	name := servedName(r, rec)
	// The unload goes on if SageMaker drops the request, but its wait (for
	// in-flight requests, then for the index) ends in time for SageMaker's
	// own 360 s: past it, as in Triton, the delay is logged, not returned.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.unloadTimeout)
	defer cancel()
	err := h.core.Unload(ctx, name)
	if err != nil && ctx.Err() == nil {
		return httpapi.Errorf(http.StatusBadRequest, "%s", err)
	}
	// err != nil: the deadline passed while in-flight requests held the
	// model; they finish, and the model unloads, in the background.
	if err != nil || !h.waitUnloaded(ctx, name) {
		h.log.Warn("sagemaker: model not unloaded in time; it finishes unloading in the background", "model", id, "name", name, "waited", h.unloadTimeout)
	}
	h.mu.Lock()
	delete(h.loaded, id)
	h.mu.Unlock()
	if err := h.core.UnregisterRepository(rec.repoPath); err != nil {
		return httpapi.Errorf(http.StatusBadRequest, "%s", err)
	}
	h.log.Info("sagemaker: model unloaded", "model", id, "name", name)
	httpapi.WriteEmpty(w, http.StatusOK)
	return nil
}

// waitUnloaded polls the repository index until no version of name is
// READY, LOADING or UNLOADING, or ctx ends (the unload's deadline).
func (h *handler) waitUnloaded(ctx context.Context, name string) bool {
	tick := time.NewTicker(h.pollEvery)
	defer tick.Stop()
	for {
		entries, err := h.core.Index(ctx, false)
		if err == nil && unloaded(entries, name) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

func unloaded(entries []core.IndexEntry, name string) bool {
	for _, e := range entries {
		if e.Name == name && (e.State == core.StateReady || e.State == core.StateLoading || e.State == core.StateUnloading) {
			return false
		}
	}
	return true
}
