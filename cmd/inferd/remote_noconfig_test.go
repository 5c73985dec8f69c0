package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// TestRemoteRepositoryWithoutConfig: a model folder in S3 or GCS with no
// config.pbtxt (so no platform or backend) loads as it does from local
// disk, under the default --exit-on-error=true. Its first folder, version
// 1, is not selected by the default policy (latest 1) and so never
// fetched: it is not even a valid ONNX file. The backend still comes from
// it (the backend detection of repo.Model), the inputs and outputs from version 2.
func TestRemoteRepositoryWithoutConfig(t *testing.T) {
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	files := map[string][]byte{
		"noconfig/1/model.onnx": []byte("never fetched, never parsed"),
		"noconfig/2/model.onnx": model,
	}
	for _, kind := range []string{"s3", "gcs"} {
		t.Run(kind, func(t *testing.T) {
			var root string
			switch kind {
			case "s3":
				backend, host := fakeS3(t)
				for k, v := range files {
					putObject(t, backend, "repo/"+k, v)
				}
				root = "s3://" + host + "/models/repo"
			case "gcs":
				root = fakeGCS(t, files)
			}
			r := start(t, "--model-repository="+root, "--repository-cache-dir="+t.TempDir())
			if r.http == "" {
				t.Fatalf("server did not start: %v", <-r.done)
			}
			if s, _ := get(t, r.http+"/v2/models/noconfig/ready"); s != 200 {
				t.Fatalf("model not ready: %d", s)
			}
			s, body := get(t, r.http+"/v2/models/noconfig/config")
			for _, want := range []string{`"backend":"onnxruntime"`, `"platform":"onnxruntime_onnx"`, `"max_batch_size":4`,
				`"name":"INPUT0"`, `"name":"INPUT1"`, `"name":"OUTPUT0"`, `"name":"OUTPUT1"`, `"data_type":"TYPE_INT32"`} {
				if s != 200 || !strings.Contains(body, want) {
					t.Fatalf("config lacks %s: %d %s", want, s, body)
				}
			}
			s, body = post(t, r.http+"/v2/models/noconfig/infer", readmeExample)
			want := `{"model_name":"noconfig","model_version":"2","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]},{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}`
			if s != 200 || body != want {
				t.Fatalf("infer: %d %s", s, body)
			}
		})
	}
}

// TestRemoteUndeterminedBackend: a remote model folder with neither a
// config nor an ONNX file fails as the same folder on local disk does.
func TestRemoteUndeterminedBackend(t *testing.T) {
	backend, host := fakeS3(t)
	putObject(t, backend, "repo/remote/1/readme.txt", []byte("no model here"))
	local := t.TempDir()
	if err := os.MkdirAll(filepath.Join(local, "local", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(local, "local", "1", "readme.txt"), []byte("no model here"), 0o644); err != nil {
		t.Fatal(err)
	}
	s3root := "--model-repository=s3://" + host + "/models/repo"
	cache := "--repository-cache-dir=" + t.TempDir()
	// With the default --exit-on-error=true the server does not start.
	cfg, err := parseFlags([]string{s3root, cache, "--http-port=0", "--metrics-port=0", "--grpc-port=0", "--http-address=127.0.0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), cfg, slog.New(slog.DiscardHandler), nil); err == nil || !strings.Contains(err.Error(), "failed to load all models") {
		t.Fatalf("run = %v, want failed to load all models", err)
	}
	r := start(t, s3root, cache, "--model-repository="+local, "--exit-on-error=false")
	_, index := post(t, r.http+"/v2/repository/index", "")
	for _, name := range []string{"remote", "local"} {
		want := `{"name":"` + name + `","state":"UNAVAILABLE","reason":"Invalid model name: Could not determine backend for model '` + name +
			`' with no backend in model configuration. Expected model name of the form 'model.`
		if !strings.Contains(index, want) {
			t.Errorf("index lacks %s:\n%s", want, index)
		}
	}
}

// fakeGCS serves files (keys under gs://bucket/models) from the storage
// emulator and returns the root.
func fakeGCS(t *testing.T, files map[string][]byte) string {
	t.Helper()
	var objs []fakestorage.Object
	for k, v := range files {
		objs = append(objs, fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bucket", Name: "models/" + k}, Content: v})
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1", InitialObjects: objs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	return "gs://bucket/models"
}
