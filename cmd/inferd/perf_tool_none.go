//go:build inferd_sagemaker || inferd_vertex || inferd_lambda

package main

import (
	"context"
	"fmt"
	"io"
)

func perfMain(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %v\n", progName(), notInBuild("`inferd perf` (the load tool)"))
	return 2
}
