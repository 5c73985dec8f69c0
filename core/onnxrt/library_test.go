package onnxrt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func touch(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindLibrary(t *testing.T) {
	dir := t.TempDir()
	explicit := touch(t, filepath.Join(dir, "explicit", "libonnxruntime.so"))
	fromEnv := touch(t, filepath.Join(dir, "env", "libonnxruntime.so"))
	repo := filepath.Join(dir, "repo")
	fetched := touch(t, filepath.Join(repo, FetchedLibrary))
	deep := filepath.Join(repo, "cmd", "inferd")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()

	tests := []struct {
		name     string
		explicit string
		env      string
		wd       string
		want     string
		wantErr  string
	}{
		{name: "explicit wins", explicit: explicit, env: fromEnv, wd: deep, want: explicit},
		{name: "env next", env: fromEnv, wd: deep, want: fromEnv},
		{name: "fetched copy above the working directory", wd: deep, want: fetched},
		{name: "fetched copy in the working directory", wd: repo, want: fetched},
		{name: "explicit must exist", explicit: filepath.Join(dir, "nope.so"), env: fromEnv, wantErr: "library-path=" + filepath.Join(dir, "nope.so")},
		{name: "env must exist", env: filepath.Join(dir, "nope.so"), wd: deep, wantErr: "ORT_LIB_PATH=" + filepath.Join(dir, "nope.so")},
		{name: "a directory is not a library", explicit: dir, wantErr: "is a directory"},
		{name: "nothing found names all three ways", wd: elsewhere,
			wantErr: "ONNX Runtime shared library not found: pass --backend-config=onnxruntime,library-path=<libonnxruntime.so>, set ORT_LIB_PATH, or run `make ort`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(LibraryEnv, tc.env)
			if tc.wd != "" {
				t.Chdir(tc.wd)
			}
			got, err := FindLibrary(tc.explicit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FindLibrary = %q, %v; want error %q", got, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("FindLibrary = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSearchUp(t *testing.T) {
	root := t.TempDir()
	lib := touch(t, filepath.Join(root, "a", FetchedLibrary))
	for _, start := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b", "c")} {
		if err := os.MkdirAll(start, 0o755); err != nil {
			t.Fatal(err)
		}
		if got, ok := searchUp(start); !ok || got != lib {
			t.Errorf("searchUp(%s) = %q, %v; want %q", start, got, ok, lib)
		}
	}
	if got, ok := searchUp(root); ok {
		t.Errorf("searchUp(%s) = %q, want nothing", root, got)
	}
}

func TestSecondLibraryRejected(t *testing.T) {
	// Only the path matters: the check runs before anything is loaded.
	other := touch(t, filepath.Join(t.TempDir(), "libonnxruntime.so.1"))
	if b, err := New(Options{LibraryPath: other}); err == nil {
		b.Close()
		t.Fatal("a second library path was accepted")
	} else if !strings.Contains(err.Error(), "already loaded from") {
		t.Fatalf("error = %v", err)
	}
	// The same library again just shares the environment.
	b, err := New(Options{LibraryPath: testBackend.opts.LibraryPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}
