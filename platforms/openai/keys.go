package openai

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// MaxKeyFileSize bounds a key file: a key a line, a few KiB in practice.
const MaxKeyFileSize = 1 << 20

// ErrNoKeys is a key file with no key in it, refused at start so that a
// misplaced file does not leave the routes unguarded or locked.
var ErrNoKeys = errors.New("openai: key file holds no key")

// Keys are the API keys the routes accept (--openai-api-key, and
// --openai-api-key-file, re-read when its modification time or size
// changes, so keys rotate without a restart). The zero Keys (or nil)
// accepts every request.
type Keys struct {
	static []string
	files  []*keyFile
	// recheck is how often the files are looked at: at most one stat per
	// file per interval, whatever the request rate.
	recheck time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	checked time.Time
}

type keyFile struct {
	path string
	mod  time.Time
	size int64
	keys []string
}

// NewKeys reads the key files once: each must exist and hold a key.
// recheck <= 0 looks at the files on every request.
func NewKeys(keys, files []string, recheck time.Duration, log *slog.Logger) (*Keys, error) {
	k := &Keys{recheck: recheck, log: log}
	for _, key := range keys {
		if key = strings.TrimSpace(key); key != "" {
			k.static = append(k.static, key)
		}
	}
	for _, p := range files {
		f := &keyFile{path: p}
		if err := f.load(); err != nil {
			return nil, err
		}
		k.files = append(k.files, f)
	}
	k.checked = time.Now()
	return k, nil
}

// Enabled reports whether requests need a key.
func (k *Keys) Enabled() bool { return k != nil && (len(k.static) > 0 || len(k.files) > 0) }

// Check reports whether r carries an accepted key as
// "Authorization: Bearer <key>" (also true when no key is configured).
func (k *Keys) Check(r *http.Request) bool {
	if !k.Enabled() {
		return true
	}
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return false
	}
	token = strings.TrimSpace(token)
	found := 0
	for _, key := range k.current() {
		// Every key is compared, so the time taken says nothing of which
		// matched.
		found |= subtle.ConstantTimeCompare([]byte(token), []byte(key))
	}
	return found == 1 && token != ""
}

// current returns the accepted keys, re-reading a file that changed.
func (k *Keys) current() []string {
	if len(k.files) == 0 {
		return k.static // immutable after NewKeys
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.files) > 0 && (k.recheck <= 0 || time.Since(k.checked) >= k.recheck) {
		k.checked = time.Now()
		for _, f := range k.files {
			if err := f.refresh(); err != nil && k.log != nil {
				k.log.Warn("failed to re-read an API key file; its previous keys stay in force", "err", err)
			}
		}
	}
	out := append([]string(nil), k.static...)
	for _, f := range k.files {
		out = append(out, f.keys...)
	}
	return out
}

// refresh re-reads the file when its modification time or size changed;
// on failure (a rotation caught half-way, a removed file) the previous
// keys stay in force.
func (f *keyFile) refresh() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("openai: key file: %w", err)
	}
	if st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return nil
	}
	return f.load()
}

// load reads the file: a key a line; blank lines and lines starting with
// # are skipped.
func (f *keyFile) load() error {
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("openai: key file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("openai: key file: %w", err)
	}
	if st.Size() > MaxKeyFileSize || !st.Mode().IsRegular() {
		return fmt.Errorf("openai: key file %s: not a regular file of at most %d bytes", f.path, MaxKeyFileSize)
	}
	data := make([]byte, st.Size())
	if _, err := fh.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return fmt.Errorf("openai: key file %s: %w", f.path, err)
	}
	var keys []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: %s", ErrNoKeys, f.path)
	}
	f.keys, f.mod, f.size = keys, st.ModTime(), st.Size()
	return nil
}
