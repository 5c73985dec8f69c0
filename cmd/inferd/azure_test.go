package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/azurite"
	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
)

const azureAccount = "inferdrepo"

// doubleConfig and doubleModel are a Python model that doubles its input.
const doubleConfig = `name: "double"
backend: "python"
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]
`

const doubleModel = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", r.inputs()[0].as_numpy() * 2)]) for r in requests]
`

const doubleRequest = `{"inputs":[{"name":"IN","shape":[3],"datatype":"INT32","data":[1,2,3]}]}`

// azureRepo starts Azurite holding container "models" with a config-less
// ONNX model (noconfig) and a Python model (double) under repo/, points
// the connection string at it and returns the root.
func azureRepo(t *testing.T) (*azurite.Server, string) {
	t.Helper()
	for _, v := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_AUTH_TYPE", "AZURE_STORAGE_CLIENT_ID",
		"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "IDENTITY_ENDPOINT",
		"MSI_ENDPOINT", "TRITON_CLOUD_CREDENTIAL_PATH", "TRITON_AZURE_MOUNT_DIRECTORY"} {
		t.Setenv(v, "")
	}
	srv := azurite.Start(t, azureAccount)
	srv.CreateContainer(t, "models")
	srv.Put(t, "models", "repo/noconfig/1/model.onnx", onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	srv.Put(t, "models", "repo/double/config.pbtxt", []byte(doubleConfig))
	srv.Put(t, "models", "repo/double/1/model.py", []byte(doubleModel))
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", srv.ConnectionString())
	return srv, "as://" + azureAccount + "/models/repo"
}

// localFiles lists the regular files under dir, relative to it.
func localFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

// hasFile reports whether some file of files ends in suffix.
func hasFile(files []string, suffix string) bool {
	return slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(f, suffix) })
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAzureRepository serves an as:// repository from Azurite in every
// control mode: a config-less ONNX model and a Python model load and
// answer; explicit loads and polling follow a version added and removed;
// the files copied for serving go when a model unloads and when the
// server exits.
func TestAzureRepository(t *testing.T) {
	python := servertest.Python(t)
	for _, mode := range []string{"none", "explicit", "poll"} {
		t.Run(mode, func(t *testing.T) {
			srv, root := azureRepo(t)
			cache := t.TempDir()
			args := []string{"--model-repository=" + root, "--model-control-mode=" + mode, "--repository-cache-dir=" + cache,
				"--backend-config=python,python-executable=" + python}
			switch mode {
			case "explicit":
				args = append(args, "--load-model=noconfig", "--load-model=double")
			case "poll":
				args = append(args, "--repository-poll-secs=1")
			}
			r := start(t, args...)
			if r.http == "" {
				t.Fatalf("server did not start: %v", <-r.done)
			}
			serves := func(v string) bool {
				s, body := post(t, r.http+"/v2/models/noconfig/infer", readmeExample)
				return s == 200 && strings.Contains(body, `"model_version":"`+v+`"`) && strings.Contains(body, `"data":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]`)
			}
			if !serves("1") {
				s, body := post(t, r.http+"/v2/models/noconfig/infer", readmeExample)
				t.Fatalf("noconfig: %d %s", s, body)
			}
			if s, body := get(t, r.http+"/v2/models/noconfig/config"); s != 200 || !strings.Contains(body, `"platform":"onnxruntime_onnx"`) {
				t.Fatalf("noconfig's completed config: %d %s", s, body)
			}
			if s, body := post(t, r.http+"/v2/models/double/infer", doubleRequest); s != 200 || !strings.Contains(body, `"data":[2,4,6]`) {
				t.Fatalf("double: %d %s", s, body)
			}
			files := localFiles(t, cache)
			if !hasFile(files, "noconfig/1/model.onnx") || !hasFile(files, "double/1/model.py") {
				t.Fatalf("local copies: %v", files)
			}

			switch mode {
			case "explicit":
				srv.Put(t, "models", "repo/noconfig/2/model.onnx", onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
				if s, body := post(t, r.http+"/v2/repository/models/noconfig/load", ""); s != 200 {
					t.Fatalf("load: %d %s", s, body)
				}
				if !serves("2") {
					t.Fatal("version 2 does not serve after the load")
				}
				if s, body := post(t, r.http+"/v2/repository/models/double/unload", ""); s != 200 {
					t.Fatalf("unload: %d %s", s, body)
				}
			case "poll":
				srv.Put(t, "models", "repo/noconfig/2/model.onnx", onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
				waitFor(t, "version 2 added to the container to serve", func() bool { return serves("2") })
				srv.Delete(t, "models", "repo/noconfig/2/model.onnx")
				waitFor(t, "version 1 to serve again after version 2 was deleted", func() bool { return serves("1") })
				// A model whose folder goes from the container unloads.
				srv.Delete(t, "models", "repo/double/config.pbtxt")
				srv.Delete(t, "models", "repo/double/1/model.py")
			}
			if mode != "none" {
				waitFor(t, "double to unload", func() bool {
					s, _ := get(t, r.http+"/v2/models/double/ready")
					return s != 200
				})
				waitFor(t, "double's local copy to go", func() bool {
					return !slices.ContainsFunc(localFiles(t, cache), func(f string) bool { return strings.Contains(f, "double/") })
				})
				if files := localFiles(t, cache); !hasFile(files, "noconfig/1/model.onnx") {
					t.Fatalf("noconfig's copy went with double's: %v", files)
				}
			}
			if err := r.stop(t); err != nil {
				t.Fatalf("exit: %v", err)
			}
			if files := localFiles(t, cache); len(files) != 0 {
				t.Fatalf("files left in the cache after the exit: %v", files)
			}
		})
	}
}

// TestAzureOpenErrors: a missing container stops the start with a message
// naming the account, the container, the cause and where the credentials
// came from; the credential file's "as" entry is used, and a root no
// entry matches fails with Triton's message.
func TestAzureOpenErrors(t *testing.T) {
	srv, root := azureRepo(t)
	err := startErr(t, "--model-repository=as://"+azureAccount+"/nosuch/repo")
	for _, want := range []string{`container "nosuch" of storage account "inferdrepo" does not exist`, "ContainerNotFound",
		"AZURE_STORAGE_CONNECTION_STRING: shared key of account inferdrepo"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing container: %v; want %q", err, want)
		}
	}

	// The connection string now gives the endpoint only; the file the key.
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint="+srv.Endpoint)
	path := writeCredFile(t, `{"as": {"as://`+azureAccount+`/models": {"account_key": "`+srv.Key+`"}, "as://`+azureAccount+`/models/repo/x": {"account_key": "AAAA"}}}`)
	r := start(t, "--model-repository="+root, "--repository-cache-dir="+t.TempDir(),
		"--backend-config=python,python-executable="+servertest.Python(t))
	if r.http == "" {
		t.Fatalf("start with the credential file: %v", <-r.done)
	}
	if s, body := post(t, r.http+"/v2/models/noconfig/infer", readmeExample); s != 200 {
		t.Fatalf("infer: %d %s", s, body)
	}
	err = startErr(t, "--model-repository=as://other/models/repo")
	if err == nil || !strings.Contains(err.Error(), "Cannot match credential for path as://other/models/repo") || !strings.Contains(err.Error(), path) {
		t.Errorf("unmatched root: %v", err)
	}
	writeCredFile(t, `{"as": {"": {"account_key": "AAAA"}}}`)
	err = startErr(t, "--model-repository="+root)
	for _, want := range []string{"403", `entry ""`, "shared key of account inferdrepo"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("wrong key in the file: %v; want %q", err, want)
		}
	}
}

// TestAzureUnreachableAtStart: with --exit-on-error=false the server
// starts while the container is missing, serves the local repository, and
// loads the container's models once it exists.
func TestAzureUnreachableAtStart(t *testing.T) {
	srv, _ := azureRepo(t)
	local := t.TempDir()
	writeModel(t, local, "simple", taggedSimple, onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	r := start(t, "--model-repository="+local, "--model-repository=as://"+azureAccount+"/later/models", "--exit-on-error=false",
		"--repository-cache-dir="+t.TempDir())
	if r.http == "" {
		t.Fatalf("server did not start: %v", <-r.done)
	}
	if s, body := post(t, r.http+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Fatalf("local model while the container is missing: %d %s", s, body)
	}
	srv.CreateContainer(t, "later")
	srv.Put(t, "later", "models/remote/1/model.onnx", onnxbuild.Must(onnxbuild.AddSub(onnxbuild.Int32, -1, 16)))
	waitFor(t, "the container's model to load after the container appeared", func() bool {
		s, _ := get(t, r.http+"/v2/models/remote/ready")
		return s == 200
	})
}
