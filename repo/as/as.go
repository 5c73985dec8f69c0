// Package as is the Azure Blob Storage repo.Store: a model repository under
// an as://account/container/prefix root, listed and downloaded with the
// Azure SDK for Go (azblob), every download checked against the blob's size
// and Content-MD5.
//
// Triton reads such roots in triton-inference-server/core
// src/filesystem/implementations/as.h and always talks to
// https://<account>.blob.core.windows.net. As an inferd extension, the
// BlobEndpoint= of AZURE_STORAGE_CONNECTION_STRING selects another endpoint
// (Azurite, sovereign clouds, private endpoints).
package as

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/inferd/inferd/repo"
)

// Options tune Open. The zero value reads credentials from the environment.
type Options struct {
	// Creds, when set, replace the credential variables of the environment:
	// an "as" entry of Triton's credential file. The endpoint still comes
	// from AZURE_STORAGE_CONNECTION_STRING's BlobEndpoint= when it has one.
	Creds *Credentials
	// Getenv reads the variables Open honours as Triton does
	// (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY, AZURE_STORAGE_AUTH_TYPE,
	// AZURE_STORAGE_CLIENT_ID, AZURE_STORAGE_CONNECTION_STRING); the
	// binary hands down its environment's (cmd/inferd env.go). Nil reads
	// none. The default Azure credential chain (azidentity) reads the
	// process environment itself, as its documentation says; that is left
	// to it.
	Getenv repo.Getenv
	Logger *slog.Logger
}

// Store is one as:// root.
type Store struct {
	root      string // as the user gave it
	account   string
	container string
	prefix    string // no leading or trailing "/"; "" for the container root
	endpoint  string // the account's blob service URL
	creds     string // where the credentials came from, for error messages
	cc        *container.Client
	log       *slog.Logger
}

var _ repo.Store = (*Store)(nil)

// listPageSize is the service's own page limit, asked for explicitly so
// emulators page too; tests lower it to cross pages with few blobs.
var listPageSize int32 = 5000

// retry bounds the SDK's retries: its defaults back off for up to a minute
// between tries, which turns a wrong endpoint into a hang at start-up. No
// TryTimeout: it would bound reading a response body too, and so the
// download of a large model file.
var retry = policy.RetryOptions{MaxRetries: 3, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second}

// The names Azure accepts, checked before any request so a typo gets a
// plain message: accounts are 3-24 lowercase letters and digits, containers
// 3-63 lowercase letters, digits and single hyphens ($root is the account's
// root container). Compiled on first use, not at every server's start.
var (
	accountName   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]{3,24}$`) })
	containerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`) })
)

// ParseURL splits as://account/container/prefix as Triton does: the
// account may be given as its host name (<account>.blob.core.windows.net),
// a query is ignored, duplicate slashes in the prefix are collapsed and its
// leading and trailing slashes dropped.
func ParseURL(root string) (account, cont, prefix string, err error) {
	rest, ok := strings.CutPrefix(root, "as://")
	if !ok {
		return "", "", "", fmt.Errorf("%q is not an as:// URL", root)
	}
	rest, _, _ = strings.Cut(rest, "?")
	account, rest, _ = strings.Cut(rest, "/")
	account = strings.TrimSuffix(account, ".blob.core.windows.net")
	cont, prefix, _ = strings.Cut(rest, "/")
	if account == "" {
		return "", "", "", fmt.Errorf("%q: storage account name is empty (want as://account/container/path)", root)
	}
	if cont == "" {
		return "", "", "", fmt.Errorf("%q: container name is empty (want as://account/container/path)", root)
	}
	if !accountName().MatchString(account) {
		return "", "", "", fmt.Errorf("%q: %q is not a valid storage account name (3-24 lowercase letters and digits)", root, account)
	}
	if cont != "$root" && (!containerName().MatchString(cont) || strings.Contains(cont, "--")) {
		return "", "", "", fmt.Errorf("%q: %q is not a valid container name (3-63 lowercase letters, digits and single hyphens)", root, cont)
	}
	var segs []string
	for s := range strings.SplitSeq(prefix, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return account, cont, strings.Join(segs, "/"), nil
}

// Open connects to the container of root and checks that it can be read,
// so a wrong account, container or credential fails at start-up with a
// message that names them, the cause and where the credentials came from.
func Open(ctx context.Context, root string, opts Options) (*Store, error) {
	account, cont, prefix, err := ParseURL(root)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := resolve(ctx, account, opts.Creds, opts.Getenv.Get, log)
	if err != nil {
		return nil, fmt.Errorf("as://%s/%s: %w", account, cont, err)
	}
	s := &Store{root: root, account: a.account, container: cont, prefix: prefix, endpoint: a.endpoint, creds: a.source, log: log}
	s.cc, err = a.containerClient(cont)
	if err != nil {
		return nil, s.wrap(err, "as://%s/%s: create blob client (endpoint %s, credentials: %s)", s.account, cont, s.endpoint, s.creds)
	}
	if err := s.verify(ctx); err != nil {
		return nil, err
	}
	log.Info("azure blob repository opened", "root", root, "account", s.account, "container", cont, "prefix", prefix,
		"endpoint", s.endpoint, "credentials", s.creds)
	return s, nil
}

// verify reads the container's properties; credentials that may list and
// read blobs but not the container (a SAS for list and read) get a one-blob
// listing instead.
func (s *Store) verify(ctx context.Context) error {
	_, err := s.cc.GetProperties(ctx, nil)
	if err == nil {
		return nil
	}
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return s.openErr("does not exist", err)
	}
	if !isStatus(err, http.StatusForbidden, http.StatusUnauthorized) {
		return s.openErr("cannot be read", err)
	}
	pager := s.cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: to.Ptr(s.listPrefix("")), MaxResults: to.Ptr[int32](1)})
	if _, lerr := pager.NextPage(ctx); lerr != nil {
		if bloberror.HasCode(lerr, bloberror.ContainerNotFound) {
			return s.openErr("does not exist", lerr)
		}
		return s.openErr("is not readable, which needs the List and Read permissions (Storage Blob Data Reader)", lerr)
	}
	return nil
}

func (s *Store) openErr(what string, err error) error {
	return s.wrap(err, "as://%s/%s: container %q of storage account %q %s (endpoint %s, credentials: %s)",
		s.account, s.container, s.container, s.account, what, s.endpoint, s.creds)
}

func isStatus(err error, codes ...int) bool {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	for _, c := range codes {
		if re.StatusCode == c {
			return true
		}
	}
	return false
}

func (s *Store) String() string { return s.root }

// listPrefix is the blob-name prefix for a key prefix. The root's own
// prefix gets its "/" so as://a/c/m does not list as://a/c/m2.
func (s *Store) listPrefix(prefix string) string {
	if s.prefix == "" {
		return prefix
	}
	return s.prefix + "/" + prefix
}

func (s *Store) blobName(key string) string { return s.listPrefix(key) }

// List returns every blob under the root whose key starts with prefix.
// Names ending in "/" and the directory entries of accounts with a
// hierarchical namespace (metadata hdi_isfolder=true) hold no file.
func (s *Store) List(ctx context.Context, prefix string) ([]repo.Object, error) {
	lp := s.listPrefix(prefix)
	strip := s.listPrefix("")
	pager := s.cc.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
		Prefix:     to.Ptr(lp),
		MaxResults: to.Ptr(listPageSize),
		Include:    container.ListBlobsInclude{Metadata: true},
	})
	var objs []repo.Object
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, s.opErr("list", lp, err)
		}
		if page.Segment == nil {
			continue
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil || strings.HasSuffix(*b.Name, "/") || isFolder(b.Metadata) {
				continue
			}
			o := repo.Object{Key: strings.TrimPrefix(*b.Name, strip)}
			if p := b.Properties; p != nil {
				o.Size = deref(p.ContentLength)
				o.Version = string(deref(p.ETag))
				o.Modified = deref(p.LastModified)
			}
			objs = append(objs, o)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key < objs[j].Key })
	return objs, nil
}

// isFolder tells a directory entry of a hierarchical-namespace account
// (Data Lake Storage Gen2) from a blob.
func isFolder(md map[string]*string) bool {
	for k, v := range md {
		if strings.EqualFold(k, "hdi_isfolder") && v != nil && strings.EqualFold(*v, "true") {
			return true
		}
	}
	return false
}

func (s *Store) opErr(op, name string, err error) error {
	return s.wrap(err, "%s as://%s/%s/%s (endpoint %s, credentials: %s)", op, s.account, s.container, name, s.endpoint, s.creds)
}

// wrap is fmt.Errorf(format+": %w") with the cause's message on one line.
func (s *Store) wrap(err error, format string, args ...any) error {
	return &azureError{msg: fmt.Sprintf(format, args...) + ": " + oneLine(err), err: err}
}

// azureError keeps the cause for errors.Is/As while its message stays on
// one line: the SDK's errors spread the request and response over many.
type azureError struct {
	msg string
	err error
}

func (e *azureError) Error() string { return e.msg }
func (e *azureError) Unwrap() error { return e.err }

// oneLine is err's message without line breaks, and for service errors
// just the status and the service's error code.
func oneLine(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("HTTP %d %s", re.StatusCode, http.StatusText(re.StatusCode))
		if re.ErrorCode != "" {
			msg += ": " + re.ErrorCode
		}
		return msg
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// deref is *p, or the zero value for nil: the SDK's models are pointers.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
