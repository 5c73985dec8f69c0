package core

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

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/modelconfig"
)

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
// echo backend, in explicit mode.
func confineServer(t *testing.T, cfg string, opts Options) (*Server, string) {
	t.Helper()
	root, modelDir := confineRepo(t, cfg)
	repos, err := repo.OpenAll(context.Background(), []string{root})
	must(t, err)
	echo := &echoBackend{started: make(chan int, 64), gate: make(chan struct{}), open: true}
	opts.Repos, opts.Backends, opts.ControlMode, opts.StartupModels = repos, []Backend{echo}, ModeExplicit, []string{"m"}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := newTestServer(opts)
	must(t, s.Start(context.Background()))
	t.Cleanup(func() {
		close(echo.gate)
		s.Shutdown(context.Background())
	})
	return s, modelDir
}

// loadWithin loads m (with ov, or from the repository when nil) and fails
// the test if the load has not returned after a minute: a FIFO or a
// device must never hold a load.
func loadWithin(t *testing.T, s *Server, ov *LoadOverride) error {
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
func refusedBoth(t *testing.T, good, cfg, want string, after func(*testing.T, *Server)) {
	for _, src := range []string{"repository", "override"} {
		t.Run(src, func(t *testing.T) {
			s, modelDir := confineServer(t, good, Options{})
			var ov *LoadOverride
			if src == "override" {
				ov = &LoadOverride{ConfigJSON: overrideJSON(t, cfg)}
			} else {
				must(t, os.WriteFile(filepath.Join(modelDir, "config.pbtxt"), []byte(cfg), 0o644))
			}
			err := loadWithin(t, s, ov)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("load = %v, want an error naming %q", err, want)
			}
			if CodeOf(err) != CodeInvalidArg {
				t.Errorf("code %v, want INVALID_ARG", CodeOf(err))
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

// goodConfig is the echo model that serves before each refused load.
const goodConfig = `backend: "echo"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] } ]
` + oneInstance

// stillServes: the serving copy of goodConfig answers, y = x.
func stillServes(t *testing.T, s *Server) {
	t.Helper()
	resp, err := s.Infer(context.Background(), batchReq(5, 1, 2))
	if err != nil {
		t.Fatalf("the serving copy after the refused load: %v", err)
	}
	if got := resp.Outputs[0].Data; len(got) != 8 || binary.LittleEndian.Uint32(got) != 5 {
		t.Fatalf("y = %v, want 5 and 6", got)
	}
}

// A warmup input_data_file resolves inside the model folder, after links,
// and names a regular file: before, a link in warmup/ served the secret
// as warmup data (or /dev/zero's endless zeros), and a FIFO held the load.
func TestConfinedWarmupFile(t *testing.T) {
	good := goodConfig
	warm := func(file string) string {
		return `backend: "echo"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 2 ] } ]
` + oneInstance + `model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 2 ] input_data_file: "` + file + `" } } } ]
`
	}
	const field = "warmup input 'x' input_data_file"
	for _, tc := range []struct{ file, want string }{
		{"out", field + " 'out' names a path outside the model directory"},
		{"../../secret.bin", field + " '../../secret.bin' names a path outside the model directory"},
		{"zero", field + " 'zero' names a path outside the model directory"},
		{"/dev/zero", field + " '/dev/zero' names a path outside the model directory"},
		{"fifo", field + " 'fifo' is not a regular file"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			refusedBoth(t, good, warm(tc.file), tc.want, stillServes)
		})
	}
}

// Warmup data sized by the config is bounded before it is made, batch
// included.
func TestConfinedWarmupSize(t *testing.T) {
	good := goodConfig
	warm := `backend: "echo"
max_batch_size: 1000
input [ { name: "x" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ -1 ] } ]
` + oneInstance + `model_warmup [ { name: "w" batch_size: 1000 inputs { key: "x" value: { data_type: TYPE_INT32 dims: [ 1000000 ] zero_data: true } } } ]
`
	refusedBoth(t, good, warm, "failed to run warmup sample 'w': batch_size 1000 of its 4000000 bytes would take more than 1073741824 bytes, this server's limit", stillServes)
}

// A load override names host paths (custom-op libraries, Python
// environments, the accelerators' and ONNX Runtime's files) only as the
// repository's own config does, or, while --allow-model-file-override is
// on, as absolute paths that resolve inside the model folder; the
// repository's own config names any (its model loads at start here with
// a library and an environment outside its folder, as in Triton).
func TestOverrideHostPaths(t *testing.T) {
	const own = `backend: "echo"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
` + oneInstance
	const repoLib, repoEnv = "/opt/inferd-test/libop.so", "/opt/inferd-test/env.tar.gz"
	good := own + `model_operations { op_library_filename: "` + repoLib + `" }
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "` + repoEnv + `" } }
parameters { key: "session.node_partition_config_file" value: { string_value: "/opt/inferd-test/partition.json" } }
optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" parameters { key: "trt_engine_cache_path" value: "/opt/inferd-test/cache" } } ] } }
`
	lib := func(p string) string { return own + `model_operations { op_library_filename: "` + p + `" }` }
	env := func(p string) string {
		return own + `parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "` + p + `" } }`
	}
	const (
		libField = "model_operations op_library_filename"
		envField = "parameters EXECUTION_ENV_PATH"
		inside   = "is neither what the repository's own config names nor an absolute path inside the model directory"
		locked   = "is not what the repository's own config names, and with --allow-model-file-override=false a load override may name no other"
		notOwn   = "is not what the repository's own config names, and a load override may name no other"
	)
	for _, tc := range []struct {
		name string
		// cfg builds the override from the model folder; wantOpen and
		// wantLocked are the load's error with the option on and off
		// ("" loads), with {dir} the model folder and {root} the one
		// above it.
		cfg                  func(dir string) string
		wantOpen, wantLocked string
	}{
		{"the repository's library", func(string) string { return lib(repoLib) }, "", ""},
		{"a library in the model folder", func(d string) string { return lib(d + "/lib/libcustom.so") },
			"", libField + " '{dir}/lib/libcustom.so' " + locked},
		{"a library outside", func(d string) string { return lib(filepath.Dir(d) + "/secret.bin") },
			libField + " '{root}/secret.bin' " + inside, libField + " '{root}/secret.bin' " + locked},
		{"a library by relative name", func(string) string { return lib("libc.so.6") },
			libField + " 'libc.so.6' " + inside, libField + " 'libc.so.6' " + locked},
		{"a library climbing out", func(d string) string { return lib(d + "/../secret.bin") },
			libField + " '{dir}/../secret.bin' " + inside, libField + " '{dir}/../secret.bin' " + locked},
		{"a library through a link out", func(d string) string { return lib(d + "/lib/out.so") },
			libField + " '{dir}/lib/out.so' " + inside, libField + " '{dir}/lib/out.so' " + locked},
		{"the repository's environment", func(string) string { return env(repoEnv) }, "", ""},
		{"an environment in the model folder", func(string) string { return env("$$TRITON_MODEL_DIRECTORY/env.tar.gz") },
			"", envField + " '$$TRITON_MODEL_DIRECTORY/env.tar.gz' " + locked},
		{"an environment outside", func(string) string { return env("$$TRITON_MODEL_DIRECTORY/../secret.bin") },
			envField + " '$$TRITON_MODEL_DIRECTORY/../secret.bin' " + inside, envField + " '$$TRITON_MODEL_DIRECTORY/../secret.bin' " + locked},
		{"an environment folder outside", func(string) string { return env("/usr") },
			envField + " '/usr' " + inside, envField + " '/usr' " + locked},
		{"an accelerator's file", func(d string) string {
			return own + `optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" parameters { key: "trt_engine_cache_path" value: "` + filepath.Dir(d) + `/cache" } } ] } }`
		}, "execution accelerator 'tensorrt' parameter trt_engine_cache_path '{root}/cache' " + notOwn, "execution accelerator 'tensorrt' parameter trt_engine_cache_path '{root}/cache' " + notOwn},
		{"the repository's accelerator file", func(string) string {
			return own + `optimization { execution_accelerators { gpu_execution_accelerator: [ { name: "tensorrt" parameters { key: "trt_engine_cache_path" value: "/opt/inferd-test/cache" } } ] } }`
		}, "", ""},
		{"a session file", func(d string) string {
			// Outside the model folder but inside the test's: were the
			// override let through, ONNX Runtime would write there.
			return own + `parameters { key: "session.collect_node_memory_stats_to_file" value: { string_value: "` + filepath.Dir(d) + `/stats" } }`
		}, "parameters session.collect_node_memory_stats_to_file '{root}/stats' " + notOwn, "parameters session.collect_node_memory_stats_to_file '{root}/stats' " + notOwn},
		{"a session setting", func(string) string {
			return own + `parameters { key: "session.intra_op.allow_spinning" value: { string_value: "1" } }`
		}, "", ""},
	} {
		for _, refuse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/locked=%v", tc.name, refuse), func(t *testing.T) {
				s, dir := confineServer(t, good, Options{NoFileOverrides: refuse})
				must(t, os.MkdirAll(filepath.Join(dir, "lib"), 0o755))
				must(t, os.WriteFile(filepath.Join(dir, "lib", "libcustom.so"), []byte("not really"), 0o644))
				must(t, os.WriteFile(filepath.Join(dir, "env.tar.gz"), []byte("not really"), 0o644))
				must(t, os.Symlink("../../secret.bin", filepath.Join(dir, "lib", "out.so")))
				want := tc.wantOpen
				if refuse {
					want = tc.wantLocked
				}
				err := loadWithin(t, s, &LoadOverride{ConfigJSON: overrideJSON(t, tc.cfg(dir))})
				if want == "" {
					must(t, err)
				} else if want = strings.NewReplacer("{dir}", dir, "{root}", filepath.Dir(dir)).Replace(want); err == nil || !strings.Contains(err.Error(), want) || CodeOf(err) != CodeInvalidArg {
					t.Fatalf("load = %v, want INVALID_ARG naming %q", err, want)
				}
				if _, err := s.Infer(context.Background(), batchReq(3, 1, 1)); err != nil {
					t.Fatalf("the model after the load: %v", err)
				}
			})
		}
	}
}

// With --allow-model-file-override=false a load override does not change
// which Python file a model runs; with it on, the file is confined to the
// version folder when the backend resolves it (core/python).
func TestOverridePythonFileLocked(t *testing.T) {
	const py = `backend: "python"
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
default_model_filename: "helper.py"
`
	for _, refuse := range []bool{false, true} {
		s, _ := confineServer(t, goodConfig, Options{NoFileOverrides: refuse})
		err := loadWithin(t, s, &LoadOverride{ConfigJSON: overrideJSON(t, py)})
		const want = "default_model_filename of a python model 'helper.py' is not what the repository's own config names, and with --allow-model-file-override=false a load override may name no other"
		if refuse != strings.Contains(fmt.Sprint(err), want) || err == nil {
			// This server has no python backend: allowed, the load fails
			// finding none.
			t.Fatalf("locked=%v: load = %v", refuse, err)
		}
		stillServes(t, s)
	}
}

// A model file the repository's config names may be a link out of the
// version folder, as Triton allows (repositories share model files so); a
// default_model_filename a load override names instead must resolve
// inside the version folder also after links.
func TestOverrideModelFile(t *testing.T) {
	cfg := func(file string) string {
		return `backend: "echo"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]
default_model_filename: "` + file + `"
` + oneInstance
	}
	const field = "model 'm' default_model_filename"
	for _, tc := range []struct{ file, want string }{
		{"link.onnx", field + " 'link.onnx' names a path outside the model directory"},
		{"dir.onnx", field + " 'dir.onnx' names a path outside the model directory"},
		{"../../secret.bin", field + " '../../secret.bin' names a path outside the model directory"},
		{"inner.onnx", ""},
		{"own.onnx", ""},
	} {
		for _, refuse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/locked=%v", tc.file, refuse), func(t *testing.T) {
				// The repository's own config names own.onnx, a link out.
				s, dir := confineServer(t, cfg("own.onnx"), Options{NoFileOverrides: refuse})
				v := filepath.Join(dir, "1")
				must(t, os.MkdirAll(filepath.Join(v, "dir.onnx"), 0o755))
				must(t, os.WriteFile(filepath.Join(v, "inner.onnx"), []byte("x"), 0o644))
				for link, target := range map[string]string{"link.onnx": "../../secret.bin", "own.onnx": "../../secret.bin", "dir.onnx/model.onnx": "../../../secret.bin"} {
					must(t, os.Symlink(target, filepath.Join(v, link)))
				}
				err := loadWithin(t, s, &LoadOverride{ConfigJSON: overrideJSON(t, cfg(tc.file))})
				if tc.want == "" {
					must(t, err)
				} else if err == nil || !strings.Contains(err.Error(), tc.want) || CodeOf(err) != CodeInvalidArg {
					t.Fatalf("load = %v, want INVALID_ARG naming %q", err, tc.want)
				}
				// The repository's own config, link and all, loads.
				must(t, loadWithin(t, s, nil))
			})
		}
	}
}
