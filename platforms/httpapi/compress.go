package httpapi

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/inferd/inferd/core"
)

// decompress inflates a request body sent with Content-Encoding gzip or
// deflate. Triton's decoder auto-detects the gzip or zlib wrapper for both,
// so either works under either name.
func decompress(body []byte, limit int64) ([]byte, error) {
	if len(body) == 0 {
		return nil, core.Errorf(core.CodeInvalidArg, "nothing to be decompressed")
	}
	var r io.Reader
	var err error
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		r, err = gzip.NewReader(bytes.NewReader(body))
	} else {
		r, err = zlib.NewReader(bytes.NewReader(body))
	}
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArg, "failed to decompress the request body: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, core.Errorf(core.CodeInvalidArg, "failed to decompress the request body: %v", err)
	}
	if int64(len(out)) > limit {
		return nil, core.Errorf(core.CodeInvalidArg, "Decompressed data size exceeds the maximum allowed value of %d bytes. Use --http-max-input-size to increase the limit.", limit)
	}
	return out, nil
}

// responseEncoding picks gzip, deflate or "" (identity) from Accept-Encoding
// with Triton's exact rules: the weight is read only from a ";q=" suffix,
// names compare exactly, the strictly highest positive weight wins and ties
// go to the first listed.
func responseEncoding(header string) string {
	best, bestQ := "", 0.0
	for _, tok := range strings.Split(header, ",") {
		tok = strings.TrimLeft(tok, " ")
		name, q := tok, 1.0
		if i := strings.Index(tok, ";q="); i >= 0 {
			v, err := strconv.ParseFloat(tok[i+3:], 64)
			if err != nil {
				continue
			}
			name, q = tok[:i], v
		}
		switch name {
		case "identity", "gzip", "deflate":
			if q > bestQ {
				best, bestQ = name, q
			}
		}
	}
	if best == "identity" {
		return ""
	}
	return best
}

// Compressors are pooled: a fresh gzip or zlib writer allocates about a
// megabyte of tables, which dominated CPU under load before pooling.
var (
	gzipPool = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	zlibPool = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}
)

type resetWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// compress encodes parts (JSON header then blobs) as one gzip or zlib stream.
func compress(encoding string, parts [][]byte) ([]byte, error) {
	pool := &zlibPool
	if encoding == "gzip" {
		pool = &gzipPool
	}
	w := pool.Get().(resetWriter)
	defer pool.Put(w)
	var buf bytes.Buffer
	w.Reset(&buf)
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readAll reads a body. Content-Length sizes the buffer up front, but only
// up to 16 MiB: a client may claim more than it sends, and the claim alone
// must not commit memory.
func readAll(r io.Reader, contentLength int64) ([]byte, error) {
	var buf bytes.Buffer
	if contentLength > 0 {
		buf.Grow(int(min(contentLength, 16<<20)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}
