//go:build !inferd_sagemaker && !inferd_lambda

package main

import (
	"context"
	"log/slog"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/credfile"
	"github.com/inferd/inferd/repo/gcs"
)

// gcsBuilt says gs:// repositories are served (repo/gcs). The SageMaker
// and Lambda builds leave them out: cloud.google.com/go/storage is what
// brings gRPC's xds, RLS, Envoy's protos and Cloud Monitoring into the
// binary (BENCHMARKS.md section 4).
const gcsBuilt = true

// gcsStore opens gs:// roots, with root's entry of
// TRITON_CLOUD_CREDENTIAL_PATH when the file is given.
func gcsStore(cfg *config, log *slog.Logger, creds *cloudCreds) storeOpener {
	return func(ctx context.Context, root string) (repo.Store, error) {
		opts := gcs.Options{Logger: log, Getenv: cfg.env.get}
		if creds != nil {
			f, label, err := creds.entry("gs", root, (*credfile.File).GCSPrefix)
			if err != nil {
				return nil, err
			}
			opts.CredentialsFile, _ = f.GCS(root)
			opts.CredentialsSource = label
		}
		return gcs.Open(ctx, root, opts)
	}
}
