package repo

import (
	"context"
	"errors"
	"time"
)

// Store is a remote object store that holds a model repository under one
// root prefix (an s3:// or gs:// root). Keys are relative to that root and
// use "/" separators. A remote Source (see remote.go) lists and downloads
// through it; the S3 and GCS implementations live in repo/s3 and repo/gcs.
type Store interface {
	// String is the root as the user gave it (s3://..., gs://...).
	String() string
	// List returns every object whose key starts with prefix ("" for the
	// whole root), recursively, in key order.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Download writes the object to path through a temporary file in the
	// same folder that is renamed into place only after the bytes were
	// checked against the store's checksum, so a partial or corrupted
	// download is never visible at path. It returns the object as read.
	Download(ctx context.Context, key, path string) (Object, error)
}

// Object is one stored object.
type Object struct {
	Key      string // relative to the root, "/"-separated
	Size     int64
	Version  string // changes whenever the content changes (ETag, GCS generation)
	Modified time.Time
}

// ErrIntegrity marks a download whose bytes did not match the store's
// checksum.
var ErrIntegrity = errors.New("integrity check failed")

// Getenv reads the environment variables a store honours, as the binary
// hands them down (cmd/inferd env.go; docs/environment.md), so that the
// stores never read the process environment for their settings. A nil
// Getenv reads none.
type Getenv func(key string) string

// Get is the variable's value, "" when it is not set or g is nil.
func (g Getenv) Get(key string) string {
	if g == nil {
		return ""
	}
	return g(key)
}
