package grpcapi

import (
	"context"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/logging"
)

// LogSettings reports the log settings and, when the request names some,
// changes them first (triton-inference-server/server src/grpc/grpc_server.cc,
// RegisterLogging): keys in Triton's order, the
// first error ending the call with the earlier keys applied; unknown keys
// are ignored.
func (s *Server) LogSettings(_ context.Context, req *pb.LogSettingsRequest) (*pb.LogSettingsResponse, error) {
	if err := applyLogSettings(s.logs, req.GetSettings()); err != nil {
		return nil, statusError(err)
	}
	st := s.logs.Load()
	str := func(v string) *pb.LogSettingsResponse_SettingValue {
		return &pb.LogSettingsResponse_SettingValue{ParameterChoice: &pb.LogSettingsResponse_SettingValue_StringParam{StringParam: v}}
	}
	flag := func(v bool) *pb.LogSettingsResponse_SettingValue {
		return &pb.LogSettingsResponse_SettingValue{ParameterChoice: &pb.LogSettingsResponse_SettingValue_BoolParam{BoolParam: v}}
	}
	return &pb.LogSettingsResponse{Settings: map[string]*pb.LogSettingsResponse_SettingValue{
		"log_file":    str(s.logs.File()),
		"log_info":    flag(st.Info),
		"log_warning": flag(st.Warning),
		"log_error":   flag(st.Error),
		"log_verbose_level": {ParameterChoice: &pb.LogSettingsResponse_SettingValue_Uint32Param{
			Uint32Param: st.Verbose}},
		"log_format": str(st.Format.String()),
	}}, nil
}

func applyLogSettings(logs *logging.Settings, settings map[string]*pb.LogSettingsRequest_SettingValue) error {
	if _, ok := settings["log_file"]; ok {
		return logging.ErrFileFixed
	}
	for _, sw := range logging.Switches {
		v, ok := settings[sw.Key]
		if !ok {
			continue
		}
		p, ok := v.GetParameterChoice().(*pb.LogSettingsRequest_SettingValue_BoolParam)
		if !ok {
			return invalidArg("expect boolean for '%s'", sw.Key)
		}
		logs.Update(func(st *logging.State) { sw.Set(st, p.BoolParam) })
	}
	if v, ok := settings["log_verbose_level"]; ok {
		p, ok := v.GetParameterChoice().(*pb.LogSettingsRequest_SettingValue_Uint32Param)
		if !ok {
			return invalidArg("expect int32 for 'log_verbose_level'")
		}
		logs.Update(func(st *logging.State) { st.Verbose = p.Uint32Param })
	}
	if v, ok := settings["log_format"]; ok {
		p, ok := v.GetParameterChoice().(*pb.LogSettingsRequest_SettingValue_StringParam)
		if !ok {
			return invalidArg("expect string for 'log_format'")
		}
		// Only Triton's two formats: json is a start-up choice.
		f, ok := logging.ParseFormat(p.StringParam)
		if !ok || f == logging.FormatJSON {
			return invalidArg("invalid argument for log_format, got: %s", p.StringParam)
		}
		logs.Update(func(st *logging.State) { st.Format = f })
	}
	return nil
}
