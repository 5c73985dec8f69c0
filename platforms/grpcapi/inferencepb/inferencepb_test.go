package inferencepb_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/repo/modelconfig"
)

// The RPCs of triton-inference-server/common protobuf/grpc_service.proto,
// in declaration order (the order fixes the
// method indexes of the descriptor).
var specMethods = []string{
	"ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
	"ModelInfer", "ModelStreamInfer", "ModelConfig", "ModelStatistics",
	"RepositoryIndex", "RepositoryModelLoad", "RepositoryModelUnload",
	"SystemSharedMemoryStatus", "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister",
	"CudaSharedMemoryStatus", "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister",
	"TraceSetting", "LogSettings",
}

func serviceDescriptor(t *testing.T) protoreflect.ServiceDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName("inference.GRPCInferenceService")
	if err != nil {
		t.Fatalf("service not registered: %v", err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		t.Fatalf("inference.GRPCInferenceService is a %T, not a service", d)
	}
	return sd
}

func TestServiceMethods(t *testing.T) {
	sd := serviceDescriptor(t)
	if got := string(sd.FullName()); got != "inference.GRPCInferenceService" {
		t.Fatalf("service full name = %q", got)
	}
	if got := sd.ParentFile().Package(); got != "inference" {
		t.Errorf("proto package = %q, want inference", got)
	}
	var names []string
	for i := range sd.Methods().Len() {
		names = append(names, string(sd.Methods().Get(i).Name()))
	}
	if !slices.Equal(names, specMethods) {
		t.Errorf("methods =\n%v\nwant\n%v", names, specMethods)
	}

	// Request/response types (as in Triton's grpc_service.proto).
	io := map[string][2]string{
		"ModelStreamInfer": {"ModelInferRequest", "ModelStreamInferResponse"},
	}
	for i := range sd.Methods().Len() {
		m := sd.Methods().Get(i)
		name := string(m.Name())
		want, ok := io[name]
		if !ok {
			want = [2]string{name + "Request", name + "Response"}
		}
		if got := [2]string{string(m.Input().FullName()), string(m.Output().FullName())}; got != [2]string{"inference." + want[0], "inference." + want[1]} {
			t.Errorf("%s: %s -> %s, want %s -> %s", name, got[0], got[1], want[0], want[1])
		}
		stream := name == "ModelStreamInfer"
		if m.IsStreamingClient() != stream || m.IsStreamingServer() != stream {
			t.Errorf("%s: client streaming %v, server streaming %v; want both %v",
				name, m.IsStreamingClient(), m.IsStreamingServer(), stream)
		}
	}

	// The grpc-go service description is what a server registers; its names
	// build the /inference.GRPCInferenceService/<Rpc> paths on the wire.
	desc := pb.GRPCInferenceService_ServiceDesc
	if desc.ServiceName != "inference.GRPCInferenceService" {
		t.Errorf("ServiceDesc.ServiceName = %q", desc.ServiceName)
	}
	if len(desc.Methods) != len(specMethods)-1 {
		t.Errorf("ServiceDesc has %d unary methods, want %d", len(desc.Methods), len(specMethods)-1)
	}
	if len(desc.Streams) != 1 || desc.Streams[0].StreamName != "ModelStreamInfer" ||
		!desc.Streams[0].ClientStreams || !desc.Streams[0].ServerStreams {
		t.Errorf("ServiceDesc.Streams = %+v, want one bidirectional ModelStreamInfer", desc.Streams)
	}
	if pb.GRPCInferenceService_ModelInfer_FullMethodName != "/inference.GRPCInferenceService/ModelInfer" {
		t.Errorf("ModelInfer full method = %q", pb.GRPCInferenceService_ModelInfer_FullMethodName)
	}
}

// catalogue is Triton's triton-inference-server/common
// protobuf/grpc_service.proto: every message of the service file, and every
// field as "name number type", where type is "rep T", "map<K,V>" or T, and T
// is a scalar kind or a message's full name (without the "inference."
// prefix). A trailing "oneof" marks a member of oneof parameter_choice.
var catalogue = map[string][]string{
	"ServerLiveRequest":     {},
	"ServerLiveResponse":    {"live 1 bool"},
	"ServerReadyRequest":    {},
	"ServerReadyResponse":   {"ready 1 bool"},
	"ModelReadyRequest":     {"name 1 string", "version 2 string"},
	"ModelReadyResponse":    {"ready 1 bool"},
	"ServerMetadataRequest": {},
	"ServerMetadataResponse": {
		"name 1 string", "version 2 string", "extensions 3 rep string"},
	"ModelMetadataRequest": {"name 1 string", "version 2 string"},
	"ModelMetadataResponse": {
		"name 1 string", "versions 2 rep string", "platform 3 string",
		"inputs 4 rep ModelMetadataResponse.TensorMetadata",
		"outputs 5 rep ModelMetadataResponse.TensorMetadata"},
	"ModelMetadataResponse.TensorMetadata": {
		"name 1 string", "datatype 2 string", "shape 3 rep int64"},
	"InferParameter": {
		"bool_param 1 bool oneof", "int64_param 2 int64 oneof", "string_param 3 string oneof",
		"double_param 4 double oneof", "uint64_param 5 uint64 oneof"},
	"InferTensorContents": {
		"bool_contents 1 rep bool", "int_contents 2 rep int32", "int64_contents 3 rep int64",
		"uint_contents 4 rep uint32", "uint64_contents 5 rep uint64", "fp32_contents 6 rep float",
		"fp64_contents 7 rep double", "bytes_contents 8 rep bytes"},
	"ModelInferRequest": {
		"model_name 1 string", "model_version 2 string", "id 3 string",
		"parameters 4 map<string,InferParameter>",
		"inputs 5 rep ModelInferRequest.InferInputTensor",
		"outputs 6 rep ModelInferRequest.InferRequestedOutputTensor",
		"raw_input_contents 7 rep bytes"},
	"ModelInferRequest.InferInputTensor": {
		"name 1 string", "datatype 2 string", "shape 3 rep int64",
		"parameters 4 map<string,InferParameter>", "contents 5 InferTensorContents"},
	"ModelInferRequest.InferRequestedOutputTensor": {
		"name 1 string", "parameters 2 map<string,InferParameter>"},
	"ModelInferResponse": {
		"model_name 1 string", "model_version 2 string", "id 3 string",
		"parameters 4 map<string,InferParameter>",
		"outputs 5 rep ModelInferResponse.InferOutputTensor",
		"raw_output_contents 6 rep bytes"},
	"ModelInferResponse.InferOutputTensor": {
		"name 1 string", "datatype 2 string", "shape 3 rep int64",
		"parameters 4 map<string,InferParameter>", "contents 5 InferTensorContents"},
	"ModelStreamInferResponse": {"error_message 1 string", "infer_response 2 ModelInferResponse"},
	"ModelConfigRequest":       {"name 1 string", "version 2 string"},
	"ModelConfigResponse":      {"config 1 ModelConfig"},
	"ModelStatisticsRequest":   {"name 1 string", "version 2 string"},
	"StatisticDuration":        {"count 1 uint64", "ns 2 uint64"},
	"InferStatistics": {
		"success 1 StatisticDuration", "fail 2 StatisticDuration", "queue 3 StatisticDuration",
		"compute_input 4 StatisticDuration", "compute_infer 5 StatisticDuration",
		"compute_output 6 StatisticDuration", "cache_hit 7 StatisticDuration",
		"cache_miss 8 StatisticDuration"},
	"InferResponseStatistics": {
		"compute_infer 1 StatisticDuration", "compute_output 2 StatisticDuration",
		"success 3 StatisticDuration", "fail 4 StatisticDuration",
		"empty_response 5 StatisticDuration", "cancel 6 StatisticDuration"},
	"InferBatchStatistics": {
		"batch_size 1 uint64", "compute_input 2 StatisticDuration",
		"compute_infer 3 StatisticDuration", "compute_output 4 StatisticDuration"},
	"MemoryUsage": {"type 1 string", "id 2 int64", "byte_size 3 uint64"},
	"ModelStatistics": {
		"name 1 string", "version 2 string", "last_inference 3 uint64",
		"inference_count 4 uint64", "execution_count 5 uint64",
		"inference_stats 6 InferStatistics", "batch_stats 7 rep InferBatchStatistics",
		"memory_usage 8 rep MemoryUsage",
		"response_stats 9 map<string,InferResponseStatistics>"},
	"ModelStatisticsResponse": {"model_stats 1 rep ModelStatistics"},
	"ModelRepositoryParameter": {
		"bool_param 1 bool oneof", "int64_param 2 int64 oneof",
		"string_param 3 string oneof", "bytes_param 4 bytes oneof"},
	"RepositoryIndexRequest":  {"repository_name 1 string", "ready 2 bool"},
	"RepositoryIndexResponse": {"models 1 rep RepositoryIndexResponse.ModelIndex"},
	"RepositoryIndexResponse.ModelIndex": {
		"name 1 string", "version 2 string", "state 3 string", "reason 4 string"},
	"RepositoryModelLoadRequest": {
		"repository_name 1 string", "model_name 2 string",
		"parameters 3 map<string,ModelRepositoryParameter>"},
	"RepositoryModelLoadResponse": {},
	"RepositoryModelUnloadRequest": {
		"repository_name 1 string", "model_name 2 string",
		"parameters 3 map<string,ModelRepositoryParameter>"},
	"RepositoryModelUnloadResponse":   {},
	"SystemSharedMemoryStatusRequest": {"name 1 string"},
	"SystemSharedMemoryStatusResponse": {
		"regions 1 map<string,SystemSharedMemoryStatusResponse.RegionStatus>"},
	"SystemSharedMemoryStatusResponse.RegionStatus": {
		"name 1 string", "key 2 string", "offset 3 uint64", "byte_size 4 uint64"},
	"SystemSharedMemoryRegisterRequest": {
		"name 1 string", "key 2 string", "offset 3 uint64", "byte_size 4 uint64"},
	"SystemSharedMemoryRegisterResponse":   {},
	"SystemSharedMemoryUnregisterRequest":  {"name 1 string"},
	"SystemSharedMemoryUnregisterResponse": {},
	"CudaSharedMemoryStatusRequest":        {"name 1 string"},
	"CudaSharedMemoryStatusResponse": {
		"regions 1 map<string,CudaSharedMemoryStatusResponse.RegionStatus>"},
	"CudaSharedMemoryStatusResponse.RegionStatus": {
		"name 1 string", "device_id 2 uint64", "byte_size 3 uint64"},
	"CudaSharedMemoryRegisterRequest": {
		"name 1 string", "raw_handle 2 bytes", "device_id 3 int64", "byte_size 4 uint64"},
	"CudaSharedMemoryRegisterResponse":   {},
	"CudaSharedMemoryUnregisterRequest":  {"name 1 string"},
	"CudaSharedMemoryUnregisterResponse": {},
	"TraceSettingRequest": {
		"settings 1 map<string,TraceSettingRequest.SettingValue>", "model_name 2 string"},
	"TraceSettingRequest.SettingValue": {"value 1 rep string"},
	"TraceSettingResponse": {
		"settings 1 map<string,TraceSettingResponse.SettingValue>"},
	"TraceSettingResponse.SettingValue": {"value 1 rep string"},
	"LogSettingsRequest": {
		"settings 1 map<string,LogSettingsRequest.SettingValue>"},
	"LogSettingsRequest.SettingValue": {
		"bool_param 1 bool oneof", "uint32_param 2 uint32 oneof", "string_param 3 string oneof"},
	"LogSettingsResponse": {
		"settings 1 map<string,LogSettingsResponse.SettingValue>"},
	"LogSettingsResponse.SettingValue": {
		"bool_param 1 bool oneof", "uint32_param 2 uint32 oneof", "string_param 3 string oneof"},
}

// typeName renders a field's type in the catalogue's notation.
func typeName(fd protoreflect.FieldDescriptor) string {
	if fd.IsMap() {
		return "map<" + typeName(fd.MapKey()) + "," + typeName(fd.MapValue()) + ">"
	}
	var s string
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		s = strings.TrimPrefix(string(fd.Message().FullName()), "inference.")
	case protoreflect.EnumKind:
		s = strings.TrimPrefix(string(fd.Enum().FullName()), "inference.")
	default:
		s = fd.Kind().String()
	}
	if fd.IsList() {
		s = "rep " + s
	}
	return s
}

func describeField(fd protoreflect.FieldDescriptor) string {
	s := fmt.Sprintf("%s %d %s", fd.Name(), fd.Number(), typeName(fd))
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		if od.Name() != "parameter_choice" {
			s += " oneof=" + string(od.Name())
		} else {
			s += " oneof"
		}
	}
	return s
}

// TestFieldCatalogue fails on any renamed, renumbered, retyped, added or
// removed field, and on any message the catalogue does not list.
func TestFieldCatalogue(t *testing.T) {
	file := serviceDescriptor(t).ParentFile()
	if file.Path() != "grpc_service.proto" {
		t.Errorf("file registered as %q, want grpc_service.proto (Triton's name)", file.Path())
	}
	if file.Syntax() != protoreflect.Proto3 {
		t.Errorf("syntax = %v, want proto3", file.Syntax())
	}
	seen := map[string]bool{}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(mds protoreflect.MessageDescriptors) {
		for i := range mds.Len() {
			md := mds.Get(i)
			if md.IsMapEntry() {
				continue
			}
			name := strings.TrimPrefix(string(md.FullName()), "inference.")
			seen[name] = true
			want, ok := catalogue[name]
			if !ok {
				t.Errorf("message %s is not in the spec", name)
			} else {
				var got []string
				for j := range md.Fields().Len() {
					got = append(got, describeField(md.Fields().Get(j)))
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s fields:\n got %q\nwant %q", name, got, want)
				}
			}
			walk(md.Messages())
		}
	}
	walk(file.Messages())
	for name := range catalogue {
		if !seen[name] {
			t.Errorf("spec message %s is missing", name)
		}
	}
	if file.Enums().Len() != 0 {
		t.Errorf("service file declares %d enums, want none", file.Enums().Len())
	}
}

// TestModelConfigIsShared checks that ModelConfigResponse.config is the
// repo/modelconfig message itself, not a copy.
func TestModelConfigIsShared(t *testing.T) {
	fd := (&pb.ModelConfigResponse{}).ProtoReflect().Descriptor().Fields().ByName("config")
	if fd == nil {
		t.Fatal("ModelConfigResponse has no field config")
	}
	want := (&modelconfig.ModelConfig{}).ProtoReflect().Descriptor()
	if fd.Message() != want {
		t.Errorf("config is %s from %s, want %s from %s",
			fd.Message().FullName(), fd.Message().ParentFile().Path(),
			want.FullName(), want.ParentFile().Path())
	}
	if got := want.FullName(); got != "inference.ModelConfig" {
		t.Errorf("ModelConfig full name = %q", got)
	}
}

func TestModelInferRequestRoundTrip(t *testing.T) {
	in := &pb.ModelInferRequest{
		ModelName:    "simple",
		ModelVersion: "1",
		Id:           "req-7",
		Parameters: map[string]*pb.InferParameter{
			"sequence_id":    {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 42}},
			"sequence_start": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}},
			"priority":       {ParameterChoice: &pb.InferParameter_Uint64Param{Uint64Param: 3}},
		},
		Inputs: []*pb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}, Parameters: map[string]*pb.InferParameter{
				"shared_memory_region": {ParameterChoice: &pb.InferParameter_StringParam{StringParam: "r"}},
			}},
			{Name: "INPUT2", Datatype: "FP32", Shape: []int64{2}, Contents: &pb.InferTensorContents{
				Fp32Contents: []float32{1.5, -2},
			}},
		},
		Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{
			{Name: "OUTPUT0", Parameters: map[string]*pb.InferParameter{
				"classification": {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 2}},
			}},
		},
		RawInputContents: [][]byte{make([]byte, 64), {}},
	}
	for i := range in.RawInputContents[0] {
		in.RawInputContents[0][i] = byte(i)
	}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &pb.ModelInferRequest{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, out) {
		t.Errorf("round trip changed the message:\n in %v\nout %v", in, out)
	}
	if len(out.GetRawInputContents()) != 2 || len(out.GetRawInputContents()[0]) != 64 || out.GetRawInputContents()[0][63] != 63 {
		t.Errorf("raw_input_contents = %v", out.GetRawInputContents())
	}
	// Tag of field 7, wire type 2 (length-delimited) = 0x3a, followed by the
	// 64-byte length: the raw bytes are on the wire where Triton expects them.
	if !strings.Contains(string(b), "\x3a\x40\x00\x01\x02") {
		t.Errorf("raw_input_contents[0] not encoded as field 7")
	}
}

func TestModelConfigResponseRoundTrip(t *testing.T) {
	in := &pb.ModelConfigResponse{Config: &modelconfig.ModelConfig{
		Name:         "simple",
		Platform:     "onnxruntime_onnx",
		Backend:      "onnxruntime",
		MaxBatchSize: 8,
		Input: []*modelconfig.ModelInput{
			{Name: "INPUT0", DataType: modelconfig.DataType_TYPE_INT32, Dims: []int64{16}},
		},
		Output: []*modelconfig.ModelOutput{
			{Name: "OUTPUT0", DataType: modelconfig.DataType_TYPE_INT32, Dims: []int64{16}},
		},
		SchedulingChoice: &modelconfig.ModelConfig_DynamicBatching{DynamicBatching: &modelconfig.ModelDynamicBatching{
			PreferredBatchSize: []int32{4, 8}, MaxQueueDelayMicroseconds: 100,
		}},
		Parameters: map[string]*modelconfig.ModelParameter{"k": {StringValue: "v"}},
	}}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	out := &pb.ModelConfigResponse{}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, out) {
		t.Errorf("round trip changed the message:\n in %v\nout %v", in, out)
	}
	// Field 1 of the response holds the bytes of a bare ModelConfig.
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		t.Fatalf("first field: number %d type %d, want 1 length-delimited", num, typ)
	}
	inner, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		t.Fatal("bad length prefix for field 1")
	}
	cfg := &modelconfig.ModelConfig{}
	if err := proto.Unmarshal(inner, cfg); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(cfg, in.GetConfig()) {
		t.Errorf("field 1 decodes as %v, want %v", cfg, in.GetConfig())
	}
}

// TestHealthServiceAvailable checks that the standard health service
// Triton serves (grpc.health.v1.Health/Check) comes from grpc-go itself.
func TestHealthServiceAvailable(t *testing.T) {
	if got := healthpb.Health_ServiceDesc.ServiceName; got != "grpc.health.v1.Health" {
		t.Errorf("health service name = %q", got)
	}
	md := (&healthpb.HealthCheckRequest{}).ProtoReflect().Descriptor()
	if fd := md.Fields().ByName("service"); fd == nil || fd.Number() != 1 || fd.Kind() != protoreflect.StringKind {
		t.Errorf("HealthCheckRequest.service = %v, want field 1 string", fd)
	}
	md = (&healthpb.HealthCheckResponse{}).ProtoReflect().Descriptor()
	if fd := md.Fields().ByName("status"); fd == nil || fd.Number() != 1 || fd.Kind() != protoreflect.EnumKind {
		t.Errorf("HealthCheckResponse.status = %v, want field 1 enum", fd)
	}
	if got := healthpb.HealthCheckResponse_SERVING.Number(); got != 1 {
		t.Errorf("SERVING = %d, want 1", got)
	}
}

// liveServer answers ServerLive and echoes stream requests; every other
// method is left to the generated Unimplemented stubs.
type liveServer struct {
	pb.UnimplementedGRPCInferenceServiceServer
}

func (liveServer) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

func (liveServer) ModelStreamInfer(s grpc.BidiStreamingServer[pb.ModelInferRequest, pb.ModelStreamInferResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		err = s.Send(&pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{
			ModelName: req.GetModelName(), Id: req.GetId(), RawOutputContents: req.GetRawInputContents(),
		}})
		if err != nil {
			return err
		}
	}
}

// TestBindings serves the generated service and grpc-go's health service on
// an in-memory listener and calls both through the generated client.
func TestBindings(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	pb.RegisterGRPCInferenceServiceServer(srv, liveServer{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c := pb.NewGRPCInferenceServiceClient(conn)
	live, err := c.ServerLive(ctx, &pb.ServerLiveRequest{})
	if err != nil || !live.GetLive() {
		t.Fatalf("ServerLive = %v, %v", live, err)
	}
	if _, err := c.ServerReady(ctx, &pb.ServerReadyRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("unimplemented ServerReady: err = %v, want Unimplemented", err)
	}

	stream, err := c.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id := fmt.Sprint(i)
		if err := stream.Send(&pb.ModelInferRequest{ModelName: "simple", Id: id, RawInputContents: [][]byte{{byte(i)}}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		r := resp.GetInferResponse()
		if r.GetId() != id || r.GetModelName() != "simple" || len(r.GetRawOutputContents()) != 1 || r.GetRawOutputContents()[0][0] != byte(i) {
			t.Errorf("stream response %d = %v", i, resp)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}

	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Health/Check = %v, %v; want SERVING", hc, err)
	}
}
