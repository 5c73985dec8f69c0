package deploy

import (
	"strings"
	"testing"
)

// TestPerCloudBuilds checks that each cloud's image and manifest use its
// build (cmd/inferd's tags, docs/deploy.md): the Dockerfile's build stage
// takes BUILD_TAGS (empty: the full binary, the default image as before),
// and `make images` and the deploy/ guides pass the cloud's tag.
func TestPerCloudBuilds(t *testing.T) {
	df := read(t, "docker/Dockerfile")
	for _, want := range []string{"ARG BUILD_TAGS=\n", `go build -trimpath -tags "${BUILD_TAGS}"`} {
		if !strings.Contains(df, want) {
			t.Errorf("docker/Dockerfile lacks %q", want)
		}
	}
	for _, c := range []struct{ file, want string }{
		{"../Makefile", "--target cloud-sagemaker --build-arg BUILD_TAGS=inferd_sagemaker -t $(IMAGE):sagemaker"},
		{"../Makefile", "--target cloud --build-arg BUILD_TAGS=inferd_vertex -t $(IMAGE):vertex"},
		{"../Makefile", "-f deploy/docker/Dockerfile.lambda -t $(IMAGE):lambda"},
		{"../Makefile", "-f deploy/docker/Dockerfile -t $(IMAGE):cpu ."},
		{"docker/Dockerfile.lambda", "-tags lambda.norpc,inferd_lambda"},
		{"sagemaker/README.md", "--target cloud-sagemaker --build-arg BUILD_TAGS=inferd_sagemaker"},
		{"sagemaker/cloudformation.yaml", "--target cloud-sagemaker --build-arg BUILD_TAGS=inferd_sagemaker"},
		{"vertex/README.md", "--target cloud --build-arg BUILD_TAGS=inferd_vertex"},
		{"lambda/README.md", "inferd_lambda"},
	} {
		if !strings.Contains(read(t, c.file), c.want) {
			t.Errorf("%s lacks %q", c.file, c.want)
		}
	}
}
