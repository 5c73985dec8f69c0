package vertex

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
)

// BinaryContentType prefixes the Content-Type of a request whose JSON header
// is followed by binary tensors; the header length follows the "=".
const BinaryContentType = "application/vnd.vertex-ai-triton.binary+json;json-header-size="

// headerSize reads the JSON header length from a Content-Type
// (triton-inference-server/server src/vertex_ai_server.cc):
// -1 when the prefix is absent (the whole body is JSON), else the value
// parsed like C's stoi and checked against the body length. The texts are
// Triton's. A body length < 0 (unknown: chunked) skips the upper bound,
// which the base server then checks against the bytes it reads.
func headerSize(contentType string, bodyLen int64) (int, error) {
	pos := strings.Index(contentType, BinaryContentType)
	if pos < 0 {
		return -1, nil
	}
	if pos != 0 {
		return 0, badRequest("expect MIME type for binary data starts with '" + BinaryContentType + "', got: " + contentType)
	}
	rest := contentType[len(BinaryContentType):]
	n, ok, inRange := codec.Stoi(rest)
	switch {
	case !ok:
		return 0, badRequest("Unable to parse inference header size, got: " + rest)
	case !inRange:
		// Triton's Vertex text, unlike its Inference-Header-Content-Length
		// one, names no range.
		return 0, badRequest("Unable to parse inference header size, value is out of range, got: " + rest)
	case n < 0 || (bodyLen >= 0 && n > bodyLen):
		return 0, badRequest("inference header size should be in range (0, " + strconv.FormatInt(max(bodyLen, 0), 10) + "), got: " + rest)
	}
	return int(n), nil
}

// rewrite clones r as a request for the base server: another method and
// path, and without the encodings the Vertex listener ignores. The chi route
// context is cleared so the base router routes afresh even when this
// handler is itself mounted on a chi router.
func rewrite(r *http.Request, method, path string) *http.Request {
	req := httpapi.Reroute(r, method, path)
	req.Header.Del("Content-Encoding")
	req.Header.Del("Accept-Encoding")
	return req
}

// rewriteStream is rewrite for a POST whose body the base server reads;
// the body's JSON length is carried only by the caller's
// Inference-Header-Content-Length.
func rewriteStream(r *http.Request, path string) *http.Request {
	req := rewrite(r, http.MethodPost, path)
	req.Header.Del(codec.HeaderLengthName)
	return req
}

// rewriteBody is rewrite for a POST whose body was already read; the body's
// JSON length is carried only by the caller's Inference-Header-Content-Length.
func rewriteBody(r *http.Request, path string, body []byte) *http.Request {
	req := rewrite(r, http.MethodPost, path)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.TransferEncoding = nil
	req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	req.Header.Del(codec.HeaderLengthName)
	return req
}

// unresolved is the health route's reply before Resolve: the base
// server's readiness answer, but a ready server's 200 becomes 400, since
// the default model is not known yet. The base route's other answers (its
// restriction 403, the 405, a drain's 503) pass through as they are. It
// rewrites a status and records nothing: Vertex keeps no recorder, since
// instances run in process (platforms/instances) and every other route
// passes the base reply through.
type unresolved struct {
	http.ResponseWriter
	wrote bool
}

func (u *unresolved) WriteHeader(status int) {
	if !u.wrote && status == http.StatusOK {
		status = http.StatusBadRequest
	}
	u.wrote = true
	u.ResponseWriter.WriteHeader(status)
}

func (u *unresolved) Write(b []byte) (int, error) {
	if !u.wrote {
		u.WriteHeader(http.StatusOK)
	}
	return u.ResponseWriter.Write(b)
}
