//go:build !inferd_sagemaker && !inferd_vertex && !inferd_lambda

package main

import (
	"context"
	"log/slog"

	"github.com/inferd/inferd/repo"
	"github.com/inferd/inferd/repo/as"
	"github.com/inferd/inferd/repo/credfile"
)

// asBuilt says as:// repositories are served (repo/as, the Azure SDK);
// only the full build has them.
const asBuilt = true

// asStore opens as:// roots, with root's entry of
// TRITON_CLOUD_CREDENTIAL_PATH when the file is given.
func asStore(cfg *config, log *slog.Logger, creds *cloudCreds) storeOpener {
	return func(ctx context.Context, root string) (repo.Store, error) {
		opts := as.Options{Logger: log, Getenv: cfg.env.get}
		if creds != nil {
			f, label, err := creds.entry("as", root, (*credfile.File).ASPrefix)
			if err != nil {
				return nil, err
			}
			c, _ := f.AS(root)
			opts.Creds = &as.Credentials{Account: c.AccountStr, Key: c.AccountKey, AuthType: c.AuthType, ClientID: c.ClientID, Source: label}
		}
		return as.Open(ctx, root, opts)
	}
}
