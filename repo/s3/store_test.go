package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/inferd/inferd/repo"
)

const bucket = "models-bucket"

// corruptBackend serves the in-memory backend's objects, but with one byte
// flipped for chosen keys while keeping the stored ETag and metadata: what a
// faulty disk or proxy would deliver.
type corruptBackend struct {
	*s3mem.Backend
	mu      sync.Mutex
	corrupt map[string]bool
}

func (b *corruptBackend) GetObject(bucketName, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	obj, err := b.Backend.GetObject(bucketName, key, rng)
	b.mu.Lock()
	bad := b.corrupt[key]
	b.mu.Unlock()
	if err != nil || !bad {
		return obj, err
	}
	data, err := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	if err != nil {
		return nil, err
	}
	data[len(data)/2] ^= 0xff
	obj.Contents = io.NopCloser(bytes.NewReader(data))
	return obj, nil
}

type fakeS3 struct {
	t       *testing.T
	backend *corruptBackend
	url     string // http://127.0.0.1:port
}

// newFake serves gofakes3 on loopback with one empty bucket and a clean AWS
// environment holding static keys (gofakes3 does not check signatures).
func newFake(t *testing.T) *fakeS3 {
	t.Helper()
	cleanEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	b := &corruptBackend{Backend: s3mem.New(), corrupt: map[string]bool{}}
	if err := b.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(b).Server())
	t.Cleanup(srv.Close)
	return &fakeS3{t: t, backend: b, url: srv.URL}
}

// root is the s3:// root for prefix on the fake server.
func (f *fakeS3) root(prefix string) string {
	return "s3://" + strings.TrimPrefix(f.url, "http://") + "/" + bucket + "/" + prefix
}

// put stores an object directly in the backend, which is much cheaper than
// uploading it through HTTP.
func (f *fakeS3) put(key string, data []byte, meta map[string]string) {
	f.t.Helper()
	m := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	for k, v := range meta {
		m[k] = v
	}
	if _, err := f.backend.PutObject(bucket, key, m, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		f.t.Fatal(err)
	}
}

// cleanEnv removes every AWS_* variable and points the shared files at empty
// temporary ones, so nothing from the machine running the tests leaks in and
// no request leaves it (instance metadata is disabled).
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "") // restores the value after the test
			os.Unsetenv(k)
		}
	}
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	for _, v := range []string{"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"} {
		p := filepath.Join(dir, v)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv(v, p)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func keys(objs []repo.Object) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}

func TestOpenListNestedAndPaginated(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	var want []string
	for i := range 25 {
		k := fmt.Sprintf("resnet/1/part-%02d.bin", i)
		f.put("models/"+k, []byte(k), nil)
		want = append(want, k)
	}
	f.put("models/resnet/config.pbtxt", []byte("name: \"resnet\""), nil)
	f.put("models/bert/2/model.onnx", []byte("onnx"), nil)
	f.put("models/bert/", nil, nil)    // a console "folder": skipped
	f.put("models2/other/x", nil, nil) // outside the root
	f.put("top.txt", nil, nil)         // outside the root
	want = append([]string{"bert/2/model.onnx"}, want...)
	want = append(want, "resnet/config.pbtxt")

	s, err := Open(ctx, f.root("//models/"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	s.pageSize = 4 // 27 objects: seven pages
	if s.String() != f.root("//models/") {
		t.Errorf("String() = %q", s.String())
	}

	objs, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(objs); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("List keys =\n%v\nwant\n%v", got, want)
	}
	for _, o := range objs {
		if o.Key == "bert/2/model.onnx" {
			if o.Size != 4 || o.Version != fmt.Sprintf("%x", md5.Sum([]byte("onnx"))) || o.Modified.IsZero() {
				t.Errorf("object = %+v", o)
			}
		}
	}

	objs, err = s.List(ctx, "resnet/1/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 25 || objs[0].Key != "resnet/1/part-00.bin" {
		t.Errorf("List(resnet/1/) = %v", keys(objs))
	}

	// The bucket root as the repository root.
	s2, err := Open(ctx, f.root(""), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	objs, err = s2.List(ctx, "models2/")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(objs); len(got) != 1 || got[0] != "models2/other/x" {
		t.Errorf("bucket-root List(models2/) = %v", got)
	}
}

// TestListDefaultPage lists more objects than one default page (1000).
func TestListDefaultPage(t *testing.T) {
	f := newFake(t)
	for i := range 1500 {
		f.put(fmt.Sprintf("m/1/%04d", i), nil, nil)
	}
	s, err := Open(context.Background(), f.root("m"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1500 || objs[1499].Key != "1/1499" {
		t.Errorf("listed %d objects, last %v", len(objs), objs[len(objs)-1])
	}
}

func TestDownloadLarge(t *testing.T) {
	f := newFake(t)
	data := make([]byte, 64<<20+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	f.put("models/big/1/model.onnx", data, nil)
	want := sha256.Sum256(data)

	ctx := context.Background()
	s, err := Open(ctx, f.root("models"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy", "big", "1", "model.onnx")
	obj, err := s.Download(ctx, "big/1/model.onnx", dst)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Key != "big/1/model.onnx" || obj.Size != int64(len(data)) || len(obj.Version) != 32 || obj.Modified.IsZero() {
		t.Errorf("object = %+v", obj)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != want {
		t.Fatal("downloaded bytes differ")
	}
	objs, err := s.List(ctx, "big/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Version != obj.Version {
		t.Errorf("List version %v, Download version %q", objs, obj.Version)
	}
	onlyFile(t, filepath.Dir(dst), "model.onnx")
}

// onlyFile checks that dir holds name and no leftover temporary file.
func onlyFile(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if name == "" && len(names) != 0 || name != "" && (len(names) != 1 || names[0] != name) {
		t.Errorf("%s holds %v, want only %q", dir, names, name)
	}
}

func TestDownloadCorrupted(t *testing.T) {
	f := newFake(t)
	f.put("m/1/model.onnx", bytes.Repeat([]byte("weights!"), 100000), nil)
	f.backend.mu.Lock()
	f.backend.corrupt["m/1/model.onnx"] = true
	f.backend.mu.Unlock()

	ctx := context.Background()
	s, err := Open(ctx, f.root(""), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "model.onnx")
	_, err = s.Download(ctx, "m/1/model.onnx", dst)
	if !errors.Is(err, repo.ErrIntegrity) {
		t.Fatalf("err = %v, want ErrIntegrity", err)
	}
	t.Log(err)
	for _, w := range []string{bucket + "/m/1/model.onnx", "MD5", "expected"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	onlyFile(t, dir, "")
}

func TestDownloadChecksum(t *testing.T) {
	f := newFake(t)
	data := []byte("label-a\nlabel-b\n")
	sum := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	good := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum))
	bad := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum+1))
	// gofakes3 replays stored metadata as response headers, which stands in
	// for S3's checksum headers. The ETag stays right, so only the checksum
	// can catch the bad one.
	f.put("good/labels.txt", data, map[string]string{"X-Amz-Checksum-Crc32c": good})
	f.put("bad/labels.txt", data, map[string]string{"X-Amz-Checksum-Crc32c": bad})

	ctx := context.Background()
	s, err := Open(ctx, f.root(""), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := s.Download(ctx, "good/labels.txt", filepath.Join(dir, "good", "labels.txt")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Download(ctx, "bad/labels.txt", filepath.Join(dir, "bad", "labels.txt"))
	if !errors.Is(err, repo.ErrIntegrity) || !strings.Contains(err.Error(), "CRC32C") || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want ErrIntegrity naming CRC32C and %s", err, bad)
	}
	t.Log(err)
	onlyFile(t, filepath.Join(dir, "bad"), "")
}

func TestDownloadRefusesEscapingKeys(t *testing.T) {
	f := newFake(t)
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	for _, k := range []string{"", "../secret", "a/../../b", "/abs", `a\..\b`, ".."} {
		if _, err := s.Download(context.Background(), k, dst); err == nil || !strings.Contains(err.Error(), "refusing key") {
			t.Errorf("Download(%q) err = %v", k, err)
		}
	}
}

func TestDownloadMissingKey(t *testing.T) {
	f := newFake(t)
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = s.Download(context.Background(), "nope/1/model.onnx", filepath.Join(dir, "model.onnx"))
	if err == nil || !strings.Contains(err.Error(), bucket+"/models/nope/1/model.onnx") || errors.Is(err, repo.ErrIntegrity) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
	onlyFile(t, dir, "")
}

func TestOpenWrongBucket(t *testing.T) {
	f := newFake(t)
	root := "s3://" + strings.TrimPrefix(f.url, "http://") + "/no-such-bucket/models"
	_, err := Open(context.Background(), root, Options{Getenv: os.Getenv})
	if err == nil {
		t.Fatal("Open succeeded")
	}
	t.Log(err)
	for _, w := range []string{`"no-such-bucket"`, "endpoint " + f.url, "not found", "static keys from AWS_ACCESS_KEY_ID"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// TestOpenMissingCredentials: without credentials Open fails at once with
// where the default chain looked. With AWS_EC2_METADATA_DISABLED the chain
// must not ask the instance-metadata service, which off EC2 takes seconds
// to give up: the test points the service at a listener of its own and
// checks that nothing reached it, rather than timing Open.
func TestOpenMissingCredentials(t *testing.T) {
	f := newFake(t)
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	var imdsCalls atomic.Int32
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		imdsCalls.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(imds.Close)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	_, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv})
	if err == nil {
		t.Fatal("Open succeeded without credentials")
	}
	if n := imdsCalls.Load(); n != 0 {
		t.Errorf("Open asked the instance-metadata service %d times with AWS_EC2_METADATA_DISABLED=true", n)
	}
	msg := err.Error()
	t.Log(msg)
	if !strings.Contains(msg, "no usable AWS credentials from default chain") || strings.Contains(msg, "\n") {
		t.Errorf("error = %q", msg)
	}
}

// TestStaticKeysBeatProfile: with both keys set, as in Triton
// (triton-inference-server/core src/filesystem/implementations/s3.h),
// AWS_PROFILE is not even read.
func TestStaticKeysBeatProfile(t *testing.T) {
	f := newFake(t)
	t.Setenv("AWS_PROFILE", "does-not-exist")
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	if s.creds != "static keys from AWS_ACCESS_KEY_ID" {
		t.Errorf("credentials from %q", s.creds)
	}
}

func TestProfile(t *testing.T) {
	f := newFake(t)
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	cfg := "[profile team]\naws_access_key_id = p-key\naws_secret_access_key = p-secret\n"
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_PROFILE", "team")
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	if s.creds != "profile team" {
		t.Errorf("credentials from %q", s.creds)
	}

	t.Setenv("AWS_PROFILE", "absent")
	_, err = Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv})
	if err == nil || !strings.Contains(err.Error(), "profile absent") {
		t.Errorf("err = %v, want one naming profile absent", err)
	}
	t.Log(err)
}

// TestDefaultChainSource names the provider the default chain picked.
func TestDefaultChainSource(t *testing.T) {
	f := newFake(t)
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	creds := "[default]\naws_access_key_id = d-key\naws_secret_access_key = d-secret\n"
	if err := os.WriteFile(os.Getenv("AWS_SHARED_CREDENTIALS_FILE"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv, HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.creds, "default chain (") || s.creds == "default chain ()" {
		t.Errorf("credentials from %q", s.creds)
	}
}
