package s3

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Location
	}{
		// AWS form.
		{"s3://bucket/path", Location{Bucket: "bucket", Prefix: "path"}},
		{"s3://bucket", Location{Bucket: "bucket"}},
		{"s3://bucket/", Location{Bucket: "bucket"}},
		{"s3://bucket/a/b/c", Location{Bucket: "bucket", Prefix: "a/b/c"}},
		{"s3://my.bucket-1/Models_v2/x y", Location{Bucket: "my.bucket-1", Prefix: "Models_v2/x y"}},
		// Duplicate, leading and trailing slashes.
		{"s3:///bucket//a///b/", Location{Bucket: "bucket", Prefix: "a/b"}},
		{"s3://bucket//models//", Location{Bucket: "bucket", Prefix: "models"}},
		// Custom endpoint: plain HTTP unless a scheme is given.
		{"s3://host:9000/bucket/models", Location{Endpoint: "http://host:9000", Bucket: "bucket", Prefix: "models"}},
		{"s3://https://host:9000/bucket/models", Location{Endpoint: "https://host:9000", Bucket: "bucket", Prefix: "models"}},
		{"s3://http://host:9000/bucket/models", Location{Endpoint: "http://host:9000", Bucket: "bucket", Prefix: "models"}},
		{"s3://10.0.0.1:9000/bucket", Location{Endpoint: "http://10.0.0.1:9000", Bucket: "bucket"}},
		{"s3://minio.local:9000//bucket//a/B_c.d-e//", Location{Endpoint: "http://minio.local:9000", Bucket: "bucket", Prefix: "a/B_c.d-e"}},
		{"s3://https://host:443//bucket/", Location{Endpoint: "https://host:443", Bucket: "bucket"}},
		// No port: the host is the bucket, as in Triton.
		{"s3://host/bucket/models", Location{Bucket: "host", Prefix: "bucket/models"}},
		{"s3://minio.local/bucket/x", Location{Bucket: "minio.local", Prefix: "bucket/x"}},
	} {
		got, err := ParseURL(tc.in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"gs://bucket/x", "not an s3:// URL"},
		{"/local/path", "not an s3:// URL"},
		{"s3://", "no bucket"},
		{"s3:////", "no bucket"},
		{"s3://https://", "no bucket"},
		// An explicit scheme needs the full host:port/bucket form.
		{"s3://https://host/bucket/models", "host:port/bucket"},
		// Upper case is not a bucket; the regex fails and "host:9000"
		// would be the bucket.
		{"s3://host:9000/Bucket/models", "is not a bucket name"},
		{"s3://host:9000/bucket/my models", "is not a bucket name"},
	} {
		_, err := ParseURL(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseURL(%q) error = %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}
