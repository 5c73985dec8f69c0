package sagemaker

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/infer"
	"github.com/inferd/inferd/platforms/instances"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// Record formats of batch transform (and of any /invocations caller):
// Triton has neither, it reads every body as JSON. Each record is one
// inference request: an {"instances": [...]} record or a csv chunk is
// translated by platforms/instances and runs through the inference
// pipeline (platforms/infer) as a v2 /infer body would; a v2 body line is
// served by the base server's /infer route. The records of a body run as
// that many requests (at most recordWorkers at once, which lets a dynamic
// batcher batch them).
const (
	jsonLinesMIME = "application/jsonlines"
	csvMIME       = "text/csv"
)

// recordWorkers bounds the requests of one record body in flight at once.
const recordWorkers = 8

// recordFormat is the record format a Content-Type names, "" for none.
func recordFormat(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	switch mt {
	case jsonLinesMIME, csvMIME:
		return mt
	}
	return ""
}

// acceptsJSONLines reports whether Accept asks for application/jsonlines
// before text/csv.
func acceptsJSONLines(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		switch mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part)); mt {
		case jsonLinesMIME:
			return true
		case csvMIME:
			return false
		}
	}
	return false
}

// records serves an /invocations body of jsonlines or csv records for
// model. A failed record fails the body: the reply is that record's
// error, its message prefixed with the line (or row) it came from, so a
// transform job's log names it.
func (h *handler) records(w http.ResponseWriter, r *http.Request, model, format string) error {
	if h.restricted(w, r, "inference") {
		return nil
	}
	contentType, body, err := h.recordsReply(r, model, format)
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, contentType, body)
	return nil
}

// recordsReply is the reply to a records body: its content type and body.
func (h *handler) recordsReply(r *http.Request, model, format string) (string, []byte, error) {
	if strings.Contains(model, "/") {
		return "", nil, h.unknownModel(model, false)
	}
	limit := h.api.MaxInputSize()
	body, err := httpapi.ReadBody(r, limit)
	if err != nil {
		if tl := (*httpapi.BodyTooLarge)(nil); errors.As(err, &tl) {
			err = codec.JSONTooLargeError(tl.Size, limit)
		}
		return "", nil, err
	}
	mv, release, err := h.core.Acquire(model, core.LatestVersion)
	if err != nil {
		return "", nil, err
	}
	cfg := mv.Config
	release()
	if format == jsonLinesMIME {
		out, err := h.jsonLines(r, model, cfg, body)
		return jsonLinesMIME, out, err
	}
	return h.csvRows(r, model, cfg, body)
}

// jsonLines serves application/jsonlines: every non-blank line is a v2
// request body or an {"instances": [...]} record, answered by a line of
// the v2 reply or of {"predictions": [...]}, in the order of the lines.
// Every record is decoded before any runs, so a bad one fails the body
// at once.
func (h *handler) jsonLines(r *http.Request, model string, cfg *modelconfig.ModelConfig, body []byte) ([]byte, error) {
	type line struct {
		no    int
		v2    []byte             // a v2 body, sent as it is
		req   *core.InferRequest // else the instances' request
		n     int                // its instances
		reply []byte
	}
	var lines []line
	opts := instances.Options{MaxInputSize: h.api.MaxInputSize(), SkipUnknown: true}
	for i, text := range bytes.Split(body, []byte("\n")) {
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		l := line{no: i + 1, v2: text}
		q, err := lineInstances(text)
		if err == nil && q != nil {
			l.v2, l.n = nil, q.Len()
			release := h.api.Work() // --http-thread-count bounds decoding, as on /infer
			l.req, err = q.Decode(r.Context(), model, cfg, opts)
			release()
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.no, recordError(err))
		}
		lines = append(lines, l)
	}
	batching := cfg.GetMaxBatchSize() > 0
	meta := recordHeader(r)
	errs := h.runRecords(model, len(lines), func(i int) (err error) {
		l := &lines[i]
		if l.req == nil {
			l.reply, err = h.forwardLine(r, model, l.v2)
			return err
		}
		l.reply, err = h.predict(r, model, meta, l.req, func(resp *core.InferResponse) ([]byte, error) {
			b, err := instances.AppendPredictions([]byte(`{"predictions":`), resp.Outputs, l.n, batching)
			return append(b, '}'), err
		})
		return err
	})
	var out bytes.Buffer
	for i, l := range lines {
		if errs[i] != nil {
			return nil, fmt.Errorf("line %d: %w", l.no, errs[i])
		}
		out.Write(l.reply)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// lineInstances parses one jsonlines line: its instances request, or nil
// for a v2 body. Records carry no request parameters.
func lineInstances(text []byte) (*instances.Request, error) {
	doc, err := tritonjson.ParseJSON(text)
	if err != nil {
		return nil, httpapi.Errorf(http.StatusBadRequest, "not a JSON object: %v", err)
	}
	root := doc.Root()
	if !root.IsObject() {
		return nil, httpapi.Errorf(http.StatusBadRequest, "not a JSON object")
	}
	q, ok := instances.FromObject(root)
	if !ok {
		return nil, nil
	}
	q.Params = tritonjson.Value{}
	return q, nil
}

// recordHeader is the headers a records body's requests forward to the
// model and trace by: the body's, as a JSON request's.
func recordHeader(r *http.Request) instances.Header {
	hdr := r.Header.Clone()
	hdr.Set("Content-Type", "application/json")
	hdr.Del("Content-Length")
	return instances.Header(hdr)
}

// runRecords calls run for records 0 to n-1, at most recordWorkers at
// once, and returns their errors. A panic fails its record with a 500,
// as httpapi.Recover answers a panicking request, and the other records
// go on.
func (h *handler) runRecords(model string, n int, run func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, recordWorkers)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() {
				if v := recover(); v != nil {
					h.log.Error("panic serving a record; answered 500", "model", model, "panic", fmt.Sprint(v))
					errs[i] = core.Errorf(core.CodeInternal, "failed to process the request for model '%s': internal error: %v", model, v)
				}
				<-sem
				wg.Done()
			}()
			errs[i] = run(i)
		}()
	}
	wg.Wait()
	return errs
}

// predict runs one record's request, decoded already, on model through
// the inference pipeline as the base /infer route runs a v2 body, and
// renders its response in a worker slot before the call ends.
func (h *handler) predict(r *http.Request, model string, meta instances.Header, req *core.InferRequest, render func(*core.InferResponse) ([]byte, error)) (out []byte, err error) {
	ctx := r.Context()
	path := "/v2/models/" + model + "/infer"
	pipe := h.api.Pipeline()
	if pipe.Logs.Verbose() > 0 {
		// The base route's request line (httpapi.LogRequests), as when
		// each record was sent to it.
		pipe.Logs.LogHTTP(ctx, pipe.Log, http.MethodPost, (&url.URL{Path: path}).EscapedPath())
	}
	pipe.Run(ctx, &infer.Call{
		Protocol: infer.HTTP, Route: path, Model: model, Version: core.LatestVersion,
		Decoupled: httpapi.ErrDecoupled, Meta: meta,
	}, func(_ *modelconfig.ModelConfig, fh *protocol.ForwardedHeaders) (*core.InferRequest, *shm.Holds, error) {
		if fh != nil {
			return req, nil, fh.Apply(req) // after the body, as the base route does
		}
		return req, nil, nil
	}, infer.Reply{
		// No load report: one reply answers the body's many requests.
		Render: func(resp *core.InferResponse, rerr error) {
			if err = rerr; err != nil {
				return
			}
			release := h.api.Work()
			defer release()
			out, err = render(resp)
		},
	}, nil)
	return out, err
}

// forwardLine serves a v2 body line on the base server's /infer route,
// whose reply becomes the line, or the line's error.
func (h *handler) forwardLine(r *http.Request, model string, body []byte) ([]byte, error) {
	reply := h.forward(r, model, body)
	switch {
	case reply.status != http.StatusOK:
		return nil, httpapi.Errorf(reply.status, "%s", reply.message())
	case reply.header.Get(codec.HeaderLengthName) != "":
		return nil, httpapi.Errorf(http.StatusBadRequest, "binary outputs cannot be returned as %s", jsonLinesMIME)
	}
	return reply.body.Bytes(), nil
}
