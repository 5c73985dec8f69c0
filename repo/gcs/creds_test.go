package gcs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCredentialsFileErrors: an unusable CredentialsFile fails Open with a
// one-line message naming the file and where it came from, before any
// request is made.
func TestCredentialsFileErrors(t *testing.T) {
	isolate(t)
	// Anything that tried the network would reach this server (or Google,
	// which the test environment cannot reach either way).
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	// A valid file in the environment must not be used instead.
	env := filepath.Join(t.TempDir(), "env.json")
	if err := os.WriteFile(env, []byte(`{"type":"authorized_user","client_id":"id","client_secret":"secret","refresh_token":"token"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", env)

	dir := t.TempDir()
	cases := []struct{ name, content, want string }{
		{"missing.json", "", "does not exist"},
		{"garbage.json", "{not json", "is not a JSON credentials file"},
		{"external.json", `{"type":"external_account","audience":"x"}`, `credential type "external_account" is not supported`},
		{"untyped.json", `{"client_email":"a@b"}`, `credential type "" is not supported`},
		{"sa.json", `{"type":"service_account","client_email":3}`, "is not usable"},
	}
	const from = `credential file /etc/creds.json entry "gs://my-bucket"`
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if c.content != "" {
			if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Open(context.Background(), "gs://my-bucket/models", Options{Getenv: os.Getenv, CredentialsFile: path, CredentialsSource: from})
		if err == nil {
			t.Errorf("%s: Open succeeded", c.name)
			continue
		}
		msg := err.Error()
		t.Log(msg)
		for _, w := range []string{"gs://my-bucket", "credentials file " + path + " (" + from + ")", c.want} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not contain %q", c.name, msg, w)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: error spans several lines: %q", c.name, msg)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests made", n)
	}
}

// TestCredentialsFileKinds: service-account and authorized-user files are
// accepted without contacting Google (tokens are fetched on first use).
func TestCredentialsFileKinds(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	for name, content := range map[string]string{
		"user.json": `{"type":"authorized_user","client_id":"id","client_secret":"secret","refresh_token":"token"}`,
		"sa.json":   `{"type":"service_account","project_id":"p","private_key_id":"k","private_key":"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n","client_email":"robot@p.iam.gserviceaccount.com","token_uri":"https://oauth2.googleapis.com/token"}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		opts, source, err := fileOptions(path, "")
		if err != nil || len(opts) != 1 || source != "credentials file "+path {
			t.Errorf("%s: %d options, %q, %v", name, len(opts), source, err)
		}
	}
}

// TestCredentialsFileEmulator: the emulator needs no credentials, so even
// a missing CredentialsFile does not matter there.
func TestCredentialsFileEmulator(t *testing.T) {
	isolate(t)
	srv := newFake(t, obj("repo", "models/m/1/model.onnx", []byte("weights")))
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	s, err := Open(context.Background(), "gs://repo/models", Options{Getenv: os.Getenv, CredentialsFile: filepath.Join(t.TempDir(), "missing.json")})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
