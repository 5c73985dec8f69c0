package as

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/inferd/inferd/internal/azurite"
	"github.com/inferd/inferd/repo"
)

const account = "inferdtest"

// isolate keeps the host's Azure settings and identities out of a test.
func isolate(t *testing.T) {
	t.Helper()
	for _, v := range []string{"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_AUTH_TYPE", "AZURE_STORAGE_CLIENT_ID",
		"AZURE_STORAGE_CONNECTION_STRING", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
		"AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_USERNAME", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"} {
		t.Setenv(v, "")
	}
	t.Setenv("HOME", t.TempDir())
}

// emulator starts Azurite with container "repo" and points the connection
// string at it.
func emulator(t *testing.T) *azurite.Server {
	t.Helper()
	isolate(t)
	srv := azurite.Start(t, account)
	srv.CreateContainer(t, "repo")
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", srv.ConnectionString())
	return srv
}

func open(t *testing.T, root string) *Store {
	t.Helper()
	s, err := Open(context.Background(), root, Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, account, container, prefix string
		err                            string
	}{
		{in: "as://acct/cont", account: "acct", container: "cont"},
		{in: "as://acct/cont/", account: "acct", container: "cont"},
		{in: "as://acct/cont/models", account: "acct", container: "cont", prefix: "models"},
		{in: "as://acct/cont//a///b//", account: "acct", container: "cont", prefix: "a/b"},
		{in: "as://acct.blob.core.windows.net/cont/m", account: "acct", container: "cont", prefix: "m"},
		{in: "as://acct/cont/m?sv=2020&sig=x", account: "acct", container: "cont", prefix: "m"},
		{in: "as://acct/$root/m", account: "acct", container: "$root", prefix: "m"},
		{in: "as://acct/a-b-c1/m", account: "acct", container: "a-b-c1", prefix: "m"},
		{in: "as://acct", err: "container name is empty"},
		{in: "as://acct/", err: "container name is empty"},
		{in: "as:///cont/m", err: "storage account name is empty"},
		{in: "as://", err: "storage account name is empty"},
		{in: "gs://bucket/m", err: "is not an as:// URL"},
		{in: "as://Acct/cont", err: "not a valid storage account name"},
		{in: "as://my-account/cont", err: "not a valid storage account name"},
		{in: "as://acct/Cont", err: "not a valid container name"},
		{in: "as://acct/a--b", err: "not a valid container name"},
		{in: "as://acct/ab", err: "not a valid container name"},
		{in: "as://acct/-ab", err: "not a valid container name"},
	} {
		a, c, p, err := ParseURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) = %q, %q, %q, %v; want an error containing %q", tc.in, a, c, p, err, tc.err)
			}
			continue
		}
		if err != nil || a != tc.account || c != tc.container || p != tc.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %q, %v; want %q, %q, %q", tc.in, a, c, p, err, tc.account, tc.container, tc.prefix)
		}
	}
}

// TestOpenList lists a nested root across pages: placeholders and the
// directory entries of hierarchical-namespace accounts are not files, and
// a sibling prefix (models2) is not under the root.
func TestOpenList(t *testing.T) {
	srv := emulator(t)
	ctx := context.Background()
	for name, data := range map[string]string{
		"models/resnet/config.pbtxt": `name: "resnet"`,
		"models/resnet/1/model.onnx": "one",
		"models/resnet/2/model.onnx": "two",
		"models/bert/":               "",
		"models/bert/1/a/b/c.bin":    "deep",
		"models2/other/1/model.onnx": "not under the root",
		"elsewhere/x":                "x",
	} {
		srv.Put(t, "repo", name, []byte(data))
	}
	// A directory entry as Data Lake Storage Gen2 lists it.
	dirBlob := srv.Client().ServiceClient().NewContainerClient("repo").NewBlockBlobClient("models/bert/1")
	if _, err := dirBlob.Upload(ctx, nopCloser{bytes.NewReader(nil)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dirBlob.SetMetadata(ctx, map[string]*string{"hdi_isfolder": to.Ptr("true")}, nil); err != nil {
		t.Fatal(err)
	}
	const many = 25
	for i := range many {
		srv.Put(t, "repo", fmt.Sprintf("models/many/1/f%04d", i), []byte{byte(i)})
	}
	defer func(n int32) { listPageSize = n }(listPageSize)
	listPageSize = 4

	s := open(t, "as://"+account+"/repo//models/")
	if s.String() != "as://"+account+"/repo//models/" {
		t.Errorf("String() = %q", s.String())
	}
	objs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
		if o.Version == "" || o.Modified.IsZero() {
			t.Errorf("%s: version %q, modified %v; want both set", o.Key, o.Version, o.Modified)
		}
	}
	want := []string{"bert/1/a/b/c.bin", "many/1/f0000"}
	if len(keys) != 4+many || keys[0] != want[0] || keys[1] != want[1] || keys[len(keys)-1] != "resnet/config.pbtxt" {
		t.Fatalf("List = %d keys %v", len(keys), keys)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, "/") || strings.Contains(k, "other") || k == "bert/1" || strings.HasSuffix(k, "/") {
			t.Errorf("List returned %q", k)
		}
	}
	sub, err := s.List(ctx, "resnet/")
	if err != nil || len(sub) != 3 || sub[0].Key != "resnet/1/model.onnx" || sub[0].Size != 3 {
		t.Fatalf("List(resnet/) = %+v, %v", sub, err)
	}
	// Rewriting a blob changes its version, as polling relies on.
	srv.Put(t, "repo", "models/resnet/1/model.onnx", []byte("uno"))
	again, err := s.List(ctx, "resnet/1/")
	if err != nil || len(again) != 1 || again[0].Version == sub[0].Version {
		t.Fatalf("version after a rewrite: %+v (was %q), %v", again, sub[0].Version, err)
	}

	root := open(t, "as://"+account+"/repo")
	all, err := root.List(ctx, "")
	if err != nil || len(all) != 6+many {
		t.Fatalf("container root lists %d objects, %v", len(all), err)
	}
}

// TestDownload fetches a blob stored in one request (checked by
// Content-MD5) and one committed from blocks (no Content-MD5: checked by
// length), byte for byte, leaving no temporary files.
func TestDownload(t *testing.T) {
	srv := emulator(t)
	data := make([]byte, 3<<20+17)
	rand.NewChaCha8([32]byte{1}).Read(data)
	srv.Put(t, "repo", "m/simple/1/model.onnx", data)
	srv.PutBlocks(t, "repo", "m/simple/2/model.onnx", data, 1<<20)
	s := open(t, "as://"+account+"/repo/m")
	props, err := s.cc.NewBlobClient("m/simple/1/model.onnx").GetProperties(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum := md5.Sum(data); !bytes.Equal(props.ContentMD5, sum[:]) {
		t.Fatalf("the emulator stored Content-MD5 %x for a one-request upload; want %x", props.ContentMD5, sum)
	}
	dir := t.TempDir()
	for _, key := range []string{"simple/1/model.onnx", "simple/2/model.onnx"} {
		path := filepath.Join(dir, filepath.FromSlash(key))
		obj, err := s.Download(context.Background(), key, path)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes back, %v; want the %d uploaded", key, len(got), err, len(data))
		}
		if obj.Key != key || obj.Size != int64(len(data)) || obj.Version == "" {
			t.Errorf("%s: object %+v", key, obj)
		}
		noTemp(t, filepath.Dir(path))
	}
}

func noTemp(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".part-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

// TestDownloadContentMD5Mismatch: a blob whose stored Content-MD5 does not
// describe its bytes fails with repo.ErrIntegrity and leaves nothing.
func TestDownloadContentMD5Mismatch(t *testing.T) {
	srv := emulator(t)
	srv.Put(t, "repo", "m/x/1/model.onnx", []byte("the real bytes"))
	wrong := md5.Sum([]byte("other bytes"))
	bc := srv.Client().ServiceClient().NewContainerClient("repo").NewBlobClient("m/x/1/model.onnx")
	if _, err := bc.SetHTTPHeaders(context.Background(), blob.HTTPHeaders{BlobContentMD5: wrong[:]}, nil); err != nil {
		t.Fatal(err)
	}
	s := open(t, "as://"+account+"/repo/m")
	path := filepath.Join(t.TempDir(), "model.onnx")
	_, err := s.Download(context.Background(), "x/1/model.onnx", path)
	if !errors.Is(err, repo.ErrIntegrity) || !strings.Contains(err.Error(), "as://"+account+"/repo/m/x/1/model.onnx") {
		t.Fatalf("err = %v; want repo.ErrIntegrity naming the blob", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed download (%v)", path, err)
	}
	noTemp(t, filepath.Dir(path))
}

// flipProxy forwards to target and flips one byte of every large body.
func flipProxy(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.ContentLength < 1024 {
			return nil
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0xff
		r.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	return ts
}

// TestDownloadCorruptedInTransit: bytes changed between the service and
// the client fail the MD5 check.
func TestDownloadCorruptedInTransit(t *testing.T) {
	srv := emulator(t)
	data := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{2}).Read(data)
	srv.Put(t, "repo", "m/x/1/model.onnx", data)
	base, _ := strings.CutSuffix(srv.Endpoint, "/"+account)
	proxy := flipProxy(t, base)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", fmt.Sprintf("BlobEndpoint=%s/%s;AccountName=%s;AccountKey=%s", proxy.URL, account, account, srv.Key))
	s := open(t, "as://"+account+"/repo/m")
	path := filepath.Join(t.TempDir(), "model.onnx")
	_, err := s.Download(context.Background(), "x/1/model.onnx", path)
	if !errors.Is(err, repo.ErrIntegrity) || !strings.Contains(err.Error(), "MD5") {
		t.Fatalf("err = %v; want repo.ErrIntegrity on the MD5", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed download (%v)", path, err)
	}
}

func TestDownloadRefusesEscapingKeys(t *testing.T) {
	srv := emulator(t)
	srv.Put(t, "repo", "m/x", []byte("x"))
	s := open(t, "as://"+account+"/repo/m")
	dir := t.TempDir()
	for _, key := range []string{"", "/abs", "../up", "a/../../up", "dir/"} {
		if _, err := s.Download(context.Background(), key, filepath.Join(dir, "f")); err == nil {
			t.Errorf("Download(%q) succeeded", key)
		}
	}
}

// TestDownloadMissingBlob names the account, container, blob, cause and
// credentials.
func TestDownloadMissingBlob(t *testing.T) {
	emulator(t)
	s := open(t, "as://"+account+"/repo/m")
	_, err := s.Download(context.Background(), "gone/1/model.onnx", filepath.Join(t.TempDir(), "f"))
	for _, want := range []string{"as://" + account + "/repo/m/gone/1/model.onnx", "404", "BlobNotFound", "AZURE_STORAGE_CONNECTION_STRING"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v; want it to contain %q", err, want)
		}
	}
}

// TestOpenErrors: a missing container, a wrong key and an endpoint that
// does not answer fail Open with messages naming what was tried.
func TestOpenErrors(t *testing.T) {
	srv := emulator(t)
	wrongKey := strings.Replace(srv.ConnectionString(), srv.Key, "AAAA"+srv.Key[4:], 1)
	for _, tc := range []struct {
		name, root, conn string
		want             []string
	}{
		{"missing container", "as://" + account + "/nosuch/m", srv.ConnectionString(),
			[]string{`container "nosuch" of storage account "inferdtest" does not exist`, "404", "ContainerNotFound",
				"endpoint " + srv.Endpoint, "credentials: AZURE_STORAGE_CONNECTION_STRING: shared key of account inferdtest"}},
		{"wrong key", "as://" + account + "/repo/m", wrongKey,
			[]string{`container "repo" of storage account "inferdtest"`, "403", "AuthorizationFailure", "shared key of account inferdtest"}},
		{"no server", "as://" + account + "/repo/m", "BlobEndpoint=http://127.0.0.1:1/" + account + ";AccountName=" + account + ";AccountKey=" + srv.Key,
			[]string{`container "repo" of storage account "inferdtest" cannot be read`, "endpoint http://127.0.0.1:1/" + account, "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", tc.conn)
			start := time.Now()
			_, err := Open(context.Background(), tc.root, Options{Getenv: os.Getenv})
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to contain %q", err, w)
				}
			}
			if err != nil && strings.Contains(err.Error(), srv.Key) {
				t.Errorf("the error shows the key: %v", err)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("Open took %s", d)
			}
		})
	}
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

// TestPublicContainer: without credentials (and no identity to be had)
// a container with public read access is listed and read anonymously, and
// the source says so.
func TestPublicContainer(t *testing.T) {
	srv := emulator(t)
	ctx := context.Background()
	if _, err := srv.Client().CreateContainer(ctx, "public", &container.CreateOptions{Access: to.Ptr(container.PublicAccessTypeContainer)}); err != nil {
		t.Fatal(err)
	}
	srv.Put(t, "public", "m/x/1/model.onnx", []byte("open"))
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint="+srv.Endpoint)
	s := open(t, "as://"+account+"/public/m")
	if !strings.Contains(s.creds, "anonymous") {
		t.Errorf("credentials %q; want anonymous", s.creds)
	}
	objs, err := s.List(ctx, "")
	if err != nil || len(objs) != 1 {
		t.Fatalf("List = %+v, %v", objs, err)
	}
	path := filepath.Join(t.TempDir(), "f")
	if _, err := s.Download(ctx, "x/1/model.onnx", path); err != nil {
		t.Fatal(err)
	}
	// The private container is not readable so.
	_, err = Open(ctx, "as://"+account+"/repo/m", Options{Getenv: os.Getenv})
	if err == nil || !strings.Contains(err.Error(), "anonymous") {
		t.Fatalf("anonymous open of a private container: %v", err)
	}
}

// TestDownloadGzipEncoded: a blob declaring Content-Encoding gzip is
// stored as uploaded, checked against its Content-MD5, not gunzipped.
func TestDownloadGzipEncoded(t *testing.T) {
	srv := emulator(t)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(bytes.Repeat([]byte("label\n"), 10000))
	zw.Close()
	bb := srv.Client().ServiceClient().NewContainerClient("repo").NewBlockBlobClient("m/x/labels.txt")
	sum := md5.Sum(zb.Bytes())
	if _, err := bb.Upload(context.Background(), nopCloser{bytes.NewReader(zb.Bytes())}, &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentEncoding: to.Ptr("gzip"), BlobContentMD5: sum[:]},
	}); err != nil {
		t.Fatal(err)
	}
	s := open(t, "as://"+account+"/repo/m")
	path := filepath.Join(t.TempDir(), "labels.txt")
	if _, err := s.Download(context.Background(), "x/labels.txt", path); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, zb.Bytes()) {
		t.Fatalf("got %d bytes, %v; want the %d stored", len(got), err, zb.Len())
	}
}
