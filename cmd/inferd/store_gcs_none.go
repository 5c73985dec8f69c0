//go:build inferd_sagemaker || inferd_lambda

package main

import "log/slog"

// gcsBuilt: see store_gcs.go.
const gcsBuilt = false

func gcsStore(*config, *slog.Logger, *cloudCreds) storeOpener { return nil }
