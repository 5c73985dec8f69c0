package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/repo/tempdir"
)

// child is the real binary (this test binary acting as main) running as a
// process of its own, with TMPDIR set.
type child struct {
	cmd  *exec.Cmd
	base string // http://host:port
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{} // the log is read to its end
}

// startChild runs inferd with args and TMPDIR=tmp until it serves.
func startChild(t *testing.T, tmp string, args ...string) *child {
	t.Helper()
	argv, _ := json.Marshal(append([]string{"--http-port=0", "--grpc-port=0", "--metrics-port=0", "--http-address=127.0.0.1"}, args...))
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$"), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1", "INFERD_TEST_ARGV="+string(argv), "TMPDIR="+tmp)
	stderr, err := c.cmd.StderrPipe()
	must(t, err)
	must(t, c.cmd.Start())
	t.Cleanup(func() { _ = c.cmd.Process.Kill(); <-c.done })
	serving := regexp.MustCompile(`] "serving" http=(\S+)`)
	sc := bufio.NewScanner(stderr)
	for c.base == "" && sc.Scan() {
		c.log.WriteString(sc.Text() + "\n")
		if m := serving.FindStringSubmatch(sc.Text()); m != nil {
			c.base = "http://" + m[1]
		}
	}
	go func() {
		defer close(c.done)
		for sc.Scan() {
			c.mu.Lock()
			c.log.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
		}
		_ = c.cmd.Wait()
	}()
	if c.base == "" {
		<-c.done
		t.Fatalf("inferd did not serve:\n%s", c.log.String())
	}
	return c
}

// stop ends the child with sig and waits for it.
func (c *child) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	must(t, c.cmd.Process.Signal(sig))
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("inferd did not exit after %v", sig)
	}
}

func (c *child) logged() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// uploadModel loads model name from a load request's config and file
// parameters.
func uploadModel(t *testing.T, base, name string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"parameters": map[string]string{
		"config":            `{"platform":"onnxruntime_onnx"}`,
		"file:1/model.onnx": base64.StdEncoding.EncodeToString(onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))),
	}})
	if s, got := post(t, base+"/v2/repository/models/"+name+"/load", string(body)); s != 200 {
		t.Fatalf("upload %s: %d %s", name, s, got)
	}
}

// inferdEntries lists the names in dir that start with "inferd-".
func inferdEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "inferd-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// ownFolder is the one process folder of pid in tmp, and what it holds.
func ownFolder(t *testing.T, tmp string, pid int) (string, []string) {
	t.Helper()
	var own string
	for _, name := range inferdEntries(t, tmp) {
		if strings.HasPrefix(name, "inferd-"+strconv.Itoa(pid)+"-") {
			if own != "" {
				t.Fatalf("two folders of pid %d: %s, %s", pid, own, name)
			}
			own = filepath.Join(tmp, name)
		}
	}
	if own == "" {
		t.Fatalf("no folder of pid %d in %s: %v", pid, tmp, inferdEntries(t, tmp))
	}
	entries, err := os.ReadDir(own)
	must(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return own, names
}

// hasPrefixed reports whether some name starts with prefix.
func hasPrefixed(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// TestTempFoldersCleanExit: a server's temporary files (the Python
// backend's module, the copies of an s3:// root's models, the files a
// load request uploads) live in one folder of its own under TMPDIR,
// which a clean exit removes: no inferd-* entry is left.
func TestTempFoldersCleanExit(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "tmp")
	must(t, os.Mkdir(tmp, 0o755))
	local := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(local, "double", "1"), 0o755))
	must(t, os.WriteFile(filepath.Join(local, "double", "config.pbtxt"), []byte(doubleConfig), 0o644))
	must(t, os.WriteFile(filepath.Join(local, "double", "1", "model.py"), []byte(doubleModel), 0o644))
	backend, host := fakeS3(t)
	putObject(t, backend, "m/simple/config.pbtxt", []byte(taggedSimple))
	putObject(t, backend, "m/simple/1/model.onnx", onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))

	c := startChild(t, tmp, "--model-repository="+local, "--model-repository=s3://"+host+"/models/m", "--model-control-mode=explicit",
		"--load-model=double", "--load-model=simple", "--allow-grpc=false", "--allow-metrics=false",
		"--backend-config=python,python-executable="+servertest.Python(t))
	if s, body := post(t, c.base+"/v2/models/double/infer", doubleRequest); s != 200 {
		t.Fatalf("double: %d %s", s, body)
	}
	if s, body := post(t, c.base+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Fatalf("simple: %d %s", s, body)
	}
	uploadModel(t, c.base, "uploaded")
	own, held := ownFolder(t, tmp, c.cmd.Process.Pid)
	for _, prefix := range []string{"python-", "cache-", "model-uploaded-"} {
		if !hasPrefixed(held, prefix) {
			t.Errorf("no %s* folder in %s: %v", prefix, own, held)
		}
	}
	if left := inferdEntries(t, tmp); len(left) != 1 {
		t.Errorf("inferd-* entries beside the process's folder: %v", left)
	}
	c.stop(t, syscall.SIGTERM)
	if code := c.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d:\n%s", code, c.logged())
	}
	if left := inferdEntries(t, tmp); len(left) != 0 {
		t.Errorf("left in TMPDIR after a clean exit: %v\n%s", left, c.logged())
	}
}

// TestTempFoldersSweptAfterKill: the files uploaded to a server that is
// then killed (SIGKILL) stay behind it, and the next server's start
// removes them, with the folder of another process that is gone; the
// folder of a live process (this test's) is kept.
func TestTempFoldersSweptAfterKill(t *testing.T) {
	tmp := filepath.Join(t.TempDir(), "tmp")
	must(t, os.Mkdir(tmp, 0o755))
	root := t.TempDir()
	args := []string{"--model-repository=" + root, "--model-control-mode=explicit", "--allow-grpc=false", "--allow-metrics=false"}

	killed := startChild(t, tmp, args...)
	uploadModel(t, killed.base, "uploaded")
	leftover, held := ownFolder(t, tmp, killed.cmd.Process.Pid)
	if !hasPrefixed(held, "model-uploaded-") {
		t.Fatalf("no upload folder in %s: %v", leftover, held)
	}
	killed.stop(t, syscall.SIGKILL)
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("the killed server's folder: %v", err)
	}

	// A process that is gone, and a live one: this test's.
	exited := exec.Command("sh", "-c", "exit 0")
	must(t, exited.Run())
	dead := filepath.Join(tmp, "inferd-"+strconv.Itoa(exited.Process.Pid)+"-1")
	must(t, os.MkdirAll(filepath.Join(dead, "model-x-1"), 0o700))
	t.Setenv("TMPDIR", tmp)
	live, err := tempdir.Make("model-live-")
	must(t, err)

	next := startChild(t, tmp, args...)
	for _, gone := range []string{leftover, dead} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s after the next start: %v", gone, err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's folder: %v", err)
	}
	if !strings.Contains(next.logged(), "removed the temporary folders of inferd processes that are gone") {
		t.Errorf("the sweep is not logged:\n%s", next.logged())
	}
	next.stop(t, syscall.SIGTERM)
	if left := inferdEntries(t, tmp); !slices.Equal(left, []string{filepath.Base(filepath.Dir(live))}) {
		t.Errorf("left in TMPDIR: %v, want only the live process's folder", left)
	}
}

// TestMountDirectoryRemovedAtExit: TRITON_AZURE_MOUNT_DIRECTORY, where
// the server copies an as:// root's models, keeps nothing the server made
// after a clean exit: a folder the server created goes, and one that
// existed keeps only what it held.
func TestMountDirectoryRemovedAtExit(t *testing.T) {
	_, root := azureRepo(t)
	for _, existed := range []bool{false, true} {
		t.Run("existed="+strconv.FormatBool(existed), func(t *testing.T) {
			mount := filepath.Join(t.TempDir(), "mount")
			if existed {
				must(t, os.MkdirAll(filepath.Join(mount, "mine"), 0o755))
			}
			t.Setenv("TRITON_AZURE_MOUNT_DIRECTORY", mount)
			r := start(t, "--model-repository="+root, "--model-control-mode=explicit", "--load-model=noconfig", "--allow-metrics=false", "--allow-grpc=false")
			if r.http == "" {
				t.Fatalf("server did not start: %v", <-r.done)
			}
			if files := localFiles(t, mount); !hasFile(files, "noconfig/1/model.onnx") {
				t.Fatalf("no copy under the mount directory: %v", files)
			}
			if err := r.stop(t); err != nil {
				t.Fatalf("exit: %v", err)
			}
			entries, err := os.ReadDir(mount)
			switch {
			case !existed && !os.IsNotExist(err):
				t.Errorf("the mount directory the server made is still there: %v %v", entries, err)
			case existed && (err != nil || len(entries) != 1 || entries[0].Name() != "mine"):
				t.Errorf("the mount directory holds %v (%v), want only what it held", entries, err)
			}
		})
	}
}
