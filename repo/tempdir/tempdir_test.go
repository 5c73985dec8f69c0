package tempdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// setTMPDIR points os.TempDir at a fresh folder and drops the process
// folder made there when the test ends.
func setTMPDIR(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	t.Setenv("TMPDIR", base)
	t.Cleanup(func() { _ = RemoveOwn() })
	return base
}

// deadPid is the pid of a process that has ended and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit 0")
	must(t, cmd.Run())
	return cmd.Process.Pid
}

// folder makes base/name holding a file, as a server's would.
func folder(t *testing.T, base, name string) string {
	t.Helper()
	p := filepath.Join(base, name)
	must(t, os.MkdirAll(filepath.Join(p, "model-x-1", "1"), 0o700))
	must(t, os.WriteFile(filepath.Join(p, "model-x-1", "1", "model.onnx"), []byte("x"), 0o600))
	return p
}

func TestMakeAndRemoveOwn(t *testing.T) {
	base := setTMPDIR(t)
	dir, err := Make("model-x-")
	must(t, err)
	own := filepath.Dir(dir)
	start, err := startTime(os.Getpid())
	must(t, err)
	if want := filepath.Join(base, "inferd-"+strconv.Itoa(os.Getpid())+"-"+start); own != want {
		t.Fatalf("own folder %s, want %s", own, want)
	}
	st, err := os.Stat(own)
	must(t, err)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("own folder mode %v, want 0700", st.Mode().Perm())
	}
	second, err := Make("model-x-")
	must(t, err)
	if filepath.Dir(second) != own || second == dir {
		t.Errorf("second folder %s beside %s", second, dir)
	}
	must(t, RemoveOwn())
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Fatalf("own folder after RemoveOwn: %v", err)
	}
	// Made again on the next use.
	again, err := Make("python-")
	must(t, err)
	if filepath.Dir(again) != own {
		t.Errorf("folder %s after RemoveOwn, want it under %s", again, own)
	}
	// And when something else removed it.
	must(t, os.RemoveAll(own))
	_, err = Make("python-")
	must(t, err)
}

// TestSweep: a folder of a process that is gone is removed; folders of
// live processes (this one, its parent, one whose lock is held) and
// anything not named and made as a process folder are kept.
func TestSweep(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sweeping needs /proc")
	}
	base := setTMPDIR(t)
	own, err := Make("model-x-")
	must(t, err)
	parent, err := startTime(os.Getppid())
	must(t, err)
	dead := strconv.Itoa(deadPid(t))
	me := strconv.Itoa(os.Getpid())

	gone := []string{
		folder(t, base, "inferd-"+dead+"-12345"),
		// This pid, but an earlier process: a restarted container's.
		folder(t, base, "inferd-"+me+"-1"),
	}
	kept := []string{
		filepath.Dir(own),
		folder(t, base, "inferd-"+strconv.Itoa(os.Getppid())+"-"+parent),
		folder(t, base, "inferd-cache"),
		folder(t, base, "inferd-python-123"),
		folder(t, base, "inferd-"+dead+"-abc"),
		folder(t, base, "inferd-0"+dead+"-1"),
	}
	// A dead pid whose folder's lock is held: its process lives in
	// another pid namespace.
	locked := folder(t, base, "inferd-"+dead+"-777")
	kept = append(kept, locked)
	f, err := openFolder(locked)
	must(t, err)
	must(t, lock(f))
	defer f.Close()
	// A link with a process folder's name is not followed.
	target := folder(t, t.TempDir(), "target")
	must(t, os.Symlink(target, filepath.Join(base, "inferd-"+dead+"-555")))
	kept = append(kept, filepath.Join(base, "inferd-"+dead+"-555"), target)
	// A plain file of that name is no folder.
	must(t, os.WriteFile(filepath.Join(base, "inferd-"+dead+"-556"), nil, 0o600))
	kept = append(kept, filepath.Join(base, "inferd-"+dead+"-556"))

	removed, err := Sweep()
	must(t, err)
	slices.Sort(removed)
	slices.Sort(gone)
	if !slices.Equal(removed, gone) {
		t.Errorf("removed %v, want %v", removed, gone)
	}
	for _, p := range gone {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("own sub-folder removed: %v", err)
	}
}

// TestSweepOtherUser: a process folder this user does not own is kept
// (only root can make one to test with).
func TestSweepOtherUser(t *testing.T) {
	if runtime.GOOS != "linux" || os.Getuid() != 0 {
		t.Skip("needs root on Linux to make another user's folder")
	}
	base := setTMPDIR(t)
	p := folder(t, base, "inferd-"+strconv.Itoa(deadPid(t))+"-1")
	must(t, os.Chown(p, 65534, 65534))
	removed, err := Sweep()
	must(t, err)
	if len(removed) != 0 {
		t.Errorf("removed %v", removed)
	}
}

// TestOwnRefusesForeignFolder: a link planted where this process's folder
// will be is refused, not followed.
func TestOwnRefusesForeignFolder(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("O_NOFOLLOW checks")
	}
	base := setTMPDIR(t)
	start, err := startTime(os.Getpid())
	must(t, err)
	target := t.TempDir()
	must(t, os.Symlink(target, filepath.Join(base, "inferd-"+strconv.Itoa(os.Getpid())+"-"+start)))
	if dir, err := Make("model-x-"); err == nil {
		t.Fatalf("Make through a planted link: %s", dir)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Errorf("the link's target got %v", entries)
	}
}
