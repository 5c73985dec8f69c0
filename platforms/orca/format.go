package orca

import (
	"encoding/base64"
	"fmt"
	"strconv"

	xds "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/platforms/tritonjson"
)

// Format is a report's text form, as endpoint-load-metrics-format asks.
type Format int

// The formats a request may ask for.
const (
	Text Format = iota + 1
	JSON
)

// ParseFormat reads endpoint-load-metrics-format: exactly "text" or
// "json", as Triton compares it.
func ParseFormat(v string) (Format, error) {
	switch v {
	case "text":
		return Text, nil
	case "json":
		return JSON, nil
	}
	return 0, fmt.Errorf("unsupported %s %q: expected 'text' or 'json'", RequestHeader, v)
}

// AppendKV appends Triton's /generate report (OrcaKVMetricHeader in
// triton-inference-server/server src/orca_http.cc) exactly:
//
//	TEXT named_metrics.kv_cache_utilization=0.500000, named_metrics.max_token_capacity=4096
//	JSON {"named_metrics":{"kv_cache_utilization":0.5,"max_token_capacity":4096}}
func AppendKV(b []byte, f Format, util float64, capacity uint64) []byte {
	if f == JSON {
		b = append(b, `JSON {"named_metrics":{"`+KVUtilization+`":`...)
		b = tritonjson.AppendFloat(b, util)
		b = append(b, `,"`+KVTokenCapacity+`":`...)
		b = strconv.AppendUint(b, capacity, 10)
		return append(b, "}}"...)
	}
	b = append(b, "TEXT named_metrics."+KVUtilization+"="...)
	b = strconv.AppendFloat(b, util, 'f', 6, 64) // C's %f
	b = append(b, ", named_metrics."+KVTokenCapacity+"="...)
	return strconv.AppendUint(b, capacity, 10)
}

// AppendReport appends a full report in Envoy's forms (what its ORCA
// parser reads):
//
//	TEXT cpu_utilization:0.25, mem_utilization:0.5, ..., named_metrics.queue_size:2
//	JSON {"cpu_utilization":0.25,...,"named_metrics":{"queue_size":2.0}}
//
// Fields are always present (a zero is a figure, not an absence) and named
// metrics come in byte order. Triton's own text form separates names and
// values with '=', which Envoy's TEXT parser refuses; /generate keeps it
// for Triton's clients and adds the binary header that Envoy reads first.
func AppendReport(b []byte, f Format, rep *xds.OrcaLoadReport) []byte {
	fields := [...]struct {
		name string
		v    float64
	}{
		{"cpu_utilization", rep.GetCpuUtilization()},
		{"mem_utilization", rep.GetMemUtilization()},
		{"application_utilization", rep.GetApplicationUtilization()},
		{"rps_fractional", rep.GetRpsFractional()},
		{"eps", rep.GetEps()},
	}
	named := names(rep.GetNamedMetrics())
	if f == JSON {
		b = append(b, "JSON {"...)
		for _, fl := range fields {
			b = append(append(append(b, '"'), fl.name...), `":`...)
			b = append(tritonjson.AppendFloat(b, fl.v), ',')
		}
		b = append(b, `"named_metrics":{`...)
		for i, k := range named {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(tritonjson.AppendString(b, k), ':')
			b = tritonjson.AppendFloat(b, rep.GetNamedMetrics()[k])
		}
		return append(b, "}}"...)
	}
	b = append(b, "TEXT "...)
	for i, fl := range fields {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(append(b, fl.name...), ':')
		b = formatFloat(b, fl.v)
	}
	for _, k := range named {
		b = append(append(append(b, ", named_metrics."...), k...), ':')
		b = formatFloat(b, rep.GetNamedMetrics()[k])
	}
	return b
}

// Binary is the report as endpoint-load-metrics-bin carries it: standard
// base64 of the OrcaLoadReport protobuf (deterministic, so equal reports
// give equal headers).
func Binary(rep *xds.OrcaLoadReport) (string, error) {
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(rep)
	if err != nil {
		return "", fmt.Errorf("marshal load report: %w", err)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}
