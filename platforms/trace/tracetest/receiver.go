// Package tracetest is an OTLP/HTTP trace receiver for tests: it decodes
// the exporter's real protobuf requests (the OpenTelemetry collector's
// ExportTraceServiceRequest) and keeps the spans.
package tracetest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, with the ids in hex and its resource's
// attributes.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Attrs                     map[string]string
	Events                    []string
	Resource                  map[string]string
	Start, End                uint64 // unix ns
	Error                     bool
}

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	URL string // the traces endpoint, .../v1/traces

	mu    sync.Mutex
	spans []Span
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	rc := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(srv.Close)
	rc.URL = srv.URL + "/v1/traces"
	return rc
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				rc.spans = append(rc.spans, span(sp, res))
			}
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func span(sp *tracepb.Span, res map[string]string) Span {
	s := Span{TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
		ParentID: hex.EncodeToString(sp.GetParentSpanId()), Name: sp.GetName(), Attrs: attrs(sp.GetAttributes()),
		Resource: res, Start: sp.GetStartTimeUnixNano(), End: sp.GetEndTimeUnixNano(),
		Error: sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
	for _, e := range sp.GetEvents() {
		s.Events = append(s.Events, e.GetName())
	}
	return s
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(x.IntValue, 10)
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Spans returns the spans received so far.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Span(nil), rc.spans...)
}

// Wait waits until at least n spans arrived (or the timeout passed) and
// returns them.
func (rc *Receiver) Wait(n int, timeout time.Duration) []Span {
	deadline := time.Now().Add(timeout)
	for {
		s := rc.Spans()
		if len(s) >= n || time.Now().After(deadline) {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
}
