//go:build !inferd_vertex

package main

import (
	"context"
	"log/slog"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/credfile"
	"github.com/inferd/inferd/repo/s3"
)

// s3Built says s3:// repositories are served (repo/s3, the AWS SDK); the
// Vertex build leaves them out (builds.go).
const s3Built = true

// s3Store opens s3:// roots, with root's entry of
// TRITON_CLOUD_CREDENTIAL_PATH when the file is given.
func s3Store(cfg *config, log *slog.Logger, creds *cloudCreds) storeOpener {
	return func(ctx context.Context, root string) (repo.Store, error) {
		opts := s3.Options{Logger: log, Getenv: cfg.env.get}
		if creds != nil {
			f, label, err := creds.entry("s3", root, (*credfile.File).S3Prefix)
			if err != nil {
				return nil, err
			}
			c, _ := f.S3(root)
			opts.Creds = &s3.Credentials{KeyID: c.KeyID, Secret: c.SecretKey, SessionToken: c.SessionToken,
				Region: c.Region, Profile: c.Profile, Source: label}
		}
		return s3.Open(ctx, root, opts)
	}
}
