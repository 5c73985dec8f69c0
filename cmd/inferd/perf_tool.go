//go:build !inferd_sagemaker && !inferd_vertex && !inferd_lambda

package main

import (
	"context"
	"io"

	"github.com/inferd/inferd/cmd/inferd/perf"
)

// perfMain runs `inferd perf`, the load tool; only the full build has it
// (a cloud image serves, it does not load-test).
func perfMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return perf.Main(ctx, args, stdout, stderr)
}
