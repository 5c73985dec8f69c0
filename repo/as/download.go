package as

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/inferd/inferd/repo"
)

// checkKey refuses keys that would land outside the folder they are
// downloaded into, whatever path the caller derived from them.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("blob key %q is not a file name", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == ".." {
			return fmt.Errorf("blob key %q escapes the repository", key)
		}
	}
	return nil
}

// Download copies the blob to path through a temporary file beside it. The
// bytes are counted and hashed as they are written, and the file is renamed
// into place only when their number matches the blob's length and their
// MD5 its Content-MD5. Azure stores a Content-MD5 for blobs uploaded in one
// request; blobs committed from blocks have one only when the uploader set
// it, and are then checked by length alone. The bytes are those stored,
// whatever Content-Encoding the blob declares, as in Triton.
func (s *Store) Download(ctx context.Context, key, path string) (repo.Object, error) {
	if err := checkKey(key); err != nil {
		return repo.Object{}, fmt.Errorf("download from %s: %w", s.root, err)
	}
	name := s.blobName(key)
	where := fmt.Sprintf("as://%s/%s/%s", s.account, s.container, name)
	start := time.Now()
	resp, err := s.cc.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		return repo.Object{}, s.opErr("download", name, err)
	}
	// The retry reader resumes a broken transfer from where it stopped,
	// pinned to the ETag of this response, so the bytes stay one version's.
	body := resp.NewRetryReader(ctx, &blob.RetryReaderOptions{MaxRetries: 3})
	defer body.Close()
	size := int64(-1)
	if resp.ContentLength != nil {
		size = *resp.ContentLength
	}
	obj := repo.Object{Key: key, Size: size, Version: string(deref(resp.ETag)), Modified: deref(resp.LastModified)}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return repo.Object{}, fmt.Errorf("download %s: %w", where, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".part-*")
	if err != nil {
		return repo.Object{}, fmt.Errorf("download %s: %w", where, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	var sum hash.Hash
	var src io.Reader = body
	if len(resp.ContentMD5) > 0 {
		sum = md5.New()
		src = io.TeeReader(body, sum)
	}
	// A large buffer keeps the number of reads (and hash updates) down; the
	// writer is wrapped so *os.File's ReadFrom does not pick its own 32 KiB.
	n, err := io.CopyBuffer(struct{ io.Writer }{tmp}, src, make([]byte, 1<<20))
	if err != nil {
		return repo.Object{}, s.opErr("download", name, err)
	}
	if size >= 0 && n != size {
		return repo.Object{}, fmt.Errorf("download %s: %w: got %d bytes, blob has %d", where, repo.ErrIntegrity, n, size)
	}
	if sum != nil {
		if got := sum.Sum(nil); !bytes.Equal(got, resp.ContentMD5) {
			return repo.Object{}, fmt.Errorf("download %s: %w: MD5 %x, blob has Content-MD5 %x", where, repo.ErrIntegrity, got, resp.ContentMD5)
		}
	}
	obj.Size = n
	if err := tmp.Chmod(0o644); err != nil {
		return repo.Object{}, fmt.Errorf("download %s: %w", where, err)
	}
	if err := tmp.Close(); err != nil {
		return repo.Object{}, fmt.Errorf("download %s: %w", where, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return repo.Object{}, fmt.Errorf("download %s: %w", where, err)
	}
	done = true
	s.log.Debug("azure download", "blob", where, "bytes", n, "md5", sum != nil, "etag", obj.Version, "took", time.Since(start))
	return obj, nil
}
