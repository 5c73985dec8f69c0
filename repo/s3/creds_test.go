package s3

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
)

// keyRecorder notes the access key id each signed request was signed with.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	// "AWS4-HMAC-SHA256 Credential=<id>/<date>/<region>/s3/aws4_request, ..."
	if _, rest, ok := strings.Cut(r.Header.Get("Authorization"), "Credential="); ok {
		id, _, _ := strings.Cut(rest, "/")
		k.mu.Lock()
		k.keys = append(k.keys, id)
		k.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// only reports whether every recorded request used id (and there was one).
func (k *keyRecorder) only(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, got := range k.keys {
		if got != id {
			return false
		}
	}
	return len(k.keys) > 0
}

const fileEntry = `credential file /etc/creds.json entry "s3://"`

// TestExplicitStaticKeys: the root's own keys beat the environment's keys
// and AWS_PROFILE, and their region is used.
func TestExplicitStaticKeys(t *testing.T) {
	f := newFake(t)
	t.Setenv("AWS_PROFILE", "does-not-exist")
	t.Setenv("AWS_REGION", "us-west-2")
	rec := &keyRecorder{}
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv,
		HTTPClient: &http.Client{Transport: rec},
		Creds:      &Credentials{KeyID: "file-key", Secret: "file-secret", SessionToken: "tok", Region: "eu-central-1", Source: fileEntry},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.creds != fileEntry+" (static keys)" {
		t.Errorf("credentials from %q", s.creds)
	}
	if r := s.client.Options().Region; r != "eu-central-1" {
		t.Errorf("region %q", r)
	}
	if !rec.only("file-key") {
		t.Errorf("requests signed with %v", rec.keys)
	}

	// Errors name the entry.
	root := "s3://" + strings.TrimPrefix(f.url, "http://") + "/no-such-bucket/models"
	_, err = Open(context.Background(), root, Options{Getenv: os.Getenv, Creds: &Credentials{KeyID: "k", Secret: "s", Source: fileEntry}})
	if err == nil || !strings.Contains(err.Error(), "credentials: "+fileEntry+" (static keys)") {
		t.Errorf("wrong bucket: err = %v", err)
	}
}

// TestExplicitProfile: an entry with only a profile uses it, even over the
// environment's keys; a missing profile is an error naming the entry.
func TestExplicitProfile(t *testing.T) {
	f := newFake(t)
	cfg := "[profile team]\naws_access_key_id = p-key\naws_secret_access_key = p-secret\n"
	if err := os.WriteFile(os.Getenv("AWS_CONFIG_FILE"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &keyRecorder{}
	// A key id without its secret is not a key: the profile is used.
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv,
		HTTPClient: &http.Client{Transport: rec},
		Creds:      &Credentials{KeyID: "half", Profile: "team", Source: fileEntry},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.creds != fileEntry+" (profile team)" {
		t.Errorf("credentials from %q", s.creds)
	}
	if !rec.only("p-key") {
		t.Errorf("requests signed with %v", rec.keys)
	}

	_, err = Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv, Creds: &Credentials{Profile: "absent", Source: fileEntry}})
	if err == nil || !strings.Contains(err.Error(), fileEntry+" (profile absent)") {
		t.Errorf("err = %v, want one naming the entry and profile absent", err)
	}
	t.Log(err)
}

// TestExplicitEmptyFallsBack: an entry with neither keys nor a profile
// leaves the choice to the environment, and says so.
func TestExplicitEmptyFallsBack(t *testing.T) {
	f := newFake(t)
	rec := &keyRecorder{}
	s, err := Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv,
		HTTPClient: &http.Client{Transport: rec},
		Creds:      &Credentials{Region: "ap-south-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.creds != "explicit credentials (no keys or profile), then static keys from AWS_ACCESS_KEY_ID" {
		t.Errorf("credentials from %q", s.creds)
	}
	if r := s.client.Options().Region; r != "ap-south-1" {
		t.Errorf("region %q", r)
	}
	if !rec.only("test-key") {
		t.Errorf("requests signed with %v", rec.keys)
	}

	// With nothing in the environment either, the error names the entry
	// and where the default chain looked.
	os.Unsetenv("AWS_ACCESS_KEY_ID")
	os.Unsetenv("AWS_SECRET_ACCESS_KEY")
	_, err = Open(context.Background(), f.root("models"), Options{Getenv: os.Getenv, Creds: &Credentials{Source: fileEntry}})
	if err == nil {
		t.Fatal("Open succeeded without credentials")
	}
	msg := err.Error()
	for _, w := range []string{fileEntry + " (no keys or profile), then default chain", "AWS_ACCESS_KEY_ID+AWS_SECRET_ACCESS_KEY"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}
