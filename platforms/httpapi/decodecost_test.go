package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferd/inferd/internal/servertest"
)

// manyParamsBody is an infer request for id1 whose "parameters" object
// holds n members "<prefix><i>":<i>, then tail.
func manyParamsBody(n int, prefix, tail string) []byte {
	b := append([]byte(`{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[1]}],"parameters":{`), servertest.ParamMembers(n, prefix)...)
	return append(append(b, tail...), "}}"...)
}

// listen serves h on a loopback listener until the test ends.
func listen(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String()
}

// reply is one answer of sendAsync.
type reply struct {
	servertest.Reply
	took time.Duration
}

// sendAsync posts body in the background; the reply comes on the channel.
func sendAsync(url string, header http.Header, body []byte) <-chan reply {
	c := make(chan reply, 1)
	go func() {
		start := time.Now()
		r := servertest.SendBody(url, header, bytes.NewReader(body), int64(len(body)))
		c <- reply{r, time.Since(start)}
	}()
	return c
}

// await waits up to d for a reply.
func await(t *testing.T, c <-chan reply, d time.Duration, what string) reply {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(d):
		t.Fatalf("%s: no reply after %v", what, d)
	}
	return reply{}
}

// A request whose parameters object has 300,000 members (4.4 MB) is
// decoded in time linear in its size. Triton looks each listed name up
// again, so a scan per member made such a request cost minutes of CPU in a
// worker slot (--http-thread-count), during which a one-element infer
// waited. The bound, a minute for all of it, is far beyond what a linear
// decoder needs on a slow machine and far below what a quadratic one does
// (170 s for one such request).
func TestManyParametersDecodedInLinearTime(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 4 MB requests")
	}
	api := mustAPI(t, Options{Workers: 1})
	read := make(chan struct{}, 8)
	url := listen(t, signalBodies(api, read)) + "/v2/models/id1/infer"
	const n = 300_000
	const bound = time.Minute
	cases := []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"distinct names", manyParamsBody(n, "p", ""), 200, `"data":[1.0]`},
		// Names cut at their NUL all find the last member, named "x".
		{"NUL names finding the last member", manyParamsBody(n, `x\u0000`, `,"x":"last"`), 200, `"data":[1.0]`},
		{"NUL name without its prefix, last", manyParamsBody(n, "p", `,"k\u0000":1`), 500, `{"error":"parameter key 'k' was not found in the JSON"}`},
	}
	started := time.Now()
	replies := make([]<-chan reply, len(cases))
	for i, c := range cases {
		replies[i] = sendAsync(url, nil, c.body)
	}
	// Once the large bodies are read, a small request queues for the one
	// slot behind them.
	for range cases {
		select {
		case <-read:
		case <-time.After(bound):
			t.Fatal("the large bodies were not read")
		}
	}
	small := sendAsync(url, nil, []byte(`{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[1]}]}`))
	for i, c := range cases {
		r := await(t, replies[i], bound, c.name)
		if r.Err != nil || r.Status != c.status || !strings.Contains(r.Body, c.want) {
			t.Errorf("%s: %d %.200q (%v), want %d %s", c.name, r.Status, r.Body, r.Err, c.status, c.want)
		}
		t.Logf("%s: %d bytes answered in %v", c.name, len(c.body), r.took.Round(time.Millisecond))
	}
	r := await(t, small, bound-time.Since(started), "one-element infer")
	if r.Err != nil || r.Status != 200 {
		t.Fatalf("one-element infer: %d %s (%v)", r.Status, r.Body, r.Err)
	}
	t.Logf("one-element infer answered in %v", r.took.Round(time.Millisecond))
}

// mustAPI is the API over the standard models, with opts.
func mustAPI(t *testing.T, opts Options) *Server {
	t.Helper()
	api, _ := newAPI(t, writeRepo(t, standardModels(t)), serverOpts{api: opts})
	return api
}

// gzipped compresses b.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// paddedInfer is a one-element infer request for id1 padded with n
// spaces, which the JSON parser skips: a body that inflates to any size.
func paddedInfer(n int) []byte {
	return append([]byte(`{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":[1]}]}`), bytes.Repeat([]byte{' '}, n)...)
}

// TestCompressedBodiesInflateInSlot: a gzip or deflate body is read whole
// first, without a worker slot (--http-thread-count), then inflated and
// decoded in one, so no more bodies inflate at once than there are slots,
// and a client that is slow to send holds none.
func TestCompressedBodiesInflateInSlot(t *testing.T) {
	gz := http.Header{"Content-Encoding": {"gzip"}}
	t.Run("inflation waits for the slot", func(t *testing.T) {
		const limit = 1 << 20
		api := mustAPI(t, Options{Workers: 1, MaxInputSize: limit})
		url := listen(t, api) + "/v2/models/id1/infer"
		release := api.work() // the one slot is busy
		// A body inflating past the limit: refused only once inflated.
		answer := sendAsync(url, gz, gzipped(make([]byte, 2*limit)))
		select {
		case r := <-answer:
			release()
			t.Fatalf("answered %d %s while the only slot was taken: inflated outside it", r.Status, r.Body)
		case <-time.After(300 * time.Millisecond):
		}
		if n := api.inflating.peak.Load(); n != 0 {
			t.Fatalf("%d bodies inflated while the only slot was taken", n)
		}
		release()
		r := await(t, answer, time.Minute, "after the slot freed")
		want := `{"error":"Decompressed data size exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size to increase the limit."}`
		if r.Status != 400 || r.Body != want {
			t.Fatalf("%d %s, want 400 %s", r.Status, r.Body, want)
		}
		if n := api.inflating.peak.Load(); n != 1 {
			t.Fatalf("%d bodies inflated, want 1", n)
		}
	})
	t.Run("no more inflate at once than there are slots", func(t *testing.T) {
		const workers, clients = 2, 12
		api := mustAPI(t, Options{Workers: workers, MaxInputSize: 8 << 20})
		url := listen(t, api) + "/v2/models/id1/infer"
		body := gzipped(paddedInfer(4 << 20))
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := servertest.SendBody(url, gz, bytes.NewReader(body), int64(len(body)))
				if r.Err != nil || r.Status != 200 {
					t.Errorf("client %d: %d %.200s (%v)", i, r.Status, r.Body, r.Err)
				}
			}()
		}
		wg.Wait()
		if n := api.inflating.peak.Load(); n < 1 || n > workers {
			t.Fatalf("at most %d bodies inflated at once, want 1 to %d", n, workers)
		}
	})
	t.Run("a slow sender holds no slot", func(t *testing.T) {
		api := mustAPI(t, Options{Workers: 1})
		url := listen(t, api) + "/v2/models/id1/infer"
		body := gzipped(paddedInfer(1 << 20))
		pr, pw := io.Pipe()
		slow := make(chan servertest.Reply, 1)
		go func() { slow <- servertest.SendBody(url, gz, pr, -1) }()
		_, err := pw.Write(body[:len(body)/2])
		must(t, err)
		// While the gzip body stalls halfway, the one slot serves others.
		r := await(t, sendAsync(url, nil, paddedInfer(0)), time.Minute, "infer beside a stalled gzip body")
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		_, err = pw.Write(body[len(body)/2:])
		must(t, err)
		must(t, pw.Close())
		if r := <-slow; r.Status != 200 {
			t.Fatalf("stalled gzip body: %d %.200s (%v)", r.Status, r.Body, r.Err)
		}
	})
	t.Run("incompressible body within the limit", func(t *testing.T) {
		// Stored blocks make the compressed body a little larger than the
		// inflated one; it passes as long as the latter is within the
		// limit.
		const limit = 1 << 20
		url := listen(t, mustAPI(t, Options{MaxInputSize: limit})) + "/v2/models/id1/infer"
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.NoCompression)
		must(t, err)
		_, _ = zw.Write(paddedInfer(limit - len(paddedInfer(0))))
		must(t, zw.Close())
		if buf.Len() <= limit {
			t.Fatalf("stored body of %d bytes is not larger than the limit", buf.Len())
		}
		if r := servertest.SendBody(url, gz, &buf, int64(buf.Len())); r.Status != 200 {
			t.Fatalf("%d %.200s", r.Status, r.Body)
		}
	})
	t.Run("compressed body past any inflation within the limit", func(t *testing.T) {
		const limit = 1 << 20
		url := listen(t, mustAPI(t, Options{MaxInputSize: limit})) + "/v2/models/id1/infer"
		body := &servertest.Zeros{N: 2 * limit}
		r := servertest.SendBody(url, gz, body, -1)
		want := `{"error":"Decompressed data size exceeds the maximum allowed value of 1048576 bytes. Use --http-max-input-size to increase the limit."}`
		if r.Status != 400 || r.Body != want {
			t.Fatalf("%d %s, want 400 %s", r.Status, r.Body, want)
		}
	})
}

// bodyRead signals once when a request's body has been read to its end.
type bodyRead struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *bodyRead) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

// signalBodies serves h, sending on read each time a request's body has
// been read to its end.
func signalBodies(h http.Handler, read chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &bodyRead{ReadCloser: r.Body, done: func() { read <- struct{}{} }}
		h.ServeHTTP(w, r)
	})
}

// TestGoneClientIsNotDecoded: a request whose client goes away while it
// waits for a worker slot gives up waiting, rather than decoding a body
// for nobody once a slot frees.
func TestGoneClientIsNotDecoded(t *testing.T) {
	api := mustAPI(t, Options{Workers: 1})
	read := make(chan struct{})
	served := make(chan struct{})
	url := listen(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &bodyRead{ReadCloser: r.Body, done: func() { close(read) }}
		api.ServeHTTP(w, r)
		close(served)
	})) + "/v2/models/id1/infer"
	release := api.work() // the one slot is busy
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	body := gzipped(paddedInfer(1 << 20))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Encoding", "gzip")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-read:
	case <-time.After(time.Minute):
		t.Fatal("the server did not read the body")
	}
	cancel() // the client goes away while the request waits for the slot
	select {
	case <-served:
	case <-time.After(time.Minute):
		t.Fatal("the request still waits for the slot after its client went away")
	}
	if n := api.inflating.peak.Load(); n != 0 {
		t.Fatalf("%d bodies inflated for a client that went away", n)
	}
}
