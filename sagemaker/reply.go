package sagemaker

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/platforms/codec"
)

// baseReply is the package's one ResponseWriter between the base server
// (httpapi) and the client. It is needed where a request is served by the
// base server's own /infer handler, a v2 body that SageMaker does not
// translate, and the reply must be re-rendered in SageMaker's form: a
// binary reply gets SageMaker's content type, the multi-model routes
// re-status errors (400, 507), and a v2 line of a jsonlines body becomes
// one line of its reply. With a client writer w it passes the reply
// through, holding only error replies when hold is set; without one it
// records the whole reply. Translated requests (instances, csv) run
// through the pipeline instead (records.go) and need none of this.
type baseReply struct {
	w      http.ResponseWriter // nil: record everything
	hold   bool
	header http.Header // the recorded header, when w is nil
	status int
	held   bool // the reply is being recorded
	wrote  bool // the reply is being passed through
	body   bytes.Buffer
}

func (br *baseReply) Header() http.Header {
	if br.w != nil {
		return br.w.Header()
	}
	if br.header == nil {
		br.header = http.Header{}
	}
	return br.header
}

func (br *baseReply) WriteHeader(status int) {
	if br.wrote || br.held {
		return
	}
	br.status = status
	if br.w == nil || (br.hold && status >= 400) {
		br.held = true
		return
	}
	hdr := br.w.Header()
	if n := hdr.Get(codec.HeaderLengthName); n != "" {
		if v, err := strconv.Atoi(n); err == nil {
			hdr.Set("Content-Type", binaryContentType(v))
		}
		hdr.Del(codec.HeaderLengthName)
	}
	br.wrote = true
	br.w.WriteHeader(status)
}

func (br *baseReply) Write(p []byte) (int, error) {
	if !br.wrote && !br.held {
		br.WriteHeader(http.StatusOK)
	}
	if br.held {
		return br.body.Write(p)
	}
	return br.w.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (br *baseReply) Unwrap() http.ResponseWriter { return br.w }

// flush sends a held reply with the given status.
func (br *baseReply) flush(status int) {
	br.w.Header().Set("Content-Length", strconv.Itoa(br.body.Len()))
	br.w.WriteHeader(status)
	_, _ = br.w.Write(br.body.Bytes())
}

// message is the error text of a recorded failed reply.
func (br *baseReply) message() string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(br.body.Bytes(), &e) == nil && e.Error != "" {
		return e.Error
	}
	return http.StatusText(br.status)
}

// forward serves body as a v2 /infer request for model on the base
// server and records the reply.
func (h *handler) forward(r *http.Request, model string, body []byte) *baseReply {
	fwd := h.rewrite(r, "/v2/models/"+model+"/infer")
	fwd.Method = http.MethodPost
	fwd.Body = io.NopCloser(bytes.NewReader(body))
	fwd.ContentLength = int64(len(body))
	fwd.Header.Set("Content-Type", "application/json")
	fwd.Header.Del("Content-Length")
	reply := &baseReply{}
	h.api.ServeHTTP(reply, fwd)
	if reply.status == 0 {
		reply.status = http.StatusOK
	}
	return reply
}
