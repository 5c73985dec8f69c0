// Package s3 reads model repositories stored in Amazon S3 or an
// S3-compatible service (MinIO, Ceph, ...): it implements repo.Store for
// s3:// roots.
package s3

import (
	"fmt"
	"regexp"
	"strings"
)

// Location is a parsed s3:// root.
type Location struct {
	// Endpoint is "" for AWS (the SDK picks the regional endpoint), else
	// "http://host:port" or "https://host:port".
	Endpoint string
	Bucket   string
	// Prefix is the key prefix of the root, without leading or trailing
	// slashes; "" for the bucket root.
	Prefix string
}

// customRe is Triton's custom-endpoint form. It must match the whole cleaned
// path: the port is mandatory, so s3://minio.local/bucket/x names the bucket
// "minio.local", as in Triton.
var customRe = regexp.MustCompile(`^(https?://)?([0-9A-Za-z.-]+):([0-9]+)/([0-9a-z.-]+)((?:/[0-9A-Za-z._-]+)*)$`)

// ParseURL splits an s3:// root into endpoint, bucket and key prefix.
func ParseURL(root string) (Location, error) {
	rest, ok := strings.CutPrefix(root, "s3://")
	if !ok {
		return Location{}, fmt.Errorf("s3 repository %q: not an s3:// URL", root)
	}
	scheme := ""
	for _, s := range []string{"https://", "http://"} {
		if r, ok := strings.CutPrefix(rest, s); ok {
			scheme, rest = s, r
			break
		}
	}
	path := cleanPath(rest)
	if path == "" {
		return Location{}, fmt.Errorf("s3 repository %q: no bucket name", root)
	}

	if m := customRe.FindStringSubmatch(scheme + path); m != nil {
		if scheme == "" {
			scheme = "http://" // Triton's default for host:port
		}
		return Location{
			Endpoint: scheme + m[2] + ":" + m[3],
			Bucket:   m[4],
			Prefix:   strings.TrimPrefix(m[5], "/"),
		}, nil
	}
	// Triton would read these as bucket "https:" or "host:9000", which
	// can never exist; saying why here beats an opaque error from S3 later.
	if scheme != "" {
		return Location{}, fmt.Errorf("s3 repository %q: an explicit %s endpoint must be host:port/bucket[/path] with a numeric port, a bucket of [0-9a-z.-] and path segments of [0-9A-Za-z._-]", root, strings.TrimSuffix(scheme, "://"))
	}
	bucket, prefix, _ := strings.Cut(path, "/")
	if strings.Contains(bucket, ":") {
		return Location{}, fmt.Errorf("s3 repository %q: %q is not a bucket name; a custom endpoint must be host:port/bucket[/path] with a bucket of [0-9a-z.-] and path segments of [0-9A-Za-z._-]", root, bucket)
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

// cleanPath collapses repeated slashes and strips leading and trailing ones.
func cleanPath(p string) string {
	var parts []string
	for s := range strings.SplitSeq(p, "/") {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "/")
}

// String gives the canonical root, used in messages.
func (l Location) String() string {
	s := "s3://"
	if l.Endpoint != "" {
		s += l.Endpoint + "/"
	}
	s += l.Bucket
	if l.Prefix != "" {
		s += "/" + l.Prefix
	}
	return s
}
