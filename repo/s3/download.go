package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/inferd/inferd/repo"
)

// Download streams the object to a temporary file beside path, checks
// length, ETag (when it is an MD5) and any checksum S3 returned, and only
// then renames it into place.
func (s *Store) Download(ctx context.Context, key, path string) (repo.Object, error) {
	if err := checkKey(key); err != nil {
		return repo.Object{}, fmt.Errorf("s3 download from %s: %w", s.root, err)
	}
	full := s.fullKey(key)
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{
		Bucket: aws.String(s.loc.Bucket),
		Key:    aws.String(full),
		// Asks S3 to return the object's stored checksum, if it has one.
		ChecksumMode: types.ChecksumModeEnabled,
	}, noSDKValidation)
	if err != nil {
		return repo.Object{}, s.wrap("download", "object", full, err)
	}
	defer out.Body.Close()

	obj := repo.Object{
		Key:      key,
		Version:  strings.Trim(aws.ToString(out.ETag), `"`),
		Modified: aws.ToTime(out.LastModified),
	}
	want := checks(out, obj.Version)

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w", s.loc.Bucket, full, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.part")
	if err != nil {
		return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w", s.loc.Bucket, full, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	w := io.Writer(tmp)
	if len(want) > 0 {
		ws := []io.Writer{tmp}
		for _, c := range want {
			ws = append(ws, c.h)
		}
		w = io.MultiWriter(ws...)
	}
	n, err := io.Copy(w, out.Body)
	if err != nil {
		return repo.Object{}, s.wrap("download", "object", full, err)
	}
	obj.Size = n

	if out.ContentLength != nil && *out.ContentLength != n {
		return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w: size: expected %d bytes, got %d", s.loc.Bucket, full, repo.ErrIntegrity, *out.ContentLength, n)
	}
	for _, c := range want {
		if got := c.sum(); got != c.want {
			return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w: %s: expected %s, got %s", s.loc.Bucket, full, repo.ErrIntegrity, c.name, c.want, got)
		}
	}

	// No fsync: the copy is scratch space, downloaded again on every load.
	if err := tmp.Chmod(0o644); err != nil {
		return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w", s.loc.Bucket, full, err)
	}
	if err := tmp.Close(); err != nil {
		return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w", s.loc.Bucket, full, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return repo.Object{}, fmt.Errorf("s3 download s3://%s/%s: %w", s.loc.Bucket, full, err)
	}
	done = true
	s.log.Debug("s3 object downloaded", "bucket", s.loc.Bucket, "key", full, "path", path, "bytes", n)
	return obj, nil
}

// checkKey refuses keys that could write outside the destination folder or
// name a different object than the caller meant.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasPrefix(key, `\`) || filepath.IsAbs(key) {
		return fmt.Errorf("refusing key %q: empty or absolute", key)
	}
	for seg := range strings.SplitSeq(strings.ReplaceAll(key, `\`, "/"), "/") {
		if seg == ".." {
			return fmt.Errorf("refusing key %q: it escapes the root", key)
		}
	}
	return nil
}

// check is one expected digest of the object.
type check struct {
	name string // "MD5 (ETag)", "CRC32C checksum", ...
	want string // in the encoding S3 uses for it
	h    hash.Hash
	enc  func([]byte) string
}

func (c check) sum() string { return c.enc(c.h.Sum(nil)) }

// crc64NVME is the reversed CRC-64/NVME polynomial, the form crc64.MakeTable
// takes; S3 uses it as the default checksum for new objects.
const crc64NVME = 0x9a6c9329ac4bc9b5

// checks lists what the downloaded bytes can be checked against.
func checks(out *awss3.GetObjectOutput, etag string) []check {
	var cs []check
	// The ETag is the MD5 of the bytes only for single-part uploads without
	// SSE-KMS or SSE-C; multipart ETags carry a "-N" suffix.
	if isMD5(etag) && out.SSECustomerAlgorithm == nil &&
		out.ServerSideEncryption != types.ServerSideEncryptionAwsKms &&
		out.ServerSideEncryption != types.ServerSideEncryptionAwsKmsDsse {
		cs = append(cs, check{name: "MD5 (ETag)", want: strings.ToLower(etag), h: md5.New(), enc: hex.EncodeToString})
	}
	// A composite checksum covers the parts, not the whole object.
	if out.ChecksumType == types.ChecksumTypeComposite {
		return cs
	}
	b64 := base64.StdEncoding.EncodeToString
	for _, c := range []struct {
		name string
		v    *string
		h    func() hash.Hash
	}{
		{"CRC32 checksum", out.ChecksumCRC32, func() hash.Hash { return crc32.NewIEEE() }},
		{"CRC32C checksum", out.ChecksumCRC32C, func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }},
		{"CRC64NVME checksum", out.ChecksumCRC64NVME, func() hash.Hash { return crc64.New(crc64.MakeTable(crc64NVME)) }},
		{"SHA1 checksum", out.ChecksumSHA1, sha1.New},
		{"SHA256 checksum", out.ChecksumSHA256, sha256.New},
	} {
		v := aws.ToString(c.v)
		if v == "" || strings.Contains(v, "-") {
			continue
		}
		cs = append(cs, check{name: c.name, want: v, h: c.h(), enc: b64})
	}
	return cs
}

func isMD5(etag string) bool {
	if len(etag) != 32 {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil
}

// noSDKValidation drops the SDK's own response-checksum check for one call:
// it fails mid-read with an unexported error type, and Download does the
// same check with an error that wraps repo.ErrIntegrity.
func noSDKValidation(o *awss3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		// Not found only if a later SDK renames it; its own check then stays.
		_, _ = st.Deserialize.Remove("AWSChecksum:ValidateOutputPayloadChecksum")
		return nil
	})
}
