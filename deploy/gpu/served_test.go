package gpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// served are the three settings TestServed reads, set by check.sh.
type served struct {
	httpAddr, grpcAddr string
	models             []string
}

func servedFromEnv() (served, bool) {
	s := served{httpAddr: os.Getenv("INFERD_CHECK_HTTP"), grpcAddr: os.Getenv("INFERD_CHECK_GRPC")}
	if m := os.Getenv("INFERD_CHECK_MODELS"); m != "" {
		s.models = strings.Split(m, ",")
	}
	return s, len(s.models) > 0 && s.httpAddr != "" && s.grpcAddr != ""
}

// addSubInputs are the INPUT0 and INPUT1 every add/sub model gets, and the
// OUTPUT0 (sum) and OUTPUT1 (difference) it must return.
func addSubInputs() (a, b, sum, diff []int32) {
	for i := range int32(16) {
		a, b = append(a, i), append(b, 3-i*i)
		sum, diff = append(sum, i+3-i*i), append(diff, i-(3-i*i))
	}
	return a, b, sum, diff
}

// TestServed infers on each add/sub model of a running inferd over HTTP
// (JSON tensors) and gRPC (raw tensors) and checks both outputs: the client
// half of check.sh's end-to-end checks, since the inferd binary has no
// client of its own. check.sh sets INFERD_CHECK_HTTP and INFERD_CHECK_GRPC
// (host:port) and INFERD_CHECK_MODELS (comma-separated names).
func TestServed(t *testing.T) {
	s, ok := servedFromEnv()
	if !ok {
		t.Skip("INFERD_CHECK_HTTP, INFERD_CHECK_GRPC and INFERD_CHECK_MODELS are unset: deploy/gpu/check.sh sets them")
	}
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := inferencepb.NewGRPCInferenceServiceClient(conn)
	for _, m := range s.models {
		// A TensorRT instance may build its engine on the first request.
		t.Run("http/"+m, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := inferHTTP(ctx, "http://"+s.httpAddr, m); err != nil {
				t.Error(err)
			}
		})
		t.Run("grpc/"+m, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := inferGRPC(ctx, client, m); err != nil {
				t.Error(err)
			}
		})
	}
}

type jsonTensor struct {
	Name     string  `json:"name"`
	Shape    []int64 `json:"shape"`
	Datatype string  `json:"datatype"`
	Data     []int32 `json:"data"`
}

func inferHTTP(ctx context.Context, base, model string) error {
	a, b, sum, diff := addSubInputs()
	body, err := json.Marshal(map[string][]jsonTensor{"inputs": {
		{Name: "INPUT0", Shape: []int64{1, 16}, Datatype: "INT32", Data: a},
		{Name: "INPUT1", Shape: []int64{1, 16}, Datatype: "INT32", Data: b},
	}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v2/models/"+model+"/infer", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var got struct {
		Error   string       `json:"error"`
		Outputs []jsonTensor `json:"outputs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return fmt.Errorf("status %d, reply not JSON: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, got.Error)
	}
	outs := map[string][]int32{}
	for _, o := range got.Outputs {
		outs[o.Name] = o.Data
	}
	return compare(outs, sum, diff)
}

func inferGRPC(ctx context.Context, client inferencepb.GRPCInferenceServiceClient, model string) error {
	a, b, sum, diff := addSubInputs()
	raw := func(v []int32) []byte {
		out := make([]byte, 0, 4*len(v))
		for _, x := range v {
			out = binary.LittleEndian.AppendUint32(out, uint32(x))
		}
		return out
	}
	resp, err := client.ModelInfer(ctx, &inferencepb.ModelInferRequest{
		ModelName: model,
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			{Name: "INPUT0", Datatype: "INT32", Shape: []int64{1, 16}},
			{Name: "INPUT1", Datatype: "INT32", Shape: []int64{1, 16}},
		},
		RawInputContents: [][]byte{raw(a), raw(b)},
	})
	if err != nil {
		return err
	}
	if len(resp.RawOutputContents) != len(resp.Outputs) {
		return fmt.Errorf("%d outputs, %d raw contents", len(resp.Outputs), len(resp.RawOutputContents))
	}
	outs := map[string][]int32{}
	for i, o := range resp.Outputs {
		r := resp.RawOutputContents[i]
		v := make([]int32, len(r)/4)
		for j := range v {
			v[j] = int32(binary.LittleEndian.Uint32(r[4*j:]))
		}
		outs[o.Name] = v
	}
	return compare(outs, sum, diff)
}

func compare(outs map[string][]int32, sum, diff []int32) error {
	if !slices.Equal(outs["OUTPUT0"], sum) || !slices.Equal(outs["OUTPUT1"], diff) {
		return fmt.Errorf("OUTPUT0 %v OUTPUT1 %v, want %v and %v", outs["OUTPUT0"], outs["OUTPUT1"], sum, diff)
	}
	return nil
}
