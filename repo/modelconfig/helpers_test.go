package modelconfig

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update rewrites golden files: go test ./repo/modelconfig -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// mustParse parses config text or fails the test.
func mustParse(t testing.TB, text string) *ModelConfig {
	t.Helper()
	cfg, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return cfg
}

// readTestdata returns the contents of testdata/<rel>.
func readTestdata(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkGolden compares got with testdata/<rel>, rewriting it under -update.
func checkGolden(t *testing.T, rel string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", rel)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s mismatch (run with -update to accept)\n got: %s\nwant: %s", rel, got, want)
	}
}

// wantErr checks err against a wanted substring; "" means no error.
func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("expected error containing %q, got none", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

// readFileForTable reads a file while building test tables, before any
// *testing.T exists.
func readFileForTable(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
