package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// cloudImageTarget is issue 37's goal for a per-cloud CPU image's
// uncompressed tree; logged against, not enforced (BENCHMARKS.md,
// "Per-cloud builds").
const cloudImageTarget = 100_000_000

// imgCloudBuilds runs in TestImage's tree once its own sub-tests are done:
// for the per-cloud builds that deploy/docker/Dockerfile makes
// (BUILD_TAGS), the binary built the same way replaces the full one at
// the same path, the tree is measured, and the build's mode answers the
// README's request: SageMaker's `serve` as the sagemaker stage, the HTTP
// server as the default stage for Vertex's build. full is the full
// image's tree size, which each must be under.
func imgCloudBuilds(t *testing.T, root, work string, spec imageSpec, full int64, reqPath, reqBody string, wantOut any) {
	for _, b := range []struct{ name, tag string }{{"sagemaker", "inferd_sagemaker"}, {"vertex", "inferd_vertex"}} {
		t.Run(b.name, func(t *testing.T) {
			bin := filepath.Join(work, "inferd-"+b.name)
			build := exec.Command("go", "build", "-trimpath", "-tags", b.tag, "-ldflags", "-s -w -X main.version=image-test", "-o", bin, "./cmd/inferd")
			build.Dir = ".."
			build.Env = append(os.Environ(), "CGO_ENABLED=1")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build -tags %s: %v\n%s", b.tag, err, out)
			}
			imgCopyFile(t, bin, filepath.Join(root, spec.binary), 0o755)
			total, top := imgTreeSize(t, root)
			met := "met"
			if total > cloudImageTarget {
				met = "not met"
			}
			t.Logf("inferd:%s uncompressed tree: %.1f MB (%d bytes; target %d MB %s); largest: %s",
				b.name, float64(total)/1e6, total, cloudImageTarget/1_000_000, met, top)
			if total >= full {
				t.Errorf("the %s build's tree (%d bytes) is not smaller than the full one's (%d)", b.name, total, full)
			}
			var p *imageProc
			var base, infer string
			if b.name == "sagemaker" {
				port := imgFreePort(t)
				p = startImage(t, root, spec, spec.users["sagemaker"],
					[]string{"SAGEMAKER_BIND_TO_PORT=" + strconv.Itoa(port), "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME=simple"}, "serve")
				base = fmt.Sprintf("http://127.0.0.1:%d", port)
				p.waitReady(t, base+"/ping")
				infer = base + "/invocations"
			} else {
				httpPort, metricsPort := imgFreePort(t), imgFreePort(t)
				p = startImage(t, root, spec, spec.users["default"], nil, "--model-repository="+spec.modelDst,
					"--http-port="+strconv.Itoa(httpPort), "--metrics-port="+strconv.Itoa(metricsPort), "--grpc-port="+strconv.Itoa(imgFreePort(t)))
				base = fmt.Sprintf("http://127.0.0.1:%d", httpPort)
				p.waitReady(t, base+"/v2/health/ready")
				infer = base + reqPath
			}
			imgCheckInfer(t, infer, reqBody, wantOut)
			p.stop(t)
		})
	}
}
