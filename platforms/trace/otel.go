package trace

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the spans, Triton's.
const tracerName = "triton-server"

// otelExporter is the opentelemetry mode's pipeline: an OTLP/HTTP exporter
// behind a batch span processor, in a tracer provider of the server's own
// (not the process-global one).
type otelExporter struct {
	tp     *sdktrace.TracerProvider
	tracer oteltrace.Tracer
}

func newOTelExporter(cfg Config) (*otelExporter, error) {
	url := cfg.URL
	if url == "" {
		url = DefaultURL
	}
	if !strings.Contains(url, "://") {
		// Triton's setting is documented as host:port; the exporter needs
		// a scheme.
		url = "http://" + url
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url))
	if err != nil {
		return nil, fmt.Errorf("opentelemetry trace exporter for %s: %w", url, err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", DefaultServiceName)}
	for _, kv := range cfg.Resource {
		attrs = append(attrs, attribute.String(kv[0], kv[1]))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		res = resource.NewSchemaless(attrs...)
	}
	var bsp []sdktrace.BatchSpanProcessorOption
	if cfg.BSPMaxQueueSize > 0 {
		bsp = append(bsp, sdktrace.WithMaxQueueSize(int(cfg.BSPMaxQueueSize)))
	}
	if cfg.BSPScheduleDelayMs > 0 {
		bsp = append(bsp, sdktrace.WithBatchTimeout(time.Duration(cfg.BSPScheduleDelayMs)*time.Millisecond))
	}
	if cfg.BSPMaxExportBatchSize > 0 {
		bsp = append(bsp, sdktrace.WithMaxExportBatchSize(int(cfg.BSPMaxExportBatchSize)))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, bsp...),
		sdktrace.WithResource(res),
		// The manager samples (rate, count, a caller's context); every
		// span it starts is recorded, even under a caller's unsampled
		// traceparent, as Triton forces sampling.
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	return &otelExporter{tp: tp, tracer: tp.Tracer(tracerName)}, nil
}

func (e *otelExporter) shutdown(ctx context.Context) error {
	if err := e.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flushing opentelemetry spans: %w", err)
	}
	return nil
}
