package grpcapi

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"

	"github.com/inferd/inferd/core"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/trace"
)

// TraceSetting answers, and with settings first updates, a trace setting
// (triton-inference-server/server src/grpc/grpc_server.cc, RegisterTrace):
// the model's when model_name is given (it must be
// READY), else the global one. Keys are read in Triton's order
// (trace_file, trace_level, trace_rate, trace_count, log_frequency); an
// empty value list falls back to the global or start-up value; unknown
// keys are ignored.
func (s *Server) TraceSetting(_ context.Context, in *pb.TraceSettingRequest) (*pb.TraceSettingResponse, error) {
	model := in.GetModelName()
	if model != "" && !protocol.ModelReady(s.core, model, core.LatestVersion) {
		return nil, statusError(trace.ErrUnknownModel(model))
	}
	if settings := in.GetSettings(); len(settings) > 0 {
		var u trace.Update
		if _, ok := settings["trace_file"]; ok {
			return nil, statusError(trace.ErrFileUpdate)
		}
		if v, ok := settings["trace_level"]; ok {
			if len(v.GetValue()) == 0 {
				u.Clear("trace_level")
			} else if err := u.SetLevels(v.GetValue()); err != nil {
				return nil, statusError(err)
			}
		}
		for _, key := range [...]string{"trace_rate", "trace_count", "log_frequency"} {
			v, ok := settings[key]
			if !ok {
				continue
			}
			switch vals := v.GetValue(); len(vals) {
			case 0:
				u.Clear(key)
			case 1:
				if err := u.Set(key, vals[0], trace.GRPCCountMsg); err != nil {
					return nil, statusError(err)
				}
			default:
				return nil, statusError(core.Errorf(core.CodeInvalidArg, "expect only 1 value for '%s'", key))
			}
		}
		if !u.Empty() {
			if err := s.opts.Trace.Update(model, u); err != nil {
				return nil, statusError(err)
			}
		}
	}
	st := s.opts.Trace.Settings(model)
	out := map[string]*pb.TraceSettingResponse_SettingValue{
		"trace_level": {Value: st.Level.Names()},
		"trace_rate":  {Value: []string{strconv.FormatUint(uint64(st.Rate), 10)}},
		"trace_count": {Value: []string{strconv.FormatInt(int64(st.Count), 10)}},
		"trace_mode":  {Value: []string{st.Mode.String()}},
	}
	if st.Mode == trace.ModeTriton {
		out["log_frequency"] = &pb.TraceSettingResponse_SettingValue{Value: []string{strconv.FormatUint(uint64(st.LogFrequency), 10)}}
		out["trace_file"] = &pb.TraceSettingResponse_SettingValue{Value: []string{st.File}}
	}
	for _, kv := range st.Extra {
		v := out[kv[0]]
		if v == nil {
			v = &pb.TraceSettingResponse_SettingValue{}
			out[kv[0]] = v
		}
		v.Value = append(v.Value, kv[1]) // a repeated key (resource) lists every value
	}
	return &pb.TraceSettingResponse{Settings: out}, nil
}

// mdCarrier reads the W3C trace context from a call's incoming metadata
// without copying it.
type mdCarrier struct{ ctx context.Context }

func (c mdCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(string, string) {}

func (c mdCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}
