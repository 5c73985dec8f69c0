package httpapi

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strconv"
	"strings"
	"sync"
)

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
