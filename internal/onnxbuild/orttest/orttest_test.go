package orttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLibPath(t *testing.T) {
	tests := []struct {
		name  string
		env   string
		setup func(t *testing.T) // may chdir
		want  string             // substring of the error; "" means success
	}{
		{"env missing file", "/nonexistent/libonnxruntime.so.1", nil, "make ort"},
		{"env set", "", func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "lib.so")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Setenv(EnvVar, p)
		}, ""},
		{"module without library", "", func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sub := filepath.Join(dir, "a", "b")
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Chdir(sub)
		}, "make ort"},
		{"module with library", "", func(t *testing.T) {
			dir := t.TempDir()
			lib := filepath.Join(dir, filepath.FromSlash(RepoLib))
			if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{filepath.Join(dir, "go.mod"), lib} {
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(filepath.Dir(lib))
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvVar, tt.env)
			if tt.setup != nil {
				tt.setup(t)
			}
			p, err := LibPath()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LibPath() error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("LibPath() = %q, %v; want error mentioning %q", p, err, tt.want)
			}
		})
	}
}
