package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// writeCredFile writes a credential file and points
// TRITON_CLOUD_CREDENTIAL_PATH at it.
func writeCredFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRITON_CLOUD_CREDENTIAL_PATH", path)
	return path
}

// startErr runs the server with args and returns why it stopped at start.
func startErr(t *testing.T, args ...string) error {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1"}, args...), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return run(t.Context(), cfg, slog.New(slog.DiscardHandler), nil)
}

// TestCredentialFileS3: the keys of the file's entry for the root are used
// (the environment's would fail: its profile does not exist).
func TestCredentialFileS3(t *testing.T) {
	backend, host := fakeS3(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "does-not-exist")
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	putObject(t, backend, "repo/simple/config.pbtxt", []byte(taggedSimple))
	putObject(t, backend, "repo/simple/1/model.onnx", model)
	root := "s3://" + host + "/models/repo"
	writeCredFile(t, `{
  "s3": {
    "s3://elsewhere": {"profile": "does-not-exist-either"},
    "s3://`+host+`/models": {"key_id": "file-key", "secret_key": "file-secret", "region": "us-east-1"}
  },
  "as": {"": {"account_str": "a", "account_key": "k"}}
}`)
	r := start(t, "--model-repository="+root, "--repository-cache-dir="+t.TempDir())
	if r.http == "" {
		t.Fatalf("start failed: %v", <-r.done)
	}
	if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 || !strings.Contains(body, `"model_version":"1"`) {
		t.Fatalf("infer: %d %s", s, body)
	}
}

// TestCredentialFileNoMatch: with the file set, a root no entry prefixes
// fails as in Triton, even though the environment holds usable keys.
func TestCredentialFileNoMatch(t *testing.T) {
	_, host := fakeS3(t)
	root := "s3://" + host + "/models/repo"
	path := writeCredFile(t, `{"s3": {"s3://other-host:9000/": {"key_id": "k", "secret_key": "s"}}, "gs": {"": "/any.json"}}`)
	err := startErr(t, "--model-repository="+root, "--repository-cache-dir="+t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "Cannot match credential for path "+root) || !strings.Contains(err.Error(), path) {
		t.Fatalf("start with no matching entry: %v", err)
	}

	// A file that cannot be read fails every cloud root, naming the file.
	path = writeCredFile(t, `{"s3": [`)
	err = startErr(t, "--model-repository="+root)
	if err == nil || !strings.Contains(err.Error(), "TRITON_CLOUD_CREDENTIAL_PATH: credential file "+path) {
		t.Fatalf("start with a broken credential file: %v", err)
	}
}

// TestCredentialFileGCS: with TRITON_CLOUD_CREDENTIAL_PATH, gs://b2/m uses
// the gs://b2 entry over "" (triton-inference-server/server
// docs/user_guide/model_repository.md), with a bucket name long enough to
// be valid. The entries name missing files, so Open stops there and the
// error shows which was picked, without contacting Google.
func TestCredentialFileGCS(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	dir := t.TempDir()
	writeCredFile(t, `{"gs": {"": "`+dir+`/any.json", "gs://bb2": "`+dir+`/bb2.json"}}`)
	err := startErr(t, "--model-repository=gs://bb2/m")
	if err == nil || !strings.Contains(err.Error(), dir+"/bb2.json") || !strings.Contains(err.Error(), `entry "gs://bb2"`) {
		t.Fatalf("start: %v", err)
	}
}
