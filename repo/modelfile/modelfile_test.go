package modelfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// folder is a model folder beside a secret file outside it: "in/" holds
// data.bin (8 bytes), a sub-folder, a link to data.bin, a link to the
// secret, a link to the folder above, a FIFO, and a link to /dev/zero.
func folder(t testing.TB) string {
	t.Helper()
	top := t.TempDir()
	must(t, os.WriteFile(filepath.Join(top, "secret"), []byte("secret!"), 0o600))
	dir := filepath.Join(top, "in")
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "data.bin"), []byte("01234567"), 0o644))
	must(t, os.Symlink("data.bin", filepath.Join(dir, "inner")))
	must(t, os.Symlink("../data.bin", filepath.Join(dir, "sub", "up")))
	must(t, os.Symlink(filepath.Join(top, "secret"), filepath.Join(dir, "abs")))
	must(t, os.Symlink("../secret", filepath.Join(dir, "rel")))
	must(t, os.Symlink("..", filepath.Join(dir, "parent")))
	must(t, os.Symlink("/dev/zero", filepath.Join(dir, "zero")))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	return dir
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadFile(t *testing.T) {
	dir := folder(t)
	for _, tc := range []struct {
		name  string
		limit int64
		want  string
		err   error
	}{
		{"data.bin", 8, "01234567", nil},
		{"./sub/../data.bin", 8, "01234567", nil},
		{"inner", 8, "01234567", nil},
		{"sub/up", 8, "01234567", nil},
		{"data.bin", 7, "", ErrTooLarge},
		{"missing", 8, "", fs.ErrNotExist},
		{"../secret", 8, "", ErrOutside},
		{"sub/../../secret", 8, "", ErrOutside},
		{filepath.Join(filepath.Dir(dir), "secret"), 8, "", ErrOutside},
		{"abs", 8, "", ErrOutside},
		{"rel", 8, "", ErrOutside},
		{"parent/secret", 8, "", ErrOutside},
		{"", 8, "", ErrOutside},
		{"zero", 8, "", ErrOutside},
		{"/dev/zero", 8, "", ErrOutside},
		{"fifo", 8, "", ErrNotRegular}, // must not block
		{"sub", 8, "", ErrNotRegular},
	} {
		got, err := ReadFile(dir, tc.name, tc.limit)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("ReadFile(%q) = %q, %v; want %v", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// ReadHead reads no more than asked, and reports the whole size.
func TestReadHead(t *testing.T) {
	dir := folder(t)
	got, size, err := ReadHead(dir, "data.bin", 3)
	if err != nil || string(got) != "012" || size != 8 {
		t.Fatalf("ReadHead = %q, %d, %v; want 012, 8", got, size, err)
	}
	got, size, err = ReadHead(dir, "data.bin", 100)
	if err != nil || string(got) != "01234567" || size != 8 {
		t.Fatalf("ReadHead = %q, %d, %v; want all 8 bytes", got, size, err)
	}
}

func TestResolve(t *testing.T) {
	dir := folder(t)
	p, st, err := Resolve(dir, "sub")
	if err != nil || !st.IsDir() || p != filepath.Join(dir, "sub") {
		t.Fatalf("Resolve(sub) = %s, %v, %v", p, st, err)
	}
	p, st, err = Resolve(dir, "inner")
	if err != nil || !st.Mode().IsRegular() || p != filepath.Join(dir, "inner") {
		t.Fatalf("Resolve(inner) = %s, %v, %v", p, st, err)
	}
	if _, st, err := Resolve(dir, "fifo"); err != nil || st.Mode().IsRegular() {
		t.Fatalf("Resolve(fifo) = %v, %v; want a non-regular file", st, err)
	}
	for _, name := range []string{"../secret", "rel", "abs", "parent", "zero"} {
		if _, _, err := Resolve(dir, name); !errors.Is(err, ErrOutside) {
			t.Errorf("Resolve(%s) = %v, want ErrOutside", name, err)
		}
	}
}

func TestLocal(t *testing.T) {
	for _, tc := range []struct {
		p, want string
		ok      bool
	}{
		{"a/b", "a/b", true},
		{"/m/a/b", "a/b", true},
		{"/m", ".", true},
		{"/other/a", "", false},
		{"../a", "", false},
		{"a/../../b", "", false},
	} {
		got, ok := Local("/m", tc.p)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("Local(/m, %s) = %s, %v; want %s, %v", tc.p, got, ok, tc.want, tc.ok)
		}
	}
}

// Locate keeps the name inside the folder as written but follows links
// wherever they lead (a repository's own model file), and only stats.
func TestLocate(t *testing.T) {
	dir := folder(t)
	for _, name := range []string{"data.bin", "abs", "rel", "sub/up"} {
		if _, st, err := Locate(dir, name); err != nil || !st.Mode().IsRegular() {
			t.Errorf("Locate(%s) = %v, %v; want the regular file it leads to", name, st, err)
		}
	}
	if _, st, err := Locate(dir, "fifo"); err != nil || st.Mode().IsRegular() {
		t.Errorf("Locate(fifo) = %v, %v; want a non-regular file", st, err)
	}
	for _, name := range []string{"../secret", "sub/../../secret", filepath.Join(filepath.Dir(dir), "secret"), ""} {
		if _, _, err := Locate(dir, name); !errors.Is(err, ErrOutside) {
			t.Errorf("Locate(%q) = %v, want ErrOutside", name, err)
		}
	}
}

// FuzzResolve: whatever the name, Resolve either fails or names something
// whose real path lies inside the folder's, and ReadFile never returns the
// secret beside it.
func FuzzResolve(f *testing.F) {
	for _, seed := range []string{"data.bin", "../secret", "sub/up", "rel", "abs", "parent/secret", "/etc/passwd", "sub/../../secret", "./inner", "fifo", ""} {
		f.Add(seed)
	}
	dir := folder(f)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, _, err := Resolve(dir, name)
		if err == nil {
			got, err := filepath.EvalSymlinks(p)
			if err == nil && got != real && !strings.HasPrefix(got, real+string(filepath.Separator)) {
				t.Fatalf("Resolve(%q) = %s, which is %s, outside %s", name, p, got, real)
			}
		}
		if data, err := ReadFile(dir, name, 1<<10); err == nil && strings.Contains(string(data), "secret") {
			t.Fatalf("ReadFile(%q) read the secret", name)
		}
	})
}
