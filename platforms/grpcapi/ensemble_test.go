package grpcapi

import (
	"testing"

	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestEnsembleOverGRPC runs a two-step ensemble of `simple` through
// ModelInfer and ModelStreamInfer on a real listener, and reads its
// metadata's platform.
func TestEnsembleOverGRPC(t *testing.T) {
	root := servertest.WriteRepo(t, map[string]servertest.Model{
		"simple": simpleModel(),
		"chain": servertest.Ensemble(servertest.EnsembleConfig("chain", 8,
			[]string{"INPUT0:TYPE_INT32:[ 16 ]", "INPUT1:TYPE_INT32:[ 16 ]"}, []string{"OUTPUT0:TYPE_INT32:[ 16 ]", "OUTPUT1:TYPE_INT32:[ 16 ]"},
			// One step whose outputs are the ensemble's, so checkSimple applies.
			servertest.Step{Model: "simple", In: []string{"INPUT0=INPUT0", "INPUT1=INPUT1"}, Out: []string{"OUTPUT0=OUTPUT0", "OUTPUT1=OUTPUT1"}})),
	})
	h := start(t, servertest.Options{Repo: root}, Options{})
	c := ctx(t)
	req := simpleRequest(true)
	req.ModelName = "chain"
	resp, err := h.client.ModelInfer(c, req)
	servertest.Must(t, err)
	resp.ModelName = "simple"
	checkSimple(t, resp)
	st, err := h.client.ModelStreamInfer(c)
	servertest.Must(t, err)
	servertest.Must(t, st.Send(req))
	sr, err := st.Recv()
	servertest.Must(t, err)
	if sr.GetErrorMessage() != "" {
		t.Fatal(sr.GetErrorMessage())
	}
	sr.InferResponse.ModelName = "simple"
	checkSimple(t, sr.GetInferResponse())
	md, err := h.client.ModelMetadata(c, &pb.ModelMetadataRequest{Name: "chain"})
	if err != nil || md.GetPlatform() != "ensemble" {
		t.Fatal(md, err)
	}
}
