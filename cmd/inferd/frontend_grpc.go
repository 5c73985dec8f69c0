//go:build !inferd_sagemaker && !inferd_lambda

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/grpcapi"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/serve"
)

// grpcBuilt says the KServe v2 gRPC frontend is built in; the SageMaker
// and Lambda builds leave it out (builds.go).
const grpcBuilt = true

// grpcListener serves the gRPC API on spec and returns its actor, bound
// address and the mark that makes the API refuse new work while the
// server exits.
func grpcListener(cfg *config, spec listenSpec, srv *core.Server, loads *orca.Reporter, log *slog.Logger) (serve.Actor, string, func(), error) {
	gapi := newGRPCAPI(cfg, srv, loads, log)
	actor, addr, err := newGRPC(cfg, gapi, spec)
	return actor, addr, gapi.SetExiting, err
}

// newGRPCAPI builds the gRPC API over srv.
func newGRPCAPI(cfg *config, srv *core.Server, loads *orca.Reporter, log *slog.Logger) *grpcapi.Server {
	return grpcapi.New(srv, grpcapi.Options{ServerID: cfg.serverID, Restricted: cfg.grpcRestrictions, ResponseCompression: cfg.grpcCompression,
		Logger: log, Logs: cfg.logs, HeaderForward: cfg.grpcForward, LoadReports: loads, Trace: cfg.tracer,
		SharedMemory: cfg.regions})
}

// newGRPC serves api with the --grpc-* options (keepalive and ping
// policy, TLS, restricted protocols, response compression, as in
// triton-inference-server/server
// docs/customization_guide/inference_protocols.md) and binds spec; the
// actor serves it and drains it on stop.
func newGRPC(cfg *config, api *grpcapi.Server, spec listenSpec) (serve.Actor, string, error) {
	enforce := keepalive.EnforcementPolicy{MinTime: cfg.grpcMinPing, PermitWithoutStream: cfg.grpcPermitNoCalls}
	if cfg.grpcPingStrikes == 0 {
		// grpc-go's strike limit is fixed; 0 (unlimited) means never
		// punishing a ping.
		enforce = keepalive.EnforcementPolicy{PermitWithoutStream: true}
	}
	params := keepalive.ServerParameters{Time: cfg.grpcKeepalive, Timeout: cfg.grpcKeepTimeout}
	if cfg.grpcMaxAge > 0 {
		params.MaxConnectionAge = cfg.grpcMaxAge
	}
	if cfg.grpcMaxAgeGrace > 0 {
		params.MaxConnectionAgeGrace = cfg.grpcMaxAgeGrace
	}
	sopts := append(api.ServerOptions(), grpc.KeepaliveEnforcementPolicy(enforce), grpc.KeepaliveParams(params))
	if cfg.grpcTLS {
		creds, err := grpcTLS(cfg)
		if err != nil {
			return serve.Actor{}, "", err
		}
		sopts = append(sopts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(sopts...)
	api.Register(gs)
	ln, err := bind(spec)
	if err != nil {
		return serve.Actor{}, "", err
	}
	return serve.Actor{
		Name: spec.service,
		Run:  func() error { return gs.Serve(ln) },
		Stop: func(ctx context.Context) error {
			done := make(chan struct{})
			go func() { gs.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				gs.Stop()
			}
			return nil
		},
	}, ln.Addr().String(), nil
}

// grpcTLS is the server's TLS: its certificate and key and, with
// --grpc-use-ssl-mutual, client certificates checked against the root.
func grpcTLS(cfg *config) (credentials.TransportCredentials, error) {
	cert, err := tls.LoadX509KeyPair(cfg.grpcCert, cfg.grpcKey)
	if err != nil {
		return nil, fmt.Errorf("--grpc-server-cert/--grpc-server-key: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.grpcMTLS {
		pem, err := os.ReadFile(cfg.grpcRootCert)
		if err != nil {
			return nil, fmt.Errorf("--grpc-root-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--grpc-root-cert %s: no PEM certificate", cfg.grpcRootCert)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(tc), nil
}
