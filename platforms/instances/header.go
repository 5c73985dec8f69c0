package instances

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"

	"github.com/inferd/inferd/platforms/codec"
)

// Header is a cloud request's headers as the inference pipeline reads them
// (infer.Metadata): the trace context, and the headers to forward to the
// model (--http-header-forward-pattern).
type Header http.Header

// Carrier is the W3C trace context's carrier.
func (h Header) Carrier(context.Context) propagation.TextMapCarrier {
	return propagation.HeaderCarrier(h)
}

// Headers are those forwarded to the model: without the encodings and the
// JSON header length, which the cloud listeners take for themselves (a
// translated body has neither).
func (h Header) Headers(context.Context) map[string][]string {
	fwd := http.Header(h).Clone()
	for _, k := range [...]string{"Content-Encoding", "Accept-Encoding", codec.HeaderLengthName} {
		fwd.Del(k)
	}
	return fwd
}
