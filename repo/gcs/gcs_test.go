package gcs

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/inferd/inferd/repo"
)

// isolate keeps the host's credentials and emulator settings out of a test.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir())
}

func newFake(t *testing.T, objs ...fakestorage.Object) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		// The client reads media through the XML API at the endpoint's
		// host; the fake serves that path-style only for its public host.
		PublicHost:     "127.0.0.1",
		InitialObjects: objs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func obj(bucket, name string, content []byte) fakestorage.Object {
	return fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: name}, Content: content}
}

// fakeOpts points the real client at a local server.
func fakeOpts(baseURL string) Options {
	return Options{Getenv: os.Getenv, ClientOptions: []option.ClientOption{
		option.WithEndpoint(baseURL + "/storage/v1/"),
		option.WithoutAuthentication(),
	}}
}

func open(t *testing.T, root, baseURL string) *Store {
	t.Helper()
	s, err := Open(context.Background(), root, fakeOpts(baseURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, bucket, prefix string
		err                bool
	}{
		{in: "gs://bucket", bucket: "bucket"},
		{in: "gs://bucket/", bucket: "bucket"},
		{in: "gs://bucket/models", bucket: "bucket", prefix: "models"},
		{in: "gs://bucket/models/", bucket: "bucket", prefix: "models"},
		{in: "gs://bucket//a///b//", bucket: "bucket", prefix: "a/b"},
		{in: "gs://my.bucket_1-x/a/b/c", bucket: "my.bucket_1-x", prefix: "a/b/c"},
		{in: "gs://", err: true},
		{in: "gs:///models", err: true},
		{in: "s3://bucket/models", err: true},
		{in: "/local/path", err: true},
		{in: "gs://Bucket/models", err: true},
		{in: "gs://b/models", err: true},
		{in: "gs://bucket?x/models", err: true},
	} {
		b, p, err := ParseURL(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("ParseURL(%q) = %q, %q; want an error", tc.in, b, p)
			}
			continue
		}
		if err != nil || b != tc.bucket || p != tc.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", tc.in, b, p, err, tc.bucket, tc.prefix)
		}
	}
}

func TestOpenList(t *testing.T) {
	isolate(t)
	objs := []fakestorage.Object{
		obj("repo", "models/resnet/config.pbtxt", []byte("name: \"resnet\"")),
		obj("repo", "models/resnet/1/model.onnx", []byte("one")),
		obj("repo", "models/resnet/2/model.onnx", []byte("two")),
		obj("repo", "models/bert/", nil), // console folder placeholder
		obj("repo", "models/bert/1/a/b/c.bin", []byte("deep")),
		obj("repo", "models2/other/1/model.onnx", []byte("not under the root")),
		obj("repo", "elsewhere/x", []byte("x")),
	}
	// Many pages, with small pages: the fake stores objects in O(n²).
	defer func(n int) { listPageSize = n }(listPageSize)
	listPageSize = 50
	const many = 400
	for i := range many {
		objs = append(objs, obj("repo", fmt.Sprintf("models/many/1/f%04d", i), []byte{byte(i)}))
	}
	srv := newFake(t, objs...)
	s := open(t, "gs://repo//models/", srv.URL())
	if s.String() != "gs://repo//models/" {
		t.Errorf("String() = %q", s.String())
	}

	all, err := s.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4+many {
		t.Fatalf("List(\"\") returned %d objects, want %d", len(all), 4+many)
	}
	for i, o := range all {
		if strings.HasPrefix(o.Key, "models") || strings.HasSuffix(o.Key, "/") {
			t.Errorf("key %q is not relative to the root or is a placeholder", o.Key)
		}
		if i > 0 && all[i-1].Key >= o.Key {
			t.Errorf("keys out of order: %q before %q", all[i-1].Key, o.Key)
		}
		if o.Version == "" || o.Modified.IsZero() {
			t.Errorf("%s: no version or modification time: %+v", o.Key, o)
		}
	}

	res, err := s.List(context.Background(), "resnet/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range res {
		keys = append(keys, o.Key)
	}
	want := []string{"resnet/1/model.onnx", "resnet/2/model.onnx", "resnet/config.pbtxt"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Errorf("List(resnet/) = %v, want %v", keys, want)
	}
	if res[0].Size != 3 {
		t.Errorf("size = %d, want 3", res[0].Size)
	}

	bert, err := s.List(context.Background(), "bert/")
	if err != nil || len(bert) != 1 || bert[0].Key != "bert/1/a/b/c.bin" {
		t.Errorf("List(bert/) = %v, %v", bert, err)
	}

	// A bucket-root repository sees everything.
	root := open(t, "gs://repo", srv.URL())
	every, err := root.List(context.Background(), "")
	if err != nil || len(every) != 6+many {
		t.Errorf("bucket root lists %d objects (%v), want %d", len(every), err, 6+many)
	}
}

func TestDownloadLarge(t *testing.T) {
	isolate(t)
	data := make([]byte, 64<<20)
	rand.NewChaCha8([32]byte{1}).Read(data)
	srv := newFake(t, obj("repo", "models/big/1/model.onnx", data))
	s := open(t, "gs://repo/models", srv.URL())

	dir := t.TempDir()
	path := filepath.Join(dir, "big", "1", "model.onnx") // folders do not exist yet
	start := time.Now()
	o, err := s.Download(context.Background(), "big/1/model.onnx", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("downloaded %d MiB in %v", len(data)>>20, time.Since(start))
	if o.Key != "big/1/model.onnx" || o.Size != int64(len(data)) || o.Version == "" || o.Modified.IsZero() {
		t.Errorf("Download returned %+v", o)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("downloaded content differs")
	}
	noTemp(t, filepath.Dir(path), "model.onnx")

	// The version matches what List reports, so callers can skip unchanged objects.
	l, err := s.List(context.Background(), "big/")
	if err != nil || len(l) != 1 || l[0].Version != o.Version {
		t.Errorf("List = %v, %v; Download version %s", l, err, o.Version)
	}
}

// noTemp fails if dir holds anything but the names given.
func noTemp(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("%s holds %v, want %v", dir, names, want)
	}
}

func crc32c(b []byte) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func md5b64(b []byte) string {
	sum := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func TestDownloadChecksumMismatch(t *testing.T) {
	isolate(t)
	content := []byte("the real model bytes")
	other := []byte("some other bytes")
	badCRC := obj("repo", "m/1/bad-crc.onnx", content)
	badCRC.Crc32c = crc32c(other)
	badMD5 := obj("repo", "m/1/bad-md5.onnx", content)
	badMD5.Crc32c = crc32c(content)
	badMD5.Md5Hash = md5b64(other)
	srv := newFake(t, badCRC, badMD5)
	s := open(t, "gs://repo", srv.URL())

	for _, key := range []string{"m/1/bad-crc.onnx", "m/1/bad-md5.onnx"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "model.onnx")
		_, err := s.Download(context.Background(), key, path)
		if !errors.Is(err, repo.ErrIntegrity) {
			t.Errorf("%s: err = %v, want repo.ErrIntegrity", key, err)
			continue
		}
		if !strings.Contains(err.Error(), "gs://repo/"+key) {
			t.Errorf("%s: error does not name the object: %v", key, err)
		}
		noTemp(t, dir) // nothing at path, no temporary file left
	}
}

// flipProxy forwards to target and flips one byte of every media download
// (anything outside the JSON API), as a bad link or cache would.
func flipProxy(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(res *http.Response) error {
		if strings.HasPrefix(res.Request.URL.Path, "/storage/v1/") || res.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return err
		}
		if len(b) > 0 {
			b[len(b)/2] ^= 0x01
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		return nil
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	return ts
}

func TestDownloadCorruptedInTransit(t *testing.T) {
	isolate(t)
	data := make([]byte, 1<<20)
	rand.NewChaCha8([32]byte{2}).Read(data)
	srv := newFake(t, obj("repo", "models/m/1/model.onnx", data))
	proxy := flipProxy(t, srv.URL())
	s := open(t, "gs://repo/models", proxy.URL)

	dir := t.TempDir()
	path := filepath.Join(dir, "m", "1", "model.onnx")
	_, err := s.Download(context.Background(), "m/1/model.onnx", path)
	if !errors.Is(err, repo.ErrIntegrity) {
		t.Fatalf("err = %v, want repo.ErrIntegrity", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed download (%v)", path, err)
	}
	noTemp(t, filepath.Dir(path))
}

func TestDownloadGzip(t *testing.T) {
	isolate(t)
	plain := bytes.Repeat([]byte("label\n"), 10000)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(plain)
	zw.Close()
	gz := obj("repo", "m/labels.txt", zb.Bytes())
	gz.ContentEncoding = "gzip"
	notGz := obj("repo", "m/broken.txt", []byte("not gzip at all"))
	notGz.ContentEncoding = "gzip"
	srv := newFake(t, gz, notGz)
	s := open(t, "gs://repo", srv.URL())

	path := filepath.Join(t.TempDir(), "labels.txt")
	o, err := s.Download(context.Background(), "m/labels.txt", path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, plain) {
		t.Errorf("gzip object not stored decompressed (%d bytes, want %d)", len(got), len(plain))
	}
	if o.Size != int64(zb.Len()) {
		t.Errorf("size = %d, want the stored size %d", o.Size, zb.Len())
	}

	dir := t.TempDir()
	if _, err := s.Download(context.Background(), "m/broken.txt", filepath.Join(dir, "broken.txt")); err == nil || !strings.Contains(err.Error(), "not valid gzip") {
		t.Errorf("broken gzip: err = %v", err)
	}
	noTemp(t, dir)
}

func TestDownloadRefusesEscapingKeys(t *testing.T) {
	isolate(t)
	srv := newFake(t, obj("repo", "secret", []byte("s")), obj("repo", "models/m/x", []byte("x")))
	s := open(t, "gs://repo/models", srv.URL())
	dir := t.TempDir()
	for _, key := range []string{"../secret", "m/../../secret", "/secret", "", "m/", ".."} {
		if _, err := s.Download(context.Background(), key, filepath.Join(dir, "out")); err == nil {
			t.Errorf("Download(%q) succeeded", key)
		}
	}
	noTemp(t, dir)

	_, err := s.Download(context.Background(), "m/missing", filepath.Join(dir, "out"))
	if err == nil || !strings.Contains(err.Error(), "gs://repo/models/m/missing") {
		t.Errorf("missing object: err = %v", err)
	}
}

func TestOpenMissingCredentials(t *testing.T) {
	isolate(t)
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(t.TempDir(), "missing.json"), bad} {
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
		start := time.Now()
		_, err := Open(context.Background(), "gs://my-bucket/models", Options{Getenv: os.Getenv})
		took := time.Since(start)
		if err == nil {
			t.Fatalf("%s: Open succeeded", path)
		}
		msg := err.Error()
		t.Logf("%s: %v", took, msg)
		for _, want := range []string{"my-bucket", "GOOGLE_APPLICATION_CREDENTIALS=" + path} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not contain %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("error spans several lines: %q", msg)
		}
		if took > 2*time.Second {
			t.Errorf("took %v", took)
		}
	}
}

func TestOpenWrongBucket(t *testing.T) {
	isolate(t)
	srv := newFake(t, obj("repo", "models/m/1/x", []byte("x")))
	_, err := Open(context.Background(), "gs://no-such-bucket/models", fakeOpts(srv.URL()))
	if err == nil {
		t.Fatal("Open succeeded")
	}
	msg := err.Error()
	for _, want := range []string{`"no-such-bucket"`, "does not exist", "credentials: client options"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

// forbidProxy answers 403 to bucket-metadata requests and, when all is set,
// to everything.
func forbidProxy(t *testing.T, target string, all bool) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if all || (strings.HasPrefix(r.URL.Path, "/storage/v1/b/") && !strings.Contains(strings.TrimPrefix(r.URL.Path, "/storage/v1/b/"), "/")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"error":{"code":403,"message":"robot@example.iam.gserviceaccount.com does not have storage.buckets.get access to the Google Cloud Storage bucket.\nPermission denied.","errors":[{"reason":"forbidden","message":"denied"}]}}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestOpenPermissions(t *testing.T) {
	isolate(t)
	srv := newFake(t, obj("repo", "models/m/1/x", []byte("x")))

	// Object rights without bucket rights still open: listing is tried.
	s := open(t, "gs://repo/models", forbidProxy(t, srv.URL(), false).URL)
	if l, err := s.List(context.Background(), ""); err != nil || len(l) != 1 {
		t.Errorf("List = %v, %v", l, err)
	}

	_, err := Open(context.Background(), "gs://repo/models", fakeOpts(forbidProxy(t, srv.URL(), true).URL))
	if err == nil {
		t.Fatal("Open succeeded without any rights")
	}
	msg := err.Error()
	for _, want := range []string{`"repo"`, "HTTP 403", "does not have storage.buckets.get", "credentials: "} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans several lines: %q", msg)
	}
}

func TestEmulatorHost(t *testing.T) {
	isolate(t)
	srv := newFake(t, obj("repo", "models/m/1/model.onnx", []byte("weights")))
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	// The emulator needs no credentials, so a broken credential setting
	// must not matter.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))

	s, err := Open(context.Background(), "gs://repo/models", Options{Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.List(context.Background(), "")
	if err != nil || len(l) != 1 || l[0].Key != "m/1/model.onnx" {
		t.Fatalf("List = %v, %v", l, err)
	}
	path := filepath.Join(t.TempDir(), "model.onnx")
	if _, err := s.Download(context.Background(), "m/1/model.onnx", path); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "weights" {
		t.Errorf("content = %q", got)
	}

	_, err = Open(context.Background(), "gs://absent/models", Options{Getenv: os.Getenv})
	if err == nil || !strings.Contains(err.Error(), "emulator STORAGE_EMULATOR_HOST=") || !strings.Contains(err.Error(), `"absent"`) {
		t.Errorf("wrong bucket on the emulator: err = %v", err)
	}
}

func TestCredentialSources(t *testing.T) {
	isolate(t)
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()

	// A readable credentials file is used as is.
	f := filepath.Join(t.TempDir(), "user.json")
	if err := os.WriteFile(f, []byte(`{"type":"authorized_user","client_id":"id","client_secret":"secret","refresh_token":"token"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", f)
	opts, source, err := clientOptions(ctx, nil, os.Getenv, log)
	if err != nil || len(opts) != 1 || source != "GOOGLE_APPLICATION_CREDENTIALS="+f {
		t.Errorf("credentials file: %d options, %q, %v", len(opts), source, err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")

	// The metadata server (a local fake named by GCE_METADATA_HOST) is used
	// when it hands out a token, and anonymous access otherwise.
	var noTokens atomic.Bool
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "no flavor", http.StatusForbidden)
			return
		}
		if !noTokens.Load() && strings.HasSuffix(r.URL.Path, "/service-accounts/default/token") {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"access_token":"tok","expires_in":3600,"token_type":"Bearer"}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer md.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(md.URL, "http://"))
	_, source, err = clientOptions(ctx, nil, os.Getenv, log)
	if err != nil || source != "metadata server" {
		t.Errorf("metadata server: %q, %v", source, err)
	}
	noTokens.Store(true)
	_, source, err = clientOptions(ctx, nil, os.Getenv, log)
	if err != nil || !strings.HasPrefix(source, "none (anonymous") {
		t.Errorf("metadata server without token: %q, %v", source, err)
	}
}
