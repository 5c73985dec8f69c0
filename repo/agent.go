package repo

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Repository agents are Triton's model_repository_agents: code that runs
// on a model's files when it loads, before any backend sees them
// (triton-inference-server/server docs/customization_guide/repository_agents.md).
// Triton loads each from a shared library under --repoagent-directory;
// inferd's are built in, and a model naming any other fails to load.

// ChecksumAgent is the name of the built-in checksum agent, which verifies
// files' digests as triton-inference-server/checksum_repository_agent does.
const ChecksumAgent = "checksum"

// Agents lists the built-in repository agents.
func Agents() []string { return []string{ChecksumAgent} }

var (
	// ErrUnknownAgent marks a model that names an agent this server lacks.
	ErrUnknownAgent = errors.New("unknown repository agent")
	// ErrChecksumMismatch marks a file whose digest is not the one its
	// model's configuration gives.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrChecksumKey marks a checksum parameter whose key cannot be used:
	// no algorithm, an algorithm other than MD5, or a path that leaves the
	// model folder.
	ErrChecksumKey = errors.New("invalid checksum key")
	// ErrChecksumFile marks a file the checksum agent cannot read: missing,
	// not a regular file, or unreadable.
	ErrChecksumFile = errors.New("checksum file unreadable")
)

// agentError carries Triton's wording with a sentinel for errors.Is.
type agentError struct {
	kind error
	msg  string
}

func (e *agentError) Error() string { return e.msg }
func (e *agentError) Unwrap() error { return e.kind }

// RunAgents runs m's repository agents, in the configuration's order, on
// its local folder: after a remote model's selected versions were fetched
// and after a load override's files were written, before the backend reads
// anything. selected are the versions this load serves: the local copy of
// a remote model holds only their files, so checksums of files in the
// other version folders of such a copy are not checked (they are when a
// later load selects them). The first failure is returned, worded as
// Triton's agents word it.
func RunAgents(ctx context.Context, m *Model, selected []int64) error {
	agents := m.Config.GetModelRepositoryAgents().GetAgents()
	if len(agents) == 0 {
		return nil
	}
	for _, a := range agents {
		if a.GetName() != ChecksumAgent {
			// Triton's TritonRepoAgentManager::CreateAgent
			// (triton-inference-server/core src/repo_agent.cc) names the
			// library it looked for; inferd searches only its own agents.
			return &agentError{ErrUnknownAgent, fmt.Sprintf("unable to find 'libtritonrepoagent_%s.so' for repo agent '%s', searched: inferd's built-in agents (%s)",
				a.GetName(), a.GetName(), strings.Join(Agents(), ", "))}
		}
	}
	root, err := os.OpenRoot(m.Dir)
	if err != nil {
		return fmt.Errorf("repository agents of model '%s': %w", m.Name, err)
	}
	defer root.Close()
	skip := unfetched(m, selected)
	for _, a := range agents {
		if err := checksum(ctx, root, a.GetParameters(), skip); err != nil {
			return err
		}
	}
	return nil
}

// unfetched reports the checksum paths of m that lie in a version folder
// which the local copy of a remote model leaves empty (one this load did
// not select); nil for a local folder, where every file is at hand.
func unfetched(m *Model, selected []int64) func(rel string) bool {
	if _, remote := listedTree(m.Dir); !remote {
		return func(string) bool { return false }
	}
	return func(rel string) bool {
		top, _, nested := strings.Cut(rel, "/")
		if !nested || !versionName.MatchString(top) {
			return false
		}
		v, err := strconv.ParseInt(top, 10, 64)
		return err == nil && slices.Contains(m.Versions, v) && !slices.Contains(selected, v)
	}
}

// checksum is the checksum agent: each parameter's key is
// "<algorithm>:<path relative to the model folder>" and its value the
// file's expected digest in lower-case hex; MD5 is the only algorithm
// (any case), as in triton-inference-server/checksum_repository_agent
// src/checksum.cc, whose error texts these are. Unlike that agent the path
// must stay inside the model folder (links included) and name a regular
// file, which is read streaming. Keys are checked in sorted order, so a
// model with several bad files always reports the same one.
func checksum(ctx context.Context, root *os.Root, params map[string]string, skip func(string) bool) error {
	for _, key := range slices.Sorted(maps.Keys(params)) {
		alg, rel, ok := strings.Cut(key, ":")
		if !ok {
			return &agentError{ErrChecksumKey, "failed to parse key: " + key}
		}
		if !strings.EqualFold(alg, "md5") {
			return &agentError{ErrChecksumKey, "Unsupported checksum algorithm: " + alg}
		}
		if skip(rel) {
			continue
		}
		got, err := md5File(ctx, root, rel)
		if err != nil {
			return err
		}
		if want := params[key]; got != want {
			return &agentError{ErrChecksumMismatch, fmt.Sprintf("Mismatched MD5 hash for file %s, expect: %s, got: %s", rel, want, got)}
		}
	}
	return nil
}

// md5File digests the regular file rel (slash-separated) below root.
func md5File(ctx context.Context, root *os.Root, rel string) (string, error) {
	fail := func(kind error, reason string) (string, error) {
		return "", &agentError{kind, fmt.Sprintf("failed to open text file for read %s: %s", rel, reason)}
	}
	name := filepath.FromSlash(rel)
	if !filepath.IsLocal(name) {
		return fail(ErrChecksumKey, "the path leaves the model directory")
	}
	// Stat first: opening a FIFO or a device could block or have effects.
	// os.Root refuses links that lead out of the folder.
	st, err := root.Stat(name)
	if err != nil {
		return fail(ErrChecksumFile, reason(err))
	}
	if !st.Mode().IsRegular() {
		return fail(ErrChecksumFile, "not a regular file")
	}
	f, err := root.Open(name)
	if err != nil {
		return fail(ErrChecksumFile, reason(err))
	}
	defer f.Close()
	// The file opened must still be the one checked above.
	if opened, err := f.Stat(); err != nil || !os.SameFile(st, opened) {
		return fail(ErrChecksumFile, "the file changed while it was opened")
	}
	h := md5.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return fail(ErrChecksumFile, reason(err))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// reason is an error's cause without the operation and path that wrap it,
// as strerror reads in Triton's messages.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// ctxReader stops a long read (a model file of gigabytes) when the load is
// cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
