package grpcapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/repo/modelconfig"
)

func startConfined(t *testing.T) pb.GRPCInferenceServiceClient {
	t.Helper()
	root := t.TempDir()
	servertest.WriteConfineSeq(t, root)
	return start(t, servertest.Options{Repo: root, Mode: core.ModeExplicit, Startup: []string{"seq"}, NoFileOverrides: true}, Options{}).client
}

// The review's data_file finding over gRPC, with
// --allow-model-file-override=false: each load override answers
// INVALID_ARGUMENT naming the field and the path, within two minutes (a
// FIFO or /dev/zero never holds it), the secret appears in no reply, and
// the serving copy answers a fresh sequence from its zero state.
func TestConfinedDataFileGRPC(t *testing.T) {
	client := startConfined(t)
	const field = "state input 'STATE_IN' initial_state data_file"
	for _, tc := range []struct{ dims, data, want string }{
		{"1", `data_file: "../../secret.bin"`, field + " '../../secret.bin' names a path outside the model directory"},
		{"1", `data_file: "../../../../../../../../../etc/passwd"`, field + " '../../../../../../../../../etc/passwd' names a path outside the model directory"},
		{"1", `data_file: "link"`, field + " 'link' names a path outside the model directory"},
		{"1", `data_file: "/dev/zero"`, field + " '/dev/zero' names a path outside the model directory"},
		{"1", `data_file: "fifo"`, field + " 'fifo' is not a regular file"},
		{"17179869184", `zero_data: true`, "'initial_state' of state input 'STATE_IN' with dims [17179869184] would take more than 1073741824 bytes, this server's limit"},
	} {
		t.Run(tc.data+tc.dims, func(t *testing.T) {
			cfg, err := modelconfig.Parse([]byte(servertest.ConfineSeqConfig(tc.dims, tc.data)))
			servertest.Must(t, err)
			js, err := modelconfig.MarshalJSON(cfg)
			servertest.Must(t, err)
			c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err = client.RepositoryModelLoad(c, &pb.RepositoryModelLoadRequest{ModelName: "seq", Parameters: map[string]*pb.ModelRepositoryParameter{
				"config": {ParameterChoice: &pb.ModelRepositoryParameter_StringParam{StringParam: string(js)}},
			}})
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) || !strings.HasPrefix(st.Message(), "load failed for model 'seq': ") {
				t.Fatalf("load: %v %q, want INVALID_ARGUMENT naming %q", st.Code(), st.Message(), tc.want)
			}
			servertest.NoSecret(t, st.Message())

			resp, err := client.ModelInfer(ctx(t), &pb.ModelInferRequest{ModelName: "seq",
				Parameters: map[string]*pb.InferParameter{
					"sequence_id":    {ParameterChoice: &pb.InferParameter_Int64Param{Int64Param: 7}},
					"sequence_start": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}},
					"sequence_end":   {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}},
				},
				Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT", Datatype: "INT32", Shape: []int64{1, 1}}},
				RawInputContents: [][]byte{int32s([]int32{5})},
			})
			servertest.Must(t, err)
			servertest.NoSecret(t, prototext.Format(resp))
			if got := decodeInt32s(resp.GetRawOutputContents()[0]); len(got) != 1 || got[0] != 0 {
				t.Fatalf("seq after the refused load: OUTPUT %v, want [0]", got)
			}
		})
	}
}
