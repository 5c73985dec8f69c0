package grpcapi

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// TestFileOverrideOption: core.Options.NoFileOverrides
// (--allow-model-file-override=false) refuses a load whose parameters
// carry files with INVALID_ARGUMENT and a message naming the option, and
// loads nothing; a config-only override still loads. Without it both
// load, as in Triton.
func TestFileOverrideOption(t *testing.T) {
	const config = `{"backend":"identity","max_batch_size":0,"input":[{"name":"INPUT0","data_type":"TYPE_INT32","dims":[1]}],"output":[{"name":"OUTPUT0","data_type":"TYPE_INT32","dims":[1]}]}`
	str := func(s string) *pb.ModelRepositoryParameter {
		return &pb.ModelRepositoryParameter{ParameterChoice: &pb.ModelRepositoryParameter_StringParam{StringParam: s}}
	}
	for _, refuse := range []bool{false, true} {
		root := t.TempDir()
		servertest.Must(t, os.MkdirAll(filepath.Join(root, "idm", "1"), 0o755))
		servertest.Must(t, os.WriteFile(filepath.Join(root, "idm", "config.pbtxt"), []byte(`backend: "identity"`), 0o644))
		h := start(t, servertest.Options{Repo: root, Mode: core.ModeExplicit, NoFileOverrides: refuse}, Options{})
		client, c := h.client, h.core

		_, err := client.RepositoryModelLoad(ctx(t), &pb.RepositoryModelLoadRequest{ModelName: "uploaded", Parameters: map[string]*pb.ModelRepositoryParameter{
			"config":           str(config),
			"file:1/model.bin": {ParameterChoice: &pb.ModelRepositoryParameter_BytesParam{BytesParam: []byte("w")}},
		}})
		if refuse {
			wantStatus(t, err, codes.InvalidArgument, "load failed for model 'uploaded': loading model files from the load request ('file:' parameters) is disabled by --allow-model-file-override=false")
		} else {
			servertest.Must(t, err)
		}
		if ready := c.ModelReady("uploaded", core.LatestVersion); ready == refuse {
			t.Fatalf("refuse=%v: the uploaded model's readiness is %v", refuse, ready)
		}
		_, err = client.RepositoryModelLoad(ctx(t), &pb.RepositoryModelLoadRequest{ModelName: "idm", Parameters: map[string]*pb.ModelRepositoryParameter{"config": str(config)}})
		if err != nil || !c.ModelReady("idm", core.LatestVersion) {
			t.Fatalf("refuse=%v: a config-only override: %v", refuse, err)
		}
	}
}
