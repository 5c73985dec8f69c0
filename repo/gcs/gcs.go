// Package gcs is the Google Cloud Storage repo.Store: a model repository
// under a gs://bucket/prefix root, listed and downloaded with the official
// client and every download checked against the object's CRC32C and MD5.
package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/compute/metadata"
	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/inferd/inferd/repo"
)

// Options tune Open. The zero value uses Application Default Credentials.
type Options struct {
	// ClientOptions, when set, are handed to the storage client as they are
	// and replace credential discovery: the caller then owns endpoint and
	// authentication (tests point the client at a local fake this way).
	ClientOptions []option.ClientOption
	// CredentialsFile, when set, names a service-account or authorized-user
	// JSON file to use instead of GOOGLE_APPLICATION_CREDENTIALS and the
	// rest of discovery (an entry of Triton's credential file).
	CredentialsFile string
	// CredentialsSource says in messages where CredentialsFile came from,
	// for instance `credential file /etc/creds.json entry "gs://bucket"`.
	CredentialsSource string
	// Getenv reads the variables Open honours as Triton does
	// (STORAGE_EMULATOR_HOST, GOOGLE_APPLICATION_CREDENTIALS); the binary
	// hands down its environment's (cmd/inferd env.go). Nil reads none.
	// The storage client and the credentials library read the process
	// environment themselves too (STORAGE_EMULATOR_HOST, GCE_METADATA_HOST,
	// the gcloud files under HOME), as their documentation says; that is
	// left to them.
	Getenv repo.Getenv
	Logger *slog.Logger
}

// Store is one gs:// root.
type Store struct {
	root   string // as the user gave it
	bucket string
	prefix string // no leading or trailing "/"; "" for the bucket root
	creds  string // where the credentials came from, for error messages
	client *storage.Client
	bh     *storage.BucketHandle
	log    *slog.Logger
}

var _ repo.Store = (*Store)(nil)

// maxAttempts bounds the client's retries: by default it retries transient
// errors (connection refused included) until the context ends, which turns
// a wrong endpoint into a silent hang instead of an error.
const maxAttempts = 4

// listPageSize is GCS's own page limit, asked for explicitly so emulators
// page too; tests lower it to cross pages with few objects.
var listPageSize = 1000

// bucketName follows the GCS naming rules closely enough to reject typos
// before any request is made. Compiled on first use: the bounded repetition
// makes a program of hundreds of states, which every start of a server
// without gs:// roots would otherwise build (about 150 KB, kept for good).
var bucketName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)
})

// ParseURL splits gs://bucket/prefix. Duplicate slashes in the prefix are
// collapsed and its leading and trailing slashes dropped, so gs://b//m/ and
// gs://b/m name the same root.
func ParseURL(root string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(root, "gs://")
	if !ok {
		return "", "", fmt.Errorf("%q is not a gs:// URL", root)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q: bucket name is empty", root)
	}
	if !bucketName().MatchString(bucket) {
		return "", "", fmt.Errorf("%q: %q is not a valid bucket name (3-222 characters: lowercase letters, digits, '-', '_', '.')", root, bucket)
	}
	var segs []string
	for s := range strings.SplitSeq(prefix, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return bucket, strings.Join(segs, "/"), nil
}

// Open connects to the bucket of root and checks that it can be read, so a
// wrong bucket or missing permission fails at start-up with a message that
// names the bucket, the cause and where the credentials came from.
func Open(ctx context.Context, root string, opts Options) (*Store, error) {
	bucket, prefix, err := ParseURL(root)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var copts []option.ClientOption
	var source string
	// The emulator and caller-supplied options keep their precedence over
	// a credentials file, as they do over GOOGLE_APPLICATION_CREDENTIALS.
	if opts.CredentialsFile != "" && len(opts.ClientOptions) == 0 && opts.Getenv.Get("STORAGE_EMULATOR_HOST") == "" {
		copts, source, err = fileOptions(opts.CredentialsFile, opts.CredentialsSource)
	} else {
		copts, source, err = clientOptions(ctx, opts.ClientOptions, opts.Getenv.Get, log)
	}
	if err != nil {
		return nil, fmt.Errorf("gs://%s: %w", bucket, err)
	}
	client, err := storage.NewClient(ctx, copts...)
	if err != nil {
		return nil, wrap(err, "gs://%s: create storage client (credentials: %s)", bucket, source)
	}
	client.SetRetry(storage.WithMaxAttempts(maxAttempts))
	s := &Store{root: root, bucket: bucket, prefix: prefix, creds: source, client: client, bh: client.Bucket(bucket), log: log}
	if err := s.verify(ctx); err != nil {
		client.Close()
		return nil, err
	}
	log.Info("gcs repository opened", "root", root, "bucket", bucket, "prefix", prefix, "credentials", source)
	return s, nil
}

// verify reads the bucket's attributes; credentials that may read objects
// but not bucket metadata (storage.objects.list without storage.buckets.get
// is common) get a one-object listing instead.
func (s *Store) verify(ctx context.Context) error {
	_, err := s.bh.Attrs(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return s.openErr("does not exist", err)
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || (gerr.Code != http.StatusForbidden && gerr.Code != http.StatusUnauthorized) {
		return s.openErr("cannot be read", err)
	}
	it := s.bh.Objects(ctx, &storage.Query{Prefix: s.listPrefix(""), Projection: storage.ProjectionNoACL})
	it.PageInfo().MaxSize = 1
	if _, lerr := it.Next(); lerr != nil && !errors.Is(lerr, iterator.Done) {
		if errors.As(lerr, &gerr) && gerr.Code == http.StatusNotFound {
			return s.openErr("does not exist", lerr)
		}
		return s.openErr("is not readable, which needs storage.objects.list and storage.objects.get", lerr)
	}
	return nil
}

func (s *Store) openErr(what string, err error) error {
	return wrap(err, "gs://%s: bucket %q %s (credentials: %s)", s.bucket, s.bucket, what, s.creds)
}

// clientOptions finds credentials the way Triton does
// (triton-inference-server/core src/filesystem/implementations/gcs.h): the
// GOOGLE_APPLICATION_CREDENTIALS file, then the metadata server if it hands
// out a token, then anonymous access. The gcloud application-default file
// and the storage emulator are honoured too. source says which one won.
func clientOptions(ctx context.Context, given []option.ClientOption, getenv func(string) string, log *slog.Logger) (opts []option.ClientOption, source string, err error) {
	if host := getenv("STORAGE_EMULATOR_HOST"); host != "" {
		// storage.NewClient itself points at the emulator without auth.
		return given, "emulator STORAGE_EMULATOR_HOST=" + host + ", no authentication", nil
	}
	if len(given) > 0 {
		return given, "client options supplied by the caller", nil
	}
	// No Logger here: at debug level the library logs token exchanges.
	detect := &credentials.DetectOptions{Scopes: []string{storage.ScopeReadOnly}}
	if path := getenv("GOOGLE_APPLICATION_CREDENTIALS"); path != "" {
		source = "GOOGLE_APPLICATION_CREDENTIALS=" + path
		// Checked here so a missing file is named plainly rather than
		// through the credentials library's wording.
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, source, fmt.Errorf("credentials file GOOGLE_APPLICATION_CREDENTIALS=%s does not exist", path)
		} else if err != nil {
			return nil, source, wrap(err, "credentials file GOOGLE_APPLICATION_CREDENTIALS=%s", path)
		}
		creds, err := credentials.DetectDefault(detect)
		if err != nil {
			return nil, source, wrap(err, "credentials file GOOGLE_APPLICATION_CREDENTIALS=%s is not usable", path)
		}
		return []option.ClientOption{option.WithAuthCredentials(creds)}, source, nil
	}
	if home, err := os.UserHomeDir(); err == nil {
		path := filepath.Join(home, ".config", "gcloud", "application_default_credentials.json")
		if _, err := os.Stat(path); err == nil {
			source = "gcloud application-default credentials " + path
			creds, err := credentials.DetectDefault(detect)
			if err != nil {
				return nil, source, wrap(err, "credentials file %s is not usable", path)
			}
			return []option.ClientOption{option.WithAuthCredentials(creds)}, source, nil
		}
	}
	// The probe is memoized by the metadata package, and DetectDefault asks
	// the same question, so bounding it here bounds both.
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	onGCE := metadata.OnGCEWithContext(pctx)
	cancel()
	if onGCE {
		creds, err := credentials.DetectDefault(detect)
		if err == nil {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = creds.Token(tctx)
			cancel()
		}
		if err == nil {
			return []option.ClientOption{option.WithAuthCredentials(creds)}, "metadata server", nil
		}
		log.Warn("gcs: the metadata server gave no token; using anonymous access", "error", oneLine(err))
		return []option.ClientOption{option.WithoutAuthentication()}, "none (anonymous; metadata server gave no token: " + oneLine(err) + ")", nil
	}
	return []option.ClientOption{option.WithoutAuthentication()},
		"none (anonymous; set GOOGLE_APPLICATION_CREDENTIALS or run on Google Cloud)", nil
}

// fileOptions authenticates with the credentials file at path. Only the
// two kinds Triton reads are accepted: a file from an untrusted place must
// not be able to make the server run an external program or call an
// arbitrary token endpoint, as other kinds can.
func fileOptions(path, from string) ([]option.ClientOption, string, error) {
	source := "credentials file " + path
	if from != "" {
		source += " (" + from + ")"
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, source, fmt.Errorf("%s does not exist", source)
	} else if err != nil {
		return nil, source, wrap(err, "%s", source)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, source, wrap(err, "%s is not a JSON credentials file", source)
	}
	var kind credentials.CredType
	switch credentials.CredType(head.Type) {
	case credentials.ServiceAccount, credentials.AuthorizedUser:
		kind = credentials.CredType(head.Type)
	default:
		return nil, source, fmt.Errorf("%s: credential type %q is not supported; want %q or %q", source, head.Type, credentials.ServiceAccount, credentials.AuthorizedUser)
	}
	creds, err := credentials.NewCredentialsFromJSON(kind, data, &credentials.DetectOptions{Scopes: []string{storage.ScopeReadOnly}})
	if err != nil {
		return nil, source, wrap(err, "%s is not usable", source)
	}
	return []option.ClientOption{option.WithAuthCredentials(creds)}, source, nil
}

func (s *Store) String() string { return s.root }

// Close releases the client's connections.
func (s *Store) Close() error { return s.client.Close() }

// listPrefix is the object-name prefix for a key prefix. The root's own
// prefix gets its "/" so gs://b/m does not list gs://b/m2.
func (s *Store) listPrefix(prefix string) string {
	if s.prefix == "" {
		return prefix
	}
	return s.prefix + "/" + prefix
}

func (s *Store) objectName(key string) string { return s.listPrefix(key) }

// List returns every object under the root whose key starts with prefix.
// Names ending in "/" are the placeholders the console creates for
// folders and hold no file.
func (s *Store) List(ctx context.Context, prefix string) ([]repo.Object, error) {
	q := &storage.Query{Prefix: s.listPrefix(prefix), Projection: storage.ProjectionNoACL}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
		return nil, fmt.Errorf("list gs://%s/%s: %w", s.bucket, q.Prefix, err)
	}
	strip := s.listPrefix("")
	var objs []repo.Object
	it := s.bh.Objects(ctx, q)
	it.PageInfo().MaxSize = listPageSize
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, s.opErr("list", q.Prefix, err)
		}
		if strings.HasSuffix(a.Name, "/") {
			continue
		}
		objs = append(objs, repo.Object{
			Key:      strings.TrimPrefix(a.Name, strip),
			Size:     a.Size,
			Version:  strconv.FormatInt(a.Generation, 10),
			Modified: a.Updated,
		})
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

func (s *Store) opErr(op, name string, err error) error {
	return wrap(err, "%s gs://%s/%s (credentials: %s)", op, s.bucket, name, s.creds)
}

// wrap is fmt.Errorf(format+": %w") with the cause's message on one line.
func wrap(err error, format string, args ...any) error {
	return &cloudError{msg: fmt.Sprintf(format, args...) + ": " + oneLine(err), err: err}
}

// cloudError keeps the cause for errors.Is/As while its message stays on
// one line: googleapi errors spread details over several.
type cloudError struct {
	msg string
	err error
}

func (e *cloudError) Error() string { return e.msg }
func (e *cloudError) Unwrap() error { return e.err }

// oneLine is err's message without line breaks, and for API errors just the
// status and the server's message.
func oneLine(err error) string {
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		msg := gerr.Message
		if msg == "" {
			msg = http.StatusText(gerr.Code)
		}
		return strings.Join(strings.Fields(fmt.Sprintf("HTTP %d: %s", gerr.Code, msg)), " ")
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
