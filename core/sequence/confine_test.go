package sequence_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/core/dynamic"
	"github.com/inferd/inferd/core/sequence"
	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The confinement of initial_state files (core's confine tests cover the
// other config paths): the fixtures are those of core/confine_test.go.

// confineSecret is a file beside the model folder. No reply may show it:
// not its bytes, not the int32 its first four bytes make, not its size.
const confineSecret = "SECRETSECRETSECRETSECRET!"

// secretInt is the first four bytes of confineSecret as a little-endian
// int32, what a state read from it would add to y.
var secretInt = strconv.Itoa(int(int32(binary.LittleEndian.Uint32([]byte(confineSecret)))))

// confineRepo writes a repository with model "m" (config cfg, version 1)
// and, outside the model folder, secret.bin. Inside the model folder:
// initial_state/in.bin (the int32 100), links out of the folder
// (initial_state/out and warmup/out to the secret, initial_state/zero and
// warmup/zero to /dev/zero), a link that stays inside
// (initial_state/inner to in.bin), FIFOs (initial_state/fifo, warmup/fifo)
// and a folder (initial_state/sub).
func confineRepo(t *testing.T, cfg string) (root, modelDir string) {
	t.Helper()
	root = t.TempDir()
	modelDir = filepath.Join(root, "m")
	for _, d := range []string{"1", "initial_state/sub", "warmup"} {
		must(t, os.MkdirAll(filepath.Join(modelDir, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "secret.bin"), []byte(confineSecret), 0o600))
	must(t, os.WriteFile(filepath.Join(modelDir, "config.pbtxt"), []byte(cfg), 0o644))
	must(t, os.WriteFile(filepath.Join(modelDir, "initial_state", "in.bin"), binary.LittleEndian.AppendUint32(nil, 100), 0o644))
	for link, target := range map[string]string{
		"initial_state/out": "../../secret.bin", "warmup/out": "../../secret.bin",
		"initial_state/zero": "/dev/zero", "warmup/zero": "/dev/zero",
		"initial_state/inner": "in.bin",
	} {
		must(t, os.Symlink(target, filepath.Join(modelDir, link)))
	}
	for _, fifo := range []string{"initial_state/fifo", "warmup/fifo"} {
		must(t, syscall.Mkfifo(filepath.Join(modelDir, fifo), 0o600))
	}
	return root, modelDir
}

// confineServer serves confineRepo's model "m", loaded at start, on the
// acc backend, in explicit mode, with the sequence batcher.
func confineServer(t *testing.T, cfg string, opts core.Options) (*core.Server, string) {
	t.Helper()
	root, modelDir := confineRepo(t, cfg)
	repos, err := repo.OpenAll(context.Background(), []string{root})
	must(t, err)
	acc := &accBackend{started: make(chan int, 64), gate: make(chan struct{})}
	opts.Repos, opts.Backends, opts.ControlMode, opts.StartupModels = repos, []core.Backend{acc}, core.ModeExplicit, []string{"m"}
	opts.Batching, opts.Sequences = dynamic.Batchers{}, sequence.Batchers{}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := core.NewServer(opts)
	must(t, s.Start(context.Background()))
	t.Cleanup(func() {
		close(acc.gate)
		s.Shutdown(context.Background())
	})
	return s, modelDir
}

// loadWithin loads m (with ov, or from the repository when nil) and fails
// the test if the load has not returned after a minute: a FIFO or a
// device must never hold a load.
func loadWithin(t *testing.T, s *core.Server, ov *core.LoadOverride) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Load(context.Background(), "m", ov) }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the load hangs")
		return nil
	}
}

// overrideJSON is the load API's JSON form of a config.pbtxt text.
func overrideJSON(t *testing.T, pbtxt string) string {
	t.Helper()
	cfg, err := modelconfig.Parse([]byte(pbtxt))
	must(t, err)
	js, err := modelconfig.MarshalJSON(cfg)
	must(t, err)
	return string(js)
}

// refusedBoth loads cfg once from the repository's config.pbtxt and once
// as a load override (both over a serving copy of good); each must fail
// naming want, show nothing of the secret, and leave the serving copy
// answering.
func refusedBoth(t *testing.T, good, cfg, want string, after func(*testing.T, *core.Server)) {
	for _, src := range []string{"repository", "override"} {
		t.Run(src, func(t *testing.T) {
			s, modelDir := confineServer(t, good, core.Options{})
			var ov *core.LoadOverride
			if src == "override" {
				ov = &core.LoadOverride{ConfigJSON: overrideJSON(t, cfg)}
			} else {
				must(t, os.WriteFile(filepath.Join(modelDir, "config.pbtxt"), []byte(cfg), 0o644))
			}
			err := loadWithin(t, s, ov)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("load = %v, want an error naming %q", err, want)
			}
			if core.CodeOf(err) != core.CodeInvalidArg {
				t.Errorf("code %v, want INVALID_ARG", core.CodeOf(err))
			}
			noSecret(t, err.Error())
			after(t, s)
		})
	}
}

func noSecret(t *testing.T, text string) {
	t.Helper()
	for _, s := range []string{"SECRET", secretInt, strconv.Itoa(len(confineSecret)) + " bytes"} {
		if strings.Contains(text, s) {
			t.Fatalf("%q shows the secret (%q)", text, s)
		}
	}
}

// stateConfig is acc's model config with one state whose initial_state has
// dims and the given data setting.
func stateConfig(dims, data string) string {
	return `backend: "acc"
max_batch_size: 2
` + oneInstance + accIO + fmt.Sprintf(`sequence_batching { state [ { input_name: "acc_in" output_name: "acc_out" data_type: TYPE_INT32 dims: [ %[1]s ]
  initial_state { name: "i" data_type: TYPE_INT32 dims: [ %[1]s ] %[2]s } } ] }
`, dims, data)
}

// stillServes: the serving copy answers a fresh sequence from its zero
// state, y = x.
func stillServes(t *testing.T, s *core.Server) {
	t.Helper()
	resp, err := s.Infer(context.Background(), seqReq(core.Correlation{ID: 9, Flags: core.FlagSequenceStart | core.FlagSequenceEnd}, 5, true))
	if err != nil {
		t.Fatalf("the serving copy after the refused load: %v", err)
	}
	if y := yOf(t, resp); y != 5 {
		t.Fatalf("y = %d, want 5 from the zero state", y)
	}
}

// An initial_state data_file resolves inside the model folder, after
// links, names a regular file, and is read no further than the state's
// size; states the config sizes are bounded before they are allocated.
// Each case fails the load, from the repository's config and from a load
// override alike; before, the "out" cases served the secret's bytes as
// the state, /dev/zero read for ever, the FIFO held the load, and the huge
// dims died allocating.
func TestConfinedStateDataFile(t *testing.T) {
	good := stateConfig("1", "zero_data: true")
	const field = "state input 'acc_in' initial_state data_file"
	for _, tc := range []struct {
		name, dims, data, want string
	}{
		{"dot-dot", "1", `data_file: "../../secret.bin"`, field + " '../../secret.bin' names a path outside the model directory"},
		{"etc passwd", "1", `data_file: "../../../../../../../../../etc/passwd"`, field + " '../../../../../../../../../etc/passwd' names a path outside the model directory"},
		{"absolute", "1", `data_file: "/etc/passwd"`, field + " '/etc/passwd' names a path outside the model directory"},
		{"link out", "1", `data_file: "out"`, field + " 'out' names a path outside the model directory"},
		{"dev zero", "1", `data_file: "/dev/zero"`, field + " '/dev/zero' names a path outside the model directory"},
		{"link to dev zero", "1", `data_file: "zero"`, field + " 'zero' names a path outside the model directory"},
		{"fifo", "1", `data_file: "fifo"`, field + " 'fifo' is not a regular file"},
		{"folder", "1", `data_file: "sub"`, field + " 'sub' is not a regular file"},
		{"missing", "1", `data_file: "nope"`, field + " 'nope': "},
		{"huge zero data", "17179869184", `zero_data: true`, "'initial_state' of state input 'acc_in' with dims [17179869184] would take more than 1073741824 bytes, this server's limit"},
		{"huge data file", "17179869184", `data_file: "in.bin"`, "'initial_state' of state input 'acc_in' with dims [17179869184] would take more than 1073741824 bytes, this server's limit"},
		{"overflowing dims", "4294967296, 4294967296", `zero_data: true`, "with dims [4294967296,4294967296] would take more than 1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedBoth(t, good, stateConfig(tc.dims, tc.data), tc.want, stillServes)
		})
	}
}

// A state without initial_state is zeros at each sequence's start: dims
// past the bound fail the load instead of the first request.
func TestConfinedZeroState(t *testing.T) {
	good := stateConfig("1", "zero_data: true")
	huge := `backend: "acc"
max_batch_size: 2
` + oneInstance + accIO + `sequence_batching { state [ { input_name: "acc_in" output_name: "acc_out" data_type: TYPE_INT32 dims: [ 17179869184 ] } ] }
`
	refusedBoth(t, good, huge, "state input 'acc_in' with dims [17179869184] would take more than 1073741824 bytes, this server's limit", stillServes)
}

// Files inside the model folder still load, through a link that stays
// inside too, and a data file larger than the state is read only as far
// as the state.
func TestConfinedStateInside(t *testing.T) {
	for _, file := range []string{"in.bin", "inner", "../initial_state/in.bin"} {
		t.Run(file, func(t *testing.T) {
			s, _ := confineServer(t, stateConfig("1", "zero_data: true"), core.Options{})
			must(t, loadWithin(t, s, &core.LoadOverride{ConfigJSON: overrideJSON(t, stateConfig("1", `data_file: "`+file+`"`))}))
			resp, err := s.Infer(context.Background(), seqReq(core.Correlation{ID: 1, Flags: core.FlagSequenceStart}, 1, true))
			must(t, err)
			if y := yOf(t, resp); y != 101 {
				t.Fatalf("y = %d, want 101", y)
			}
		})
	}
}
