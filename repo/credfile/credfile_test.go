package credfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const sample = `{
  "gs": {"": "/any.json", "gs://b2": "/b2.json", "gs://b2/m/deep": "/deep.json"},
  "s3": {
    "s3://": {"key_id": "all-id", "secret_key": "all-secret"},
    "s3://host:9000/bucket": {"key_id": "id", "secret_key": "secret", "region": "eu-west-1", "session_token": "tok", "unknown": 1},
    "s3://profiled": {"profile": "team"}
  },
  "as": {
    "as://acct": {"account_str": "a", "account_key": "k"},
    "as://acct/private": {"auth_type": "managed_identity", "client_id": "cid", "other": 2},
    "": {}
  }
}`

func TestMatch(t *testing.T) {
	f, err := Load(write(t, sample))
	if err != nil {
		t.Fatal(err)
	}
	gs := []struct{ root, path, prefix string }{
		// Checklist 54: the longer entry wins over "".
		{"gs://b2/m", "/b2.json", "gs://b2"},
		{"gs://b2/m/deep/er", "/deep.json", "gs://b2/m/deep"},
		// Plain string prefixes, not path components.
		{"gs://b22/m", "/b2.json", "gs://b2"},
		{"gs://other/m", "/any.json", ""},
	}
	for _, c := range gs {
		path, ok := f.GCS(c.root)
		prefix, _ := f.GCSPrefix(c.root)
		if !ok || path != c.path || prefix != c.prefix {
			t.Errorf("GCS(%q) = %q (entry %q), %v; want %q (entry %q)", c.root, path, prefix, ok, c.path, c.prefix)
		}
	}

	c, ok := f.S3("s3://host:9000/bucket/models")
	if want := (S3Creds{KeyID: "id", SecretKey: "secret", Region: "eu-west-1", SessionToken: "tok"}); !ok || c != want {
		t.Errorf("S3(custom endpoint) = %+v, %v; want %+v", c, ok, want)
	}
	if p, _ := f.S3Prefix("s3://host:9000/bucket/models"); p != "s3://host:9000/bucket" {
		t.Errorf("S3Prefix = %q", p)
	}
	if c, ok := f.S3("s3://profiled/x"); !ok || c != (S3Creds{Profile: "team"}) {
		t.Errorf("S3(profiled) = %+v, %v", c, ok)
	}
	if c, ok := f.S3("s3://elsewhere/x"); !ok || c.KeyID != "all-id" {
		t.Errorf("S3(elsewhere) = %+v, %v", c, ok)
	}
	// No "" entry in s3: a root outside every prefix has no match.
	if _, ok := f.S3("gs://b2/m"); ok {
		t.Error("S3 matched a gs:// root")
	}
	if f.Path() == "" {
		t.Error("Path is empty")
	}

	as := []struct {
		root, prefix string
		want         ASCreds
	}{
		{"as://acct/models", "as://acct", ASCreds{AccountStr: "a", AccountKey: "k"}},
		{"as://acct/private/m", "as://acct/private", ASCreds{AuthType: "managed_identity", ClientID: "cid"}},
		{"as://other/c/m", "", ASCreds{}},
	}
	for _, c := range as {
		got, ok := f.AS(c.root)
		prefix, _ := f.ASPrefix(c.root)
		if !ok || got != c.want || prefix != c.prefix {
			t.Errorf("AS(%q) = %+v (entry %q), %v; want %+v (entry %q)", c.root, got, prefix, ok, c.want, c.prefix)
		}
	}
}

func TestNoSections(t *testing.T) {
	for _, content := range []string{`{}`, `{"as": {}}`, `{"gs": null, "s3": {}, "as": null}`, `{"other": 1}`} {
		f, err := Load(write(t, content))
		if err != nil {
			t.Errorf("%s: %v", content, err)
			continue
		}
		if _, ok := f.GCS("gs://b/m"); ok {
			t.Errorf("%s: GCS matched", content)
		}
		if _, ok := f.S3("s3://b/m"); ok {
			t.Errorf("%s: S3 matched", content)
		}
		if _, ok := f.AS("as://a/c/m"); ok {
			t.Errorf("%s: AS matched", content)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct{ content, want string }{
		{``, "the file is empty"},
		{`{"gs": {"": "/a.json"`, "not valid JSON at byte"},
		{`[1, 2]`, "want a JSON object at the top level: found array"},
		{`"s3"`, "want a JSON object at the top level: found string"},
		{`{"gs": ["/a.json"]}`, `"gs": want an object mapping path prefixes to credentials: found array`},
		{`{"gs": {"gs://b": 3}}`, `gs entry "gs://b": want the path of a credentials JSON file as a string: found number`},
		{`{"gs": {"gs://b": ""}}`, `gs entry "gs://b": the credentials file path is empty`},
		{`{"s3": "x"}`, `"s3": want an object`},
		{`{"s3": {"s3://b": "key"}}`, `s3 entry "s3://b": want an object with key_id, secret_key`},
		{`{"s3": {"s3://b": null}}`, `s3 entry "s3://b": want an object`},
		{`{"s3": {"s3://b": {"key_id": 12}}}`, `s3 entry "s3://b": key_id: want a string: found number`},
		{`{"s3": {"s3://b": {"profile": {"name": "x"}}}}`, `s3 entry "s3://b": profile: want a string: found object`},
		{`{"as": [1]}`, `"as": want an object`},
		{`{"as": {"as://a": 1}}`, `as entry "as://a": want an object with account_str, account_key, auth_type, client_id: found number`},
		{`{"as": {"as://a": null}}`, `as entry "as://a": want an object`},
		{`{"as": {"as://a": {"account_key": true}}}`, `as entry "as://a": account_key: want a string: found bool`},
	}
	for _, c := range cases {
		path := write(t, c.content)
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: Load succeeded", c.content)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "credential file "+path+": ") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: error %q, want the file and %q", c.content, msg, c.want)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), "credential file "+missing) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestLazy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "creds.json")
	l := NewLazy(path)
	// First read fails; the one retry sees the file written meanwhile.
	if _, err := l.Get(); err == nil {
		t.Fatal("Get succeeded before the file exists")
	}
	if err := os.WriteFile(path, []byte(`{"s3": {"": {"profile": "p"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := l.Get()
	if err != nil {
		t.Fatal(err)
	}
	// Kept for the process lifetime: later edits are not seen.
	if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if f2, err := l.Get(); err != nil || f2 != f {
		t.Errorf("second Get = %p, %v; want the cached %p", f2, err, f)
	}

	// Two failures in a row stick.
	l = NewLazy(filepath.Join(dir, "never.json"))
	l.Get()
	l.Get()
	if err := os.WriteFile(l.Path(), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(); err == nil {
		t.Error("Get read the file again after two failures")
	}
}

// FuzzLoad checks that parsing never panics and that whatever parses
// answers look-ups consistently.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"gs": {"": "/a.json"}}`))
	f.Add([]byte(`{"s3": {"s3://b": {"key_id": 1}}}`))
	f.Add([]byte(`[null]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		for _, root := range []string{"", "gs://b2/m", "s3://host:9000/bucket/x", "as://acct/c/m"} {
			if path, ok := file.GCS(root); ok {
				p, _ := file.GCSPrefix(root)
				if !strings.HasPrefix(root, p) || path == "" {
					t.Fatalf("GCS(%q) picked entry %q with path %q", root, p, path)
				}
			}
			if _, ok := file.S3(root); ok {
				p, _ := file.S3Prefix(root)
				if !strings.HasPrefix(root, p) {
					t.Fatalf("S3(%q) picked entry %q", root, p)
				}
			}
			if _, ok := file.AS(root); ok {
				p, _ := file.ASPrefix(root)
				if !strings.HasPrefix(root, p) {
					t.Fatalf("AS(%q) picked entry %q", root, p)
				}
			}
		}
	})
}
