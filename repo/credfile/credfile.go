// Package credfile reads Triton's cloud credential file, the JSON file named
// by TRITON_CLOUD_CREDENTIAL_PATH, which maps repository path prefixes to
// the credentials to use for them:
//
//	{"gs": {"<prefix>": "<service-account or authorized-user JSON path>"},
//	 "s3": {"<prefix>": {"key_id": "", "secret_key": "", "session_token": "",
//	                     "region": "", "profile": ""}},
//	 "as": {"<prefix>": {"account_str": "", "account_key": "", "auth_type": "",
//	                     "client_id": ""}}}
//
// A root uses the entry whose key is the longest plain-string prefix of it;
// the key "" matches every root.
package credfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// S3Creds is one "s3" entry. Empty fields were absent or empty in the file.
type S3Creds struct {
	KeyID        string
	SecretKey    string
	SessionToken string
	Region       string
	Profile      string
}

// ASCreds is one "as" (Azure Blob Storage) entry, with the fields Triton
// reads (triton-inference-server/core
// src/filesystem/implementations/as.h). Empty fields were absent or empty.
type ASCreds struct {
	AccountStr string // the storage account, replacing the one in the URL
	AccountKey string
	AuthType   string // "key", "managed_identity", "default" or empty
	ClientID   string // a user-assigned managed identity
}

// File is a parsed credential file.
type File struct {
	path string
	gs   map[string]string
	s3   map[string]S3Creds
	as   map[string]ASCreds
}

// Path is the file the credentials were read from.
func (f *File) Path() string { return f.path }

// S3 returns the "s3" entry for root; ok is false when no key prefixes it.
func (f *File) S3(root string) (S3Creds, bool) {
	p, ok := longest(f.s3, root)
	return f.s3[p], ok
}

// GCS returns the credentials JSON path of the "gs" entry for root; ok is
// false when no key prefixes it.
func (f *File) GCS(root string) (string, bool) {
	p, ok := longest(f.gs, root)
	return f.gs[p], ok
}

// AS returns the "as" entry for root; ok is false when no key prefixes it.
func (f *File) AS(root string) (ASCreds, bool) {
	p, ok := longest(f.as, root)
	return f.as[p], ok
}

// ASPrefix returns the key of the entry AS picks.
func (f *File) ASPrefix(root string) (string, bool) { return longest(f.as, root) }

// S3Prefix returns the key of the entry S3 picks, so messages can say which
// entry was used.
func (f *File) S3Prefix(root string) (string, bool) { return longest(f.s3, root) }

// GCSPrefix returns the key of the entry GCS picks.
func (f *File) GCSPrefix(root string) (string, bool) { return longest(f.gs, root) }

// longest finds the longest key of m that prefixes root.
func longest[V any](m map[string]V, root string) (string, bool) {
	best, found := "", false
	for k := range m {
		if strings.HasPrefix(root, k) && (!found || len(k) > len(best)) {
			best, found = k, true
		}
	}
	return best, found
}

// s3Fields are the keys an "s3" entry may hold; others are ignored, as
// Triton does.
var s3Fields = []string{"key_id", "secret_key", "session_token", "region", "profile"}

// asFields are the keys an "as" entry may hold.
var asFields = []string{"account_str", "account_key", "auth_type", "client_id"}

// Load reads and checks the credential file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credential file %s: %w", path, err)
	}
	f, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("credential file %s: %w", path, err)
	}
	f.path = path
	return f, nil
}

func parse(data []byte) (*File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty")
	}
	var top map[string]json.RawMessage
	if err := decode(data, &top); err != nil {
		if !json.Valid(data) {
			return nil, err
		}
		return nil, fmt.Errorf("want a JSON object at the top level: %w", err)
	}
	if top == nil {
		return nil, errors.New("want a JSON object at the top level")
	}
	f := &File{gs: map[string]string{}, s3: map[string]S3Creds{}, as: map[string]ASCreds{}}
	if raw, ok := top["gs"]; ok {
		sec, err := section("gs", raw)
		if err != nil {
			return nil, err
		}
		for _, p := range sortedKeys(sec) {
			var path string
			if err := decode(sec[p], &path); err != nil {
				return nil, fmt.Errorf("gs entry %q: want the path of a credentials JSON file as a string: %w", p, err)
			}
			if path == "" {
				return nil, fmt.Errorf("gs entry %q: the credentials file path is empty", p)
			}
			f.gs[p] = path
		}
	}
	if raw, ok := top["s3"]; ok {
		sec, err := section("s3", raw)
		if err != nil {
			return nil, err
		}
		for _, p := range sortedKeys(sec) {
			c, err := s3Entry(sec[p])
			if err != nil {
				return nil, fmt.Errorf("s3 entry %q: %w", p, err)
			}
			f.s3[p] = c
		}
	}
	if raw, ok := top["as"]; ok {
		sec, err := section("as", raw)
		if err != nil {
			return nil, err
		}
		for _, p := range sortedKeys(sec) {
			var c ASCreds
			if err := stringFields(sec[p], asFields, map[string]*string{"account_str": &c.AccountStr, "account_key": &c.AccountKey,
				"auth_type": &c.AuthType, "client_id": &c.ClientID}); err != nil {
				return nil, fmt.Errorf("as entry %q: %w", p, err)
			}
			f.as[p] = c
		}
	}
	return f, nil
}

// section decodes a top-level member that maps prefixes to entries.
func section(name string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	var sec map[string]json.RawMessage
	if err := decode(raw, &sec); err != nil {
		return nil, fmt.Errorf("%q: want an object mapping path prefixes to credentials: %w", name, err)
	}
	return sec, nil
}

func s3Entry(raw json.RawMessage) (S3Creds, error) {
	var c S3Creds
	err := stringFields(raw, s3Fields, map[string]*string{"key_id": &c.KeyID, "secret_key": &c.SecretKey,
		"session_token": &c.SessionToken, "region": &c.Region, "profile": &c.Profile})
	return c, err
}

// stringFields decodes an entry object whose fields are strings into dst;
// keys other than fields are ignored, as Triton does.
func stringFields(raw json.RawMessage, fields []string, dst map[string]*string) error {
	var m map[string]json.RawMessage
	if err := decode(raw, &m); err != nil {
		return fmt.Errorf("want an object with %s: %w", strings.Join(fields, ", "), err)
	}
	if m == nil {
		return fmt.Errorf("want an object with %s, not null", strings.Join(fields, ", "))
	}
	for _, k := range fields {
		v, ok := m[k]
		if !ok {
			continue
		}
		if err := decode(v, dst[k]); err != nil {
			return fmt.Errorf("%s: want a string: %w", k, err)
		}
	}
	return nil
}

// decode unmarshals one JSON value, turning the decoder's Go-flavoured
// type errors into plain wording ("found number").
func decode(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("found %s", te.Value)
	case errors.As(err, &se):
		return fmt.Errorf("not valid JSON at byte %d: %w", se.Offset, err)
	}
	return err
}

func sortedKeys(m map[string]json.RawMessage) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Lazy loads a credential file on first use and keeps it for the life of
// the process, as Triton does. A failed read is retried once on the next
// use (the file may have been in the middle of being written); after that
// the failure is kept too, so every root reports the same error.
type Lazy struct {
	path string

	mu    sync.Mutex
	file  *File
	err   error
	tries int
}

// NewLazy returns a Lazy for the file at path.
func NewLazy(path string) *Lazy { return &Lazy{path: path} }

// Path is the file's path.
func (l *Lazy) Path() string { return l.path }

// Get returns the parsed file, reading it if needed.
func (l *Lazy) Get() (*File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil || l.tries >= 2 {
		return l.file, l.err
	}
	l.tries++
	l.file, l.err = Load(l.path)
	return l.file, l.err
}
