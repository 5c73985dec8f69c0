package gcs

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"

	"github.com/inferd/inferd/repo"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkKey refuses keys that would land outside the folder they are
// downloaded into, whatever path the caller derived from them.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("object key %q is not a file name", key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == ".." {
			return fmt.Errorf("object key %q escapes the repository", key)
		}
	}
	return nil
}

// Download copies the object to path through a temporary file beside it.
// The bytes are counted and hashed (CRC32C always, MD5 when the object has
// one; composite objects do not) as they are written, and the file is
// renamed into place only when all match the object's metadata.
func (s *Store) Download(ctx context.Context, key, path string) (repo.Object, error) {
	if err := checkKey(key); err != nil {
		return repo.Object{}, fmt.Errorf("download from %s: %w", s.root, err)
	}
	name := s.objectName(key)
	start := time.Now()
	oh := s.bh.Object(name)
	attrs, err := oh.Attrs(ctx)
	if err != nil {
		return repo.Object{}, s.opErr("download", name, err)
	}
	obj := repo.Object{Key: key, Size: attrs.Size, Version: strconv.FormatInt(attrs.Generation, 10), Modified: attrs.Updated}

	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w", s.bucket, name, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".part-*")
	if err != nil {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w", s.bucket, name, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	// Pinning the generation makes the bytes those the attributes describe
	// even if the object is replaced meanwhile.
	oh = oh.Generation(attrs.Generation)
	gz := attrs.ContentEncoding == "gzip"
	if gz {
		// GCS would gunzip on the fly (decompressive transcoding), and the
		// stored checksums then describe bytes we never see; fetch what is
		// stored, check it, and gunzip here.
		oh = oh.ReadCompressed(true)
	}
	// The client checks CRC32C itself on full reads; switching that off
	// leaves one check, ours, which also covers MD5 and size and always
	// reports a mismatch as repo.ErrIntegrity.
	r, err := oh.NewReader(ctx, storage.WithDisableReaderChecksum())
	if err != nil {
		return repo.Object{}, s.opErr("download", name, err)
	}
	defer r.Close()

	crc := crc32.New(castagnoli)
	hashes := []io.Writer{crc}
	var md5h hash.Hash
	if len(attrs.MD5) > 0 {
		md5h = md5.New()
		hashes = append(hashes, md5h)
	}
	cr := &countingReader{r: io.TeeReader(r, io.MultiWriter(hashes...))}
	gzErr, err := copyContent(tmp, cr, gz)
	if err != nil {
		if strings.Contains(err.Error(), "bad CRC") {
			// Only reached if the client's own check is ever on again.
			return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w: %s", s.bucket, name, repo.ErrIntegrity, oneLine(err))
		}
		return repo.Object{}, s.opErr("download", name, err)
	}
	if cr.n != attrs.Size {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w: got %d bytes, object has %d", s.bucket, name, repo.ErrIntegrity, cr.n, attrs.Size)
	}
	if got := crc.Sum32(); got != attrs.CRC32C {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w: CRC32C %08x, object has %08x", s.bucket, name, repo.ErrIntegrity, got, attrs.CRC32C)
	}
	if md5h != nil {
		if got := md5h.Sum(nil); !bytes.Equal(got, attrs.MD5) {
			return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w: MD5 %x, object has %x", s.bucket, name, repo.ErrIntegrity, got, attrs.MD5)
		}
	}
	if gzErr != nil {
		// The stored bytes are the uploaded ones; they just are not gzip.
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: object has Content-Encoding gzip but is not valid gzip: %w", s.bucket, name, gzErr)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w", s.bucket, name, err)
	}
	if err := tmp.Close(); err != nil {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w", s.bucket, name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return repo.Object{}, fmt.Errorf("download gs://%s/%s: %w", s.bucket, name, err)
	}
	done = true
	s.log.Debug("gcs download", "object", "gs://"+s.bucket+"/"+name, "bytes", attrs.Size, "generation", attrs.Generation, "took", time.Since(start))
	return obj, nil
}

// copyContent writes src to dst, gunzipping it when gz is set. All of src is
// read either way, so the hashes cover every stored byte. err is a failure
// to read src or write dst; gzErr says the stored bytes are not valid gzip,
// which only counts once they are known to be the stored bytes.
func copyContent(dst io.Writer, src *countingReader, gz bool) (gzErr, err error) {
	// A large buffer keeps the number of reads (and hash updates) down; the
	// writer is wrapped so *os.File's ReadFrom does not pick its own 32 KiB.
	buf := make([]byte, 1<<20)
	w := struct{ io.Writer }{dst}
	if !gz {
		_, err := io.CopyBuffer(w, src, buf)
		return nil, err
	}
	zr, gzErr := gzip.NewReader(src)
	if gzErr == nil {
		_, gzErr = io.CopyBuffer(w, zr, buf)
	}
	if src.err != nil {
		return nil, src.err
	}
	if gzErr != nil && !errors.Is(gzErr, gzip.ErrChecksum) && !errors.Is(gzErr, gzip.ErrHeader) &&
		!errors.Is(gzErr, io.ErrUnexpectedEOF) && !errors.Is(gzErr, io.EOF) {
		return nil, gzErr // writing dst failed
	}
	// Trailing bytes after the gzip stream, or the rest after a bad one.
	_, err = io.CopyBuffer(io.Discard, src, buf)
	return gzErr, err
}

// countingReader counts the bytes read and keeps the first read error, so
// a broken connection is not mistaken for bad gzip data.
type countingReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}
