package servertest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"time"
)

// Zeros reads N zero bytes, or never ends when N < 0, without allocating:
// the body of a client that sends far more than a server may read.
type Zeros struct{ N int64 }

func (z *Zeros) Read(p []byte) (int, error) {
	if z.N == 0 {
		return 0, io.EOF
	}
	if z.N > 0 && int64(len(p)) > z.N {
		p = p[:z.N]
	}
	clear(p)
	if z.N > 0 {
		z.N -= int64(len(p))
	}
	return len(p), nil
}

// Reply is what SendBody got back.
type Reply struct {
	Status int
	Body   string
	Err    error
}

// SendBody posts body to rawURL over its own connection, writing and
// reading at once as a real client does, so a reply that comes before the
// whole body is sent is seen (Go's client may report the write error
// instead). size is the Content-Length, or -1 for a chunked body.
func SendBody(rawURL string, header http.Header, body io.Reader, size int64) Reply {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Reply{Err: err}
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		return Reply{Err: err}
	}
	defer conn.Close()
	req, err := http.NewRequest(http.MethodPost, rawURL, io.NopCloser(body))
	if err != nil {
		return Reply{Err: err}
	}
	req.ContentLength = size
	for k, vs := range header {
		req.Header[k] = vs
	}
	go func() { _ = req.Write(conn) }()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return Reply{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Body: string(b), Err: err}
}

// Allocated runs f and returns the bytes the process allocated meanwhile.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
