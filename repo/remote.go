package repo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpenOptions say how roots are opened: which remote stores exist (by URL
// scheme) and where their models are copied.
type OpenOptions struct {
	// Stores opens a remote root by its scheme ("s3", "gs"). The store
	// packages import repo, so the caller wires them in.
	Stores map[string]func(ctx context.Context, root string) (Store, error)
	// CacheDir holds the local copies of remote models (default: the OS
	// temp dir's inferd-cache).
	CacheDir string
	// Parallel bounds concurrent downloads per model (default 8).
	Parallel int
	// Lenient keeps a remote root that fails to open (storage down, no
	// credentials yet) instead of failing: its models are missing until a
	// later scan reaches it (see ErrUnreachable).
	Lenient bool
	Logger  *slog.Logger
}

// Open returns the Source for one --model-repository value.
func (o OpenOptions) Open(ctx context.Context, root string) (Source, error) {
	scheme, _, remote := strings.Cut(root, "://")
	if !remote {
		return OpenDir(root)
	}
	open := o.Stores[scheme]
	if open == nil {
		return nil, fmt.Errorf("repository %s: %s:// repositories are not supported", root, scheme)
	}
	openRemote := func(ctx context.Context) (Source, error) {
		st, err := open(ctx, root)
		if err != nil {
			return nil, fmt.Errorf("repository %s: %w", root, err)
		}
		return o.Remote(st), nil
	}
	src, err := openRemote(ctx)
	if err != nil && o.Lenient {
		if o.Logger != nil {
			o.Logger.Error("repository unreachable; its models load once it answers", "root", root, "err", err)
		}
		u := &unreachable{root: root, open: openRemote, err: err}
		u.backoff = time.Second
		u.next = time.Now().Add(u.backoff)
		return u, nil
	}
	return src, err
}

// OpenAll opens every root; any failure is fatal, as in Triton.
func (o OpenOptions) OpenAll(ctx context.Context, roots []string) (*Set, error) {
	s := &Set{}
	for _, r := range roots {
		src, err := o.Open(ctx, r)
		if err != nil {
			return nil, err
		}
		s.Sources = append(s.Sources, src)
	}
	return s, nil
}

// Remote is a repository in an object store, used through local copies.
type Remote struct {
	store    Store
	cache    string // this root's folder in the cache
	parallel int
	log      *slog.Logger
	mu       sync.Mutex     // one Localize per root at a time keeps the copy consistent
	holds    map[string]int // references to each model's copy (see Holder); under mu
}

// Remote wraps st as a Source whose models are copied under the cache dir.
func (o OpenOptions) Remote(st Store) *Remote {
	dir := o.CacheDir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "inferd-cache")
	}
	sum := sha256.Sum256([]byte(st.String()))
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Remote{store: st, cache: filepath.Join(dir, hex.EncodeToString(sum[:8])), parallel: max(o.Parallel, 8), log: log}
}

func (r *Remote) String() string { return r.store.String() }

// Models lists the first-level "folders": prefixes holding objects.
func (r *Remote) Models(ctx context.Context) ([]string, error) {
	objs, err := r.store.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", r.store, err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		if name, _, ok := strings.Cut(o.Key, "/"); ok && name != "" {
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	r.prune(seen)
	return names, nil
}

// prune deletes local copies of models the store no longer holds, so the
// cache does not grow with every model ever served. A loaded session does
// not need its files any more.
func (r *Remote) prune(present map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	entries, err := os.ReadDir(r.cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && !present[e.Name()] {
			if err := os.RemoveAll(filepath.Join(r.cache, e.Name())); err == nil {
				r.log.Info("removed the local copy of a model gone from the repository", "model", e.Name(), "from", r.store.String())
			}
		}
	}
}

// Fingerprint hashes the keys, sizes and versions of the model's objects;
// it lists the store but downloads nothing.
func (r *Remote) Fingerprint(ctx context.Context, model string) (string, error) {
	objs, err := r.store.List(ctx, model+"/")
	if err != nil {
		return "", fmt.Errorf("list %s/%s: %w", r.store, model, err)
	}
	if len(objs) == 0 {
		return "", fmt.Errorf("model folder %s/%s not found", r.store, model)
	}
	h := sha256.New()
	for _, o := range objs {
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00%d\n", o.Key, o.Size, o.Version, o.Modified.UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// manifestName is the manifest recorded beside a local copy.
const manifestName = ".inferd-manifest.json"

// manifest is what every sync records beside a local copy.
type manifest struct {
	// Fetched is the version of each object copied, by its path below the
	// model folder, so an unchanged object is not fetched again.
	Fetched map[string]string `json:"fetched"`
	// Listed is every path the store holds below the model folder, fetched
	// or not. The copy's version folders stay empty until their version is
	// selected; ReadModel learns what they hold from this listing (the
	// backend detection, firstSubdirHasModelONNX, looks into the first
	// folder, which the
	// version policy may never select).
	Listed []string `json:"listed"`
}

// Localize brings the local copy of model's configuration and other files
// up to date with the store and creates its version folders empty; the
// core then fetches the versions the policy selects with LocalizeVersions.
// Objects whose version changed are fetched (in parallel, each checked and
// renamed into place); objects gone from the store are removed. The
// manifest beside the copy records the listing of the whole model folder.
func (r *Remote) Localize(ctx context.Context, model string) (string, error) {
	return r.sync(ctx, model, func(string) bool { return true }, false)
}

// LocalizeVersions fetches the files of the given version folders.
func (r *Remote) LocalizeVersions(ctx context.Context, model string, versions []int64) error {
	want := map[string]bool{}
	for _, v := range versions {
		want[strconv.FormatInt(v, 10)] = true
	}
	_, err := r.sync(ctx, model, func(folder string) bool { return want[folder] }, true)
	return err
}

// localCopy is the folder of model's local copy; ok is false for a name
// that cannot be a folder of the cache, which sync refuses.
func (r *Remote) localCopy(model string) (dir string, ok bool) {
	if safeKey(model) != nil || strings.Contains(model, "/") {
		return "", false
	}
	return filepath.Join(r.cache, model), true
}

// sync updates the local copy of model: files outside numeric version
// folders when versions is false, else the files of version folders for
// which pick is true.
func (r *Remote) sync(ctx context.Context, model string, pick func(versionFolder string) bool, versions bool) (string, error) {
	local, ok := r.localCopy(model)
	if !ok {
		return "", fmt.Errorf("model name %q cannot be a local folder", model)
	}
	objs, err := r.store.List(ctx, model+"/")
	if err != nil {
		return "", fmt.Errorf("list %s/%s: %w", r.store, model, err)
	}
	if len(objs) == 0 {
		return "", fmt.Errorf("model folder %s/%s not found", r.store, model)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(local, 0o700); err != nil {
		return "", fmt.Errorf("cache for %s: %w", model, err)
	}
	have := readManifest(filepath.Join(local, manifestName)).Fetched
	remote := map[string]bool{}
	listed := make([]string, 0, len(objs))
	folders := map[string]bool{} // version folders the store has
	var fetch []Object
	var total int64
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, model+"/")
		if rel != "" {
			listed = append(listed, rel)
		}
		if rel == "" || strings.HasSuffix(rel, "/") {
			continue
		}
		if err := safeKey(rel); err != nil {
			return "", fmt.Errorf("%s/%s: %w", r.store, o.Key, err)
		}
		remote[rel] = true
		top, _, nested := strings.Cut(rel, "/")
		isVersion := nested && isVersionFolder(top)
		if isVersion {
			folders[top] = true
			// The folder exists locally even before its files do, so the
			// version policy sees every version.
			if err := os.MkdirAll(filepath.Join(local, top), 0o700); err != nil {
				return "", fmt.Errorf("cache for %s: %w", model, err)
			}
		}
		if isVersion != versions || (versions && !pick(top)) {
			continue
		}
		if v, ok := have[rel]; ok && v == o.Version && o.Version != "" && exists(filepath.Join(local, filepath.FromSlash(rel))) {
			continue
		}
		fetch = append(fetch, o)
		total += o.Size
	}
	err = r.fetch(ctx, model, local, fetch, total)
	// Record what is on disk now, even after a failure, so a retry fetches
	// only what is still missing or changed.
	for _, o := range fetch {
		rel := strings.TrimPrefix(o.Key, model+"/")
		if err == nil && o.Version != "" {
			have[rel] = o.Version
		} else {
			delete(have, rel)
		}
	}
	// Files the store no longer has go, so a removed version disappears.
	for rel := range have {
		if !remote[rel] {
			_ = os.Remove(filepath.Join(local, filepath.FromSlash(rel)))
			delete(have, rel)
		}
	}
	// So do version folders, or the policy would still see the version.
	if entries, rerr := os.ReadDir(local); rerr == nil {
		for _, e := range entries {
			if e.IsDir() && isVersionFolder(e.Name()) && !folders[e.Name()] {
				_ = os.RemoveAll(filepath.Join(local, e.Name()))
			}
		}
	}
	if werr := writeManifest(filepath.Join(local, manifestName), manifest{Fetched: have, Listed: listed}); werr != nil && err == nil {
		err = fmt.Errorf("cache for %s: %w", model, werr)
	}
	if err != nil {
		return "", err
	}
	return local, nil
}

// isVersionFolder matches the names that can be version folders: decimal
// numbers (the core applies Triton's finer rules when it lists them).
func isVersionFolder(name string) bool {
	_, err := strconv.ParseUint(name, 10, 63)
	return err == nil
}

// fetch downloads objs with a bounded pool, logging progress for large
// models. The first failure cancels the rest.
func (r *Remote) fetch(ctx context.Context, model, local string, objs []Object, total int64) error {
	if len(objs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var done atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	if total >= 64<<20 {
		go func() {
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					d := done.Load()
					r.log.Info("downloading model", "model", model, "from", r.store.String(), "bytes", d, "total", total,
						"MiB/s", fmt.Sprintf("%.1f", float64(d)/(1<<20)/time.Since(start).Seconds()))
				}
			}
		}()
	}
	defer close(stop)
	work := make(chan Object)
	var wg sync.WaitGroup
	for range min(r.parallel, len(objs)) {
		wg.Go(func() {
			for o := range work {
				rel := strings.TrimPrefix(o.Key, model+"/")
				if _, err := r.store.Download(ctx, o.Key, filepath.Join(local, filepath.FromSlash(rel))); err != nil {
					cancel(fmt.Errorf("download %s/%s: %w", r.store, o.Key, err))
					continue
				}
				done.Add(o.Size)
			}
		})
	}
	for _, o := range objs {
		select {
		case work <- o:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	r.log.Info("downloaded model", "model", model, "from", r.store.String(), "files", len(objs), "bytes", total, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// safeKey refuses keys that would land outside the cache folder.
func safeKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") {
		return errors.New("object key escapes the model folder")
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == ".." {
			return errors.New("object key escapes the model folder")
		}
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// readManifest reads the manifest at p; a missing or unreadable one (or
// one from before the listing was recorded) reads as empty, so everything
// is fetched again.
func readManifest(p string) manifest {
	var m manifest
	if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &m) != nil {
		m = manifest{}
	}
	if m.Fetched == nil {
		m.Fetched = map[string]string{}
	}
	return m
}

// listedTree returns the store's listing recorded beside dir when dir is
// the local copy of a remote model.
func listedTree(dir string) (folderTree, bool) {
	m := readManifest(filepath.Join(dir, manifestName))
	if m.Listed == nil {
		return nil, false
	}
	return newListing(m.Listed), true
}

func writeManifest(p string, m manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
