package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Options.Workers (--http-thread-count) bounds the requests decoded or
// encoded at once: with the one slot taken, a request waits; once it is
// free, the request is served.
func TestWorkersBoundDecoding(t *testing.T) {
	api, _ := newAPI(t, writeRepo(t, standardModels(t)), serverOpts{api: Options{Workers: 1}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	url := "http://" + ln.Addr().String() + "/v2/models/id1/infer"
	body := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}`
	send := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		must(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	release := api.work() // the one slot is busy
	if err := send(300 * time.Millisecond); err == nil {
		t.Fatal("a request was decoded while the only worker slot was taken")
	}
	release()
	if err := send(10 * time.Second); err != nil {
		t.Fatalf("request after the slot freed: %v", err)
	}
	if api.workers == nil || cap(api.workers) != 1 {
		t.Fatal("Workers did not size the slots")
	}
}
