//go:build inferd_vertex

package main

import "log/slog"

// s3Built: see store_s3.go.
const s3Built = false

func s3Store(*config, *slog.Logger, *cloudCreds) storeOpener { return nil }
