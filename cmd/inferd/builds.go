package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/inferd/inferd/cmd/inferd/options"
)

// One source tree gives four binaries (docs/deploy.md): inferd, with
// everything, and one per cloud, chosen with a build tag, that leaves out
// the repository drivers and frontends the cloud never uses, so that their
// code is neither shipped nor mapped:
//
//	inferd_sagemaker  inferd-sagemaker  S3, HTTP, SageMaker
//	inferd_vertex     inferd-vertex     GCS, HTTP and gRPC, Vertex AI
//	inferd_lambda     inferd-lambda     S3, HTTP, the Lambda adapter
//
// The per-cloud builds keep the local response cache and leave out the
// Redis one: go-redis and what it pulls in are 8 MB of each binary, a
// twelfth of the CPU image (BENCHMARKS.md "Per-cloud builds").
//
// Each optional part is wired in one file with its build constraint and
// a stub beside it for the builds without it (store_*.go, frontend_*.go,
// perf_tool*.go, cache_redis*.go); the stub's xxxBuilt constant is false.

// errNotInBuild is what a command line or environment asking for a part
// this build leaves out gets, wrapped with the part and the build.
var errNotInBuild = errors.New("not in this build")

// notInBuild is the error for a part this build leaves out.
func notInBuild(part string) error {
	return fmt.Errorf("%s is %w: the %s build leaves it out (the full inferd build has it; docs/deploy.md)", part, errNotInBuild, buildName)
}

// frontendGroup is the option group of an optional frontend
// (options.Groups) and the option that turns it on.
type frontendGroup struct {
	group, allow, what string
	built              bool
}

func frontendGroups() []frontendGroup {
	return []frontendGroup{
		{"GRPC", "allow-grpc", "the gRPC frontend", grpcBuilt},
		{"Sagemaker", "allow-sagemaker", "the SageMaker frontend", sageMakerBuilt},
		{"Vertex", "allow-vertex-ai", "the Vertex AI frontend", vertexBuilt},
	}
}

// checkBuild refuses what this build cannot serve, before anything
// starts: an option of a frontend it leaves out, the environment of a
// platform it leaves out, a repository whose driver it leaves out. As
// tritonserver built without a frontend (TRITON_ENABLE_GRPC=OFF, ...) has
// no such options at all (triton-inference-server/server
// src/command_line_parser.cc), they fail the start rather than being
// ignored; only turning the frontend off (--allow-grpc=false, as the
// SageMaker serve script passes) is accepted.
func checkBuild(v *options.Values, c *config) error {
	for _, o := range options.All() {
		for _, g := range frontendGroups() {
			if g.built || o.Group != g.group || !v.Given(o.Name) {
				continue
			}
			if (o.Name == g.allow && !v.Bool(o.Name)) || o.Name == "grpc-load-report-every-call" {
				// Off is what this build is; load reports go on HTTP too.
				continue
			}
			return notInBuild(fmt.Sprintf("--%s asks for %s, which", o.Name, g.what))
		}
	}
	if !grpcBuilt {
		c.allowGRPC = false // Triton's default is on
	}
	if !vertexBuilt && c.allowVertex {
		return notInBuild("AIP_MODE=PREDICTION asks for the Vertex AI frontend, which")
	}
	if !lambdaBuilt && c.env.get("AWS_LAMBDA_RUNTIME_API") != "" {
		return notInBuild("AWS_LAMBDA_RUNTIME_API asks for the AWS Lambda adapter, which")
	}
	if !redisBuilt && c.responseCache.name == "redis" {
		return notInBuild("--cache-config=redis asks for the Redis response cache, which")
	}
	drivers := map[string]bool{"s3": s3Built, "gs": gcsBuilt, "as": asBuilt}
	for _, root := range c.repos {
		scheme, _, remote := strings.Cut(root, "://")
		if built, known := drivers[scheme]; remote && known && !built {
			return fmt.Errorf("--model-repository=%s: %w", root, notInBuild(scheme+":// repositories need a driver that"))
		}
	}
	return nil
}
