package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// fakeS3 serves an in-process S3 (gofakes3) on loopback holding bucket
// "models" and points the SDK's credentials at static test keys.
func fakeS3(t *testing.T) (*s3mem.Backend, string) {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return backend, strings.TrimPrefix(srv.URL, "http://")
}

func putObject(t *testing.T, b *s3mem.Backend, key string, data []byte) {
	t.Helper()
	if _, err := b.PutObject("models", key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// waitVersion waits until unversioned requests to simple are answered by
// version v.
func waitVersion(t *testing.T, r *running, v, why string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := post(t, r.http+"/v2/models/simple/infer", readmeExample)
		if strings.Contains(body, `"model_version":"`+v+`"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: version %s never served; last answer %s", why, v, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestS3Repository serves a model from an S3 repository (custom endpoint
// form) in every control mode, and in poll mode picks up a new version.
func TestS3Repository(t *testing.T) {
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	for _, mode := range []string{"none", "explicit", "poll"} {
		t.Run(mode, func(t *testing.T) {
			backend, host := fakeS3(t)
			putObject(t, backend, "repo/nested/simple/config.pbtxt", []byte(taggedSimple))
			putObject(t, backend, "repo/nested/simple/1/model.onnx", model)
			args := []string{"--model-repository=s3://" + host + "/models/repo/nested", "--model-control-mode=" + mode,
				"--repository-cache-dir=" + t.TempDir()}
			switch mode {
			case "explicit":
				args = append(args, "--load-model=simple")
			case "poll":
				args = append(args, "--repository-poll-secs=1")
			}
			r := start(t, args...)
			if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 || !strings.Contains(body, `"model_version":"1"`) {
				t.Fatalf("infer: %d %s", s, body)
			}
			if mode == "explicit" {
				// The repository API reloads from the bucket: a new version
				// serves once the load returns.
				putObject(t, backend, "repo/nested/simple/2/model.onnx", model)
				if s, body := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
					t.Fatalf("load: %d %s", s, body)
				}
				if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 || !strings.Contains(body, `"model_version":"2"`) {
					t.Fatalf("after the load: %d %s", s, body)
				}
			}
			if mode != "poll" {
				return
			}
			putObject(t, backend, "repo/nested/simple/2/model.onnx", model)
			waitVersion(t, r, "2", "version 2 added to the bucket")
			if _, err := backend.DeleteObject("models", "repo/nested/simple/2/model.onnx"); err != nil {
				t.Fatal(err)
			}
			waitVersion(t, r, "1", "version 2 deleted from the bucket")
		})
	}
}

// TestS3Unreachable: a repository whose server does not answer stops the
// start-up with a message naming it.
func TestS3Unreachable(t *testing.T) {
	_, host := fakeS3(t)
	cfg, err := parseFlags([]string{"--model-repository=s3://" + host + "/no-such-bucket/x", "--http-port=0", "--metrics-port=0", "--grpc-port=0"}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	err = run(t.Context(), cfg, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Fatalf("start with a missing bucket: %v", err)
	}
}

// TestGCSRepository serves a gs:// repository through the storage
// emulator variable in every control mode; a model whose object fails its
// checksum is UNAVAILABLE with the reason and nothing of it is served.
func TestGCSRepository(t *testing.T) {
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	obj := func(name string, content []byte) fakestorage.Object {
		return fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bucket", Name: name}, Content: content}
	}
	for _, mode := range []string{"none", "explicit", "poll"} {
		t.Run(mode, func(t *testing.T) {
			corrupt := obj("models/broken/1/model.onnx", model)
			corrupt.Crc32c = "AAAAAA==" // not the CRC32C of the content
			srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
				Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1",
				InitialObjects: []fakestorage.Object{
					obj("models/simple/config.pbtxt", []byte(taggedSimple)),
					obj("models/simple/1/model.onnx", model),
					obj("models/broken/config.pbtxt", []byte(strings.Replace(taggedSimple, `name: "simple"`, `name: "broken"`, 1))),
					corrupt,
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Stop)
			t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
			args := []string{"--model-repository=gs://bucket/models", "--exit-on-error=false", "--strict-readiness=false",
				"--repository-cache-dir=" + t.TempDir(), "--model-control-mode=" + mode}
			switch mode {
			case "explicit":
				args = append(args, "--load-model=simple", "--load-model=broken")
			case "poll":
				args = append(args, "--repository-poll-secs=1")
			}
			r := start(t, args...)
			if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
				t.Fatalf("infer: %d %s", s, body)
			}
			if s, _ := get(t, r.http+"/v2/models/broken/ready"); s == 200 {
				t.Fatal("model with a corrupted object is ready")
			}
			_, index := post(t, r.http+"/v2/repository/index", "")
			if !strings.Contains(index, `"name":"broken","version":"1","state":"UNAVAILABLE"`) || !strings.Contains(index, "integrity check failed") {
				t.Fatalf("index %s", index)
			}
			srv.CreateObject(obj("models/simple/2/model.onnx", model))
			switch mode {
			case "explicit":
				if s, body := post(t, r.http+"/v2/repository/models/simple/load", ""); s != 200 {
					t.Fatalf("load: %d %s", s, body)
				}
				waitVersion(t, r, "2", "explicit load after version 2 was added")
			case "poll":
				waitVersion(t, r, "2", "version 2 added to the bucket")
			}
		})
	}
}

// TestS3UnreachableAtStart: with --exit-on-error=false the server starts
// while the bucket is missing, serves the local repository, and loads the
// bucket's models once it exists.
func TestS3UnreachableAtStart(t *testing.T) {
	backend, host := fakeS3(t)
	local := t.TempDir()
	writeModel(t, local, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	r := start(t, "--model-repository="+local, "--model-repository=s3://"+host+"/later/models", "--exit-on-error=false",
		"--repository-cache-dir="+t.TempDir())
	if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Fatalf("local model while the bucket is missing: %d %s", s, body)
	}
	if err := backend.CreateBucket("later"); err != nil {
		t.Fatal(err)
	}
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	for key, data := range map[string][]byte{
		"models/remote/config.pbtxt": []byte(strings.Replace(taggedSimple, `name: "simple"`, `name: "remote"`, 1)),
		"models/remote/1/model.onnx": model,
	} {
		if _, err := backend.PutObject("later", key, map[string]string{}, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, _ := get(t, r.http+"/v2/models/remote/ready"); s == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the bucket's model never loaded after the bucket appeared")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestS3ManyVersions: with version_policy all, every version in the bucket
// loads and answers under its own number.
func TestS3ManyVersions(t *testing.T) {
	backend, host := fakeS3(t)
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	putObject(t, backend, "m/simple/config.pbtxt", []byte(taggedSimple+"version_policy: { all: {} }\n"))
	const versions = 12
	for v := 1; v <= versions; v++ {
		putObject(t, backend, fmt.Sprintf("m/simple/%d/model.onnx", v), model)
	}
	r := start(t, "--model-repository=s3://"+host+"/models/m", "--repository-cache-dir="+t.TempDir())
	for v := 1; v <= versions; v++ {
		if s, body := post(t, r.http+fmt.Sprintf("/v2/models/simple/versions/%d/infer", v), readmeExample); s != 200 || !strings.Contains(body, fmt.Sprintf(`"model_version":"%d"`, v)) {
			t.Fatalf("version %d: %d %s", v, s, body)
		}
	}
}

// TestVertexMode runs the server with the environment Vertex AI sets: the
// repository comes from AIP_STORAGE_URI on the (emulated) GCS, only the
// Vertex listener serves, and the predict route answers both a v2 body and
// the instances envelope.
func TestVertexMode(t *testing.T) {
	model := onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16))
	obj := func(name string, content []byte) fakestorage.Object {
		return fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bucket", Name: name}, Content: content}
	}
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", PublicHost: "127.0.0.1",
		InitialObjects: []fakestorage.Object{
			obj("models/simple/config.pbtxt", []byte(taggedSimple)),
			obj("models/simple/1/model.onnx", model),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(gcs.URL(), "http://"))
	t.Setenv("AIP_MODE", "PREDICTION")
	t.Setenv("AIP_HTTP_PORT", "0")
	t.Setenv("AIP_HEALTH_ROUTE", "/v1/endpoints/e/deployedModels/d")
	t.Setenv("AIP_PREDICT_ROUTE", "/v1/endpoints/e/deployedModels/d:predict")
	t.Setenv("AIP_STORAGE_URI", "gs://bucket/models")
	r := start(t, "--repository-cache-dir="+t.TempDir(), "--allow-metrics=false")
	base := "http://" + r.addrs["Vertex AI"]
	if r.addrs["HTTP"] != "" {
		t.Fatalf("the KServe HTTP listener opened in Vertex mode at %s", r.addrs["HTTP"])
	}
	if s, _ := get(t, base+"/v1/endpoints/e/deployedModels/d"); s != 200 {
		t.Fatalf("health route: %d", s)
	}
	if s, body := post(t, base+"/v1/endpoints/e/deployedModels/d:predict", readmeExample); s != 200 || !strings.Contains(body, `"model_name":"simple"`) {
		t.Fatalf("v2 predict: %d %s", s, body)
	}
	instances := `{"instances":[{"INPUT0":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"INPUT1":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]}`
	if s, body := post(t, base+"/v1/endpoints/e/deployedModels/d:predict", instances); s != 200 || !strings.Contains(body, `"predictions":[{`) || !strings.Contains(body, `"OUTPUT0":[2,3,4`) {
		t.Fatalf("envelope predict: %d %s", s, body)
	}
}
