package httpapi

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// bareRequest is a v2 infer request as a plain Go server would declare it
// for encoding/json.
type bareRequest struct {
	ID     string `json:"id,omitempty"`
	Inputs []struct {
		Name       string         `json:"name"`
		Shape      []int64        `json:"shape"`
		Datatype   string         `json:"datatype"`
		Parameters map[string]any `json:"parameters,omitempty"`
		Data       []int32        `json:"data"`
	} `json:"inputs"`
	Outputs []struct {
		Name       string         `json:"name"`
		Parameters map[string]any `json:"parameters,omitempty"`
	} `json:"outputs,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// startBareServer serves, on a loopback listener configured as startServer's,
// a handler that decodes a v2 JSON infer body with encoding/json and answers
// reply: the floor of any Go HTTP inference server, with no model, routing,
// validation or scheduling. It returns the URL to post to.
func startBareServer(t testing.TB, reply []byte) string {
	t.Helper()
	length := strconv.Itoa(len(reply))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req bareRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Inputs) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", length)
		_, _ = w.Write(reply)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String() + "/v2/models/simple/infer"
}
