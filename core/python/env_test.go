package python

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/servertest"
)

// entry is one tar entry: a header and, for a file, its content.
type entry struct {
	h    tar.Header
	data string
}

func file(name, data string) entry {
	return entry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data))}, data}
}

func symlink(name, target string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}}
}

func hardlink(name, target string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target}}
}

func dirEntry(name string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755}}
}

func writeTarGz(t *testing.T, entries ...entry) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "env.tar.gz")
	f, err := os.Create(p)
	servertest.Must(t, err)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		servertest.Must(t, tw.WriteHeader(&e.h))
		if e.data != "" {
			_, err := tw.Write([]byte(e.data))
			servertest.Must(t, err)
		}
	}
	servertest.Must(t, tw.Close())
	servertest.Must(t, gz.Close())
	servertest.Must(t, f.Close())
	return p
}

// TestExtractStaysInside: an archive cannot write outside its folder,
// through a link of its own or a climbing name; links that leave the
// folder are refused, those inside it and hard links work.
func TestExtractStaysInside(t *testing.T) {
	outside := t.TempDir()
	planted := filepath.Join(outside, "planted.txt")
	refused := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"absolute link, then a file through it", []entry{symlink("escape", outside), file("escape/planted.txt", "x")}, "lies under the link"},
		{"relative link out, then a file through it", []entry{symlink("escape", "../../../../../../../.."+outside), file("escape/planted.txt", "x")}, "lies under the link"},
		{"link under a folder, then a file through it", []entry{dirEntry("a/"), symlink("a/escape", outside), file("a/escape/planted.txt", "x")}, "lies under the link"},
		{"absolute link alone", []entry{file("bin/activate", "#"), symlink("bin/python3", "/usr/bin/python3")}, "leaves the archive's folder"},
		{"relative link out alone", []entry{symlink("bin/python3", "../../python3")}, "leaves the archive's folder"},
		{"link to the folder's parent through another link", []entry{symlink("l", "."), symlink("m", "l/..")}, "leaves the archive's folder"},
		{"links in a loop", []entry{symlink("a", "b"), symlink("b", "a")}, "leaves the archive's folder"},
		{"dot-dot entry", []entry{file("../planted.txt", "x")}, "leaves the archive's folder"},
		{"dot-dot inside an entry", []entry{file("bin/../../planted.txt", "x")}, "leaves the archive's folder"},
		{"absolute entry", []entry{file(planted, "x")}, "leaves the archive's folder"},
		{"hard link out", []entry{hardlink("h", "../../../../../../../.."+planted)}, "leaves the archive's folder"},
		{"hard link to an absolute path", []entry{hardlink("h", "/etc/passwd")}, "leaves the archive's folder"},
		{"hard link to a name the archive has no file for", []entry{hardlink("h", "nothing")}, "not a file of the archive"},
		{"hard link to a link", []entry{symlink("s", "x"), file("x", "1"), hardlink("h", "s")}, "not a file of the archive"},
		{"symlink over the folder", []entry{symlink("./", outside)}, "replaces the archive's folder"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			err := extract(writeTarGz(t, c.entries...), t.TempDir(), 1<<20)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if _, err := os.Lstat(planted); err == nil {
				t.Fatal("the archive wrote outside its folder")
			}
		})
	}

	// What a real environment holds: files, folders, relative links that
	// stay inside (to a file, to a folder, through another link) and a
	// hard link.
	dir := t.TempDir()
	servertest.Must(t, extract(writeTarGz(t,
		dirEntry("./"), dirEntry("bin/"), file("bin/python3.11", "#!python"), symlink("bin/python3", "python3.11"),
		symlink("bin/python", "./python3"), file("lib/libx.so.1", "ELF"), symlink("lib64", "lib"),
		symlink("bin/libx", "../lib64/libx.so.1"), hardlink("lib/libx.so", "lib/libx.so.1"), file("bin/activate", "# activate\n"),
	), dir, 1<<20))
	for name, want := range map[string]string{"bin/python": "#!python", "bin/libx": "ELF", "lib64/libx.so.1": "ELF", "lib/libx.so": "ELF"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	a, err := os.Stat(filepath.Join(dir, "lib/libx.so"))
	servertest.Must(t, err)
	b, err := os.Stat(filepath.Join(dir, "lib/libx.so.1"))
	servertest.Must(t, err)
	if !os.SameFile(a, b) {
		t.Error("the hard link is a copy, not a link")
	}
}

// TestExtractSizeCap: the files of an archive may unpack to the cap, not
// past it, however the bytes are split between files.
func TestExtractSizeCap(t *testing.T) {
	big := strings.Repeat("x", 600)
	archive := writeTarGz(t, file("a", big), file("b", big))
	if err := extract(archive, t.TempDir(), 1200); err != nil {
		t.Fatalf("at the cap: %v", err)
	}
	if err := extract(archive, t.TempDir(), 1199); !errors.Is(err, errUnpackTooLarge) {
		t.Fatalf("past the cap: %v", err)
	}
	if err := extract(writeTarGz(t, file("a", big+big)), t.TempDir(), 1199); !errors.Is(err, errUnpackTooLarge) {
		t.Fatalf("one file past the cap: %v", err)
	}
}

// TestUnpackOnce: loads of one archive at once share one extraction; a
// broken archive is not remembered, so a fixed one at the same path is
// unpacked by the next load.
func TestUnpackOnce(t *testing.T) {
	b := New(Options{})
	t.Cleanup(func() { _ = b.Close() })
	archive := writeTarGz(t, file("bin/activate", "#"))
	dirs := make(chan string, 4)
	for range 4 {
		go func() {
			dir, err := b.unpack(archive)
			if err != nil {
				t.Error(err)
			}
			dirs <- dir
		}()
	}
	first := <-dirs
	for range 3 {
		if dir := <-dirs; dir != first {
			t.Fatalf("two extractions: %s and %s", first, dir)
		}
	}
	envs, err := filepath.Glob(filepath.Join(filepath.Dir(first), "env-*"))
	servertest.Must(t, err)
	if len(envs) != 1 {
		t.Fatalf("%d folders unpacked: %v", len(envs), envs)
	}

	broken := filepath.Join(t.TempDir(), "env.tar.gz")
	servertest.Must(t, os.WriteFile(broken, []byte("not gzip"), 0o644))
	st, err := os.Stat(broken)
	servertest.Must(t, err)
	if _, err := b.unpack(broken); err == nil {
		t.Fatal("a broken archive unpacked")
	}
	// Fixed in place, with the same modification time as the broken one.
	data, err := os.ReadFile(archive)
	servertest.Must(t, err)
	servertest.Must(t, os.WriteFile(broken, data, 0o644))
	servertest.Must(t, os.Chtimes(broken, st.ModTime(), st.ModTime()))
	if _, err := b.unpack(broken); err != nil {
		t.Fatalf("the fixed archive: %v", err)
	}
}
