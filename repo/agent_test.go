package repo

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inferd/inferd/repo/modelconfig"
)

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// agentModel is a model folder holding 1/model.onnx ("weights") and
// 2/model.onnx ("other"), whose config names the given agents.
func agentModel(t *testing.T, agents ...*modelconfig.ModelRepositoryAgents_Agent) *Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	write(t, dir, map[string]string{"1/model.onnx": "weights", "2/model.onnx": "other", "sub/readme": ""})
	return &Model{Name: "m", Dir: dir, Versions: []int64{1, 2},
		Config: &modelconfig.ModelConfig{ModelRepositoryAgents: &modelconfig.ModelRepositoryAgents{Agents: agents}}}
}

func checksumAgent(params map[string]string) *modelconfig.ModelRepositoryAgents_Agent {
	return &modelconfig.ModelRepositoryAgents_Agent{Name: ChecksumAgent, Parameters: params}
}

// TestChecksumAgent: the checksum agent accepts matching digests, and
// refuses with Triton's texts a mismatch (naming the file), a key without
// an algorithm or with another one, and a file it cannot read; unlike
// Triton's it refuses paths that leave the model folder, links that lead
// out of it and files that are not regular files.
func TestChecksumAgent(t *testing.T) {
	good := md5Hex("weights")
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		params map[string]string
		setup  func(t *testing.T, dir string)
		kind   error  // nil: loads
		want   string // the whole message, or its start when it ends in "…"
	}{
		{name: "match", params: map[string]string{"MD5:1/model.onnx": good}},
		{name: "algorithm in any case", params: map[string]string{"md5:1/model.onnx": good, "Md5:2/model.onnx": md5Hex("other")}},
		{name: "no checksums", params: nil},
		{name: "mismatch", params: map[string]string{"MD5:1/model.onnx": md5Hex("tampered")}, kind: ErrChecksumMismatch,
			want: "Mismatched MD5 hash for file 1/model.onnx, expect: " + md5Hex("tampered") + ", got: " + good},
		{name: "upper-case digest", params: map[string]string{"MD5:1/model.onnx": strings.ToUpper(good)}, kind: ErrChecksumMismatch,
			want: "Mismatched MD5 hash for file 1/model.onnx, expect: " + strings.ToUpper(good) + ", got: " + good},
		{name: "file rewritten", params: map[string]string{"MD5:1/model.onnx": good},
			setup: func(t *testing.T, dir string) { write(t, dir, map[string]string{"1/model.onnx": "evil"}) },
			kind:  ErrChecksumMismatch, want: "Mismatched MD5 hash for file 1/model.onnx, expect: " + good + ", got: " + md5Hex("evil")},
		{name: "no algorithm", params: map[string]string{"1/model.onnx": good}, kind: ErrChecksumKey, want: "failed to parse key: 1/model.onnx"},
		{name: "other algorithm", params: map[string]string{"SHA256:1/model.onnx": good}, kind: ErrChecksumKey, want: "Unsupported checksum algorithm: SHA256"},
		{name: "missing file", params: map[string]string{"MD5:3/model.onnx": good}, kind: ErrChecksumFile,
			want: "failed to open text file for read 3/model.onnx: no such file or directory"},
		{name: "parent folder", params: map[string]string{"MD5:../secret": md5Hex("secret")}, kind: ErrChecksumKey,
			want: "failed to open text file for read ../secret: the path leaves the model directory"},
		{name: "climbs out midway", params: map[string]string{"MD5:1/../../secret": md5Hex("secret")}, kind: ErrChecksumKey,
			want: "failed to open text file for read 1/../../secret: the path leaves the model directory"},
		{name: "absolute path", params: map[string]string{"MD5:" + outside: md5Hex("secret")}, kind: ErrChecksumKey,
			want: "failed to open text file for read " + outside + ": the path leaves the model directory"},
		{name: "empty path", params: map[string]string{"MD5:": good}, kind: ErrChecksumKey,
			want: "failed to open text file for read : the path leaves the model directory"},
		{name: "link out of the folder", params: map[string]string{"MD5:1/link": md5Hex("secret")},
			setup: func(t *testing.T, dir string) { must(t, os.Symlink(outside, filepath.Join(dir, "1", "link"))) },
			kind:  ErrChecksumFile, want: "failed to open text file for read 1/link: path escapes from parent"},
		{name: "link inside the folder", params: map[string]string{"MD5:1/link": md5Hex("other")},
			setup: func(t *testing.T, dir string) {
				must(t, os.Symlink("../2/model.onnx", filepath.Join(dir, "1", "link")))
			}},
		{name: "folder", params: map[string]string{"MD5:sub": good}, kind: ErrChecksumFile,
			want: "failed to open text file for read sub: not a regular file"},
		{name: "fifo", params: map[string]string{"MD5:1/fifo": good},
			setup: func(t *testing.T, dir string) { must(t, syscall.Mkfifo(filepath.Join(dir, "1", "fifo"), 0o644)) },
			kind:  ErrChecksumFile, want: "failed to open text file for read 1/fifo: not a regular file"},
		{name: "first bad key in sorted order", params: map[string]string{"MD5:2/model.onnx": "b", "MD5:1/model.onnx": "a"}, kind: ErrChecksumMismatch,
			want: "Mismatched MD5 hash for file 1/model.onnx, expect: a, got: " + good},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := agentModel(t, checksumAgent(tt.params))
			if tt.setup != nil {
				tt.setup(t, m.Dir)
			}
			err := RunAgents(context.Background(), m, []int64{1, 2})
			checkAgentErr(t, err, tt.kind, tt.want)
		})
	}
}

// checkAgentErr checks err against the sentinel kind (nil: no error) and
// the message want (a prefix when it ends in "…").
func checkAgentErr(t *testing.T, err, kind error, want string) {
	t.Helper()
	switch {
	case kind == nil && err != nil:
		t.Fatalf("err %v, want none", err)
	case kind == nil:
	case !errors.Is(err, kind):
		t.Fatalf("err %v, want %v", err, kind)
	case strings.HasSuffix(want, "…") && !strings.HasPrefix(err.Error(), strings.TrimSuffix(want, "…")):
		t.Fatalf("err %q, want it to start %q", err, strings.TrimSuffix(want, "…"))
	case !strings.HasSuffix(want, "…") && err.Error() != want:
		t.Fatalf("err %q, want %q", err, want)
	}
}

// TestUnknownAgent: a model naming an agent inferd does not have fails
// with Triton's "unable to find" text, also after a checksum agent.
func TestUnknownAgent(t *testing.T) {
	const want = "unable to find 'libtritonrepoagent_decrypt.so' for repo agent 'decrypt', searched: inferd's built-in agents (checksum)"
	for _, agents := range [][]*modelconfig.ModelRepositoryAgents_Agent{
		{{Name: "decrypt"}},
		{checksumAgent(map[string]string{"MD5:1/model.onnx": md5Hex("weights")}), {Name: "decrypt"}},
	} {
		err := RunAgents(context.Background(), agentModel(t, agents...), []int64{1})
		checkAgentErr(t, err, ErrUnknownAgent, want)
	}
	// Names are matched exactly, as Triton's library file names are.
	err := RunAgents(context.Background(), agentModel(t, &modelconfig.ModelRepositoryAgents_Agent{Name: "Checksum"}), []int64{1})
	checkAgentErr(t, err, ErrUnknownAgent, "unable to find 'libtritonrepoagent_Checksum.so' for repo agent 'Checksum', …")
}

// TestChecksumAgentFromConfig: the agent section of a config.pbtxt, as the
// issue wrote it, reaches the agent through ReadModel.
func TestChecksumAgentFromConfig(t *testing.T) {
	root := t.TempDir()
	cfg := onnxConfig + `model_repository_agents { agents [ { name: "checksum" parameters { key: "MD5:1/model.onnx" value: "` + md5Hex("x") + `" } } ] }`
	write(t, root, map[string]string{"m/config.pbtxt": cfg, "m/labels.txt": "a\nb\n", "m/1/model.onnx": "x"})
	m, err := ReadModel(filepath.Join(root, "m"), "m", nil, ReadOptions{})
	must(t, err)
	must(t, RunAgents(context.Background(), m, m.Versions))
	write(t, root, map[string]string{"m/1/model.onnx": "y"})
	checkAgentErr(t, RunAgents(context.Background(), m, m.Versions), ErrChecksumMismatch, "Mismatched MD5 hash for file 1/model.onnx, …")
}

// TestChecksumAgentRemoteCopy: in the local copy of a remote model, whose
// unselected version folders stay empty, only the selected versions' files
// are checked; every other file still is.
func TestChecksumAgentRemoteCopy(t *testing.T) {
	m := agentModel(t, checksumAgent(map[string]string{"MD5:1/model.onnx": "not fetched", "MD5:2/model.onnx": md5Hex("other")}))
	must(t, os.Remove(filepath.Join(m.Dir, "1", "model.onnx")))
	must(t, writeManifest(filepath.Join(m.Dir, manifestName), manifest{Listed: []string{"1/model.onnx", "2/model.onnx", "extra.txt"}}))
	must(t, RunAgents(context.Background(), m, []int64{2}))
	// Selected, the version is checked.
	checkAgentErr(t, RunAgents(context.Background(), m, []int64{1, 2}), ErrChecksumFile, "failed to open text file for read 1/model.onnx: no such file or directory")
	// A file outside the version folders is always checked.
	m.Config.ModelRepositoryAgents.Agents[0].Parameters["MD5:extra.txt"] = "x"
	checkAgentErr(t, RunAgents(context.Background(), m, []int64{2}), ErrChecksumFile, "failed to open text file for read extra.txt: …")
	// A local folder is checked whole, as Triton does.
	must(t, os.Remove(filepath.Join(m.Dir, manifestName)))
	delete(m.Config.ModelRepositoryAgents.Agents[0].Parameters, "MD5:extra.txt")
	checkAgentErr(t, RunAgents(context.Background(), m, []int64{2}), ErrChecksumFile, "failed to open text file for read 1/model.onnx: …")
}

// TestChecksumAgentCancelled: a cancelled load stops reading.
func TestChecksumAgentCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := RunAgents(ctx, agentModel(t, checksumAgent(map[string]string{"MD5:1/model.onnx": md5Hex("weights")})), []int64{1})
	if !errors.Is(err, ErrChecksumFile) || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("err %v, want the read stopped", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
