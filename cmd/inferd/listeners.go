package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/orca"
	"github.com/inferd/inferd/platforms/serve"
)

// listenSpec is one listener the server opens.
type listenSpec struct {
	service string // as Triton names it in errors: HTTP, metrics, SageMaker, Vertex AI
	addr    string
	port    int
	reuse   bool // SO_REUSEPORT (--reuse-http-port)
}

func (l listenSpec) hostPort() string { return net.JoinHostPort(l.addr, strconv.Itoa(l.port)) }

// listeners lists the listeners cfg asks for and applies Triton's start-up
// rules (triton-inference-server/server src/command_line_parser.cc): two
// services may not share an address and
// port, and with --sagemaker-safe-port-range every listener but
// SageMaker's must use a port in the range.
func listeners(cfg *config) ([]listenSpec, error) {
	var out []listenSpec
	if cfg.allowHTTP {
		out = append(out, listenSpec{"HTTP", cfg.httpAddress, cfg.httpPort, cfg.reuseHTTPPort})
	}
	if cfg.allowGRPC {
		out = append(out, listenSpec{"GRPC", cfg.grpcAddress, cfg.grpcPort, cfg.reuseGRPCPort})
	}
	if cfg.allowSageMaker {
		out = append(out, listenSpec{service: "SageMaker", addr: "0.0.0.0", port: cfg.sageMakerPort})
	}
	if cfg.allowVertex {
		out = append(out, listenSpec{service: "Vertex AI", addr: "0.0.0.0", port: cfg.vertexPort})
	}
	if cfg.allowMetrics {
		addr := cfg.metricsAddress
		if addr == "" {
			addr = cfg.httpAddress
		}
		out = append(out, listenSpec{service: "metrics", addr: addr, port: cfg.metricsPort})
	}
	for i, a := range out {
		for _, b := range out[i+1:] {
			// Port 0 asks the system for a free port: never a clash.
			if a.port != 0 && a.port == b.port && (a.addr == b.addr || a.addr == "0.0.0.0" || b.addr == "0.0.0.0") {
				// Triton's wording, capital letter included.
				return nil, fmt.Errorf("%s", fmt.Sprintf("The server cannot listen to %s requests and %s requests at the same address and port %s:%d", a.service, b.service, a.addr, a.port))
			}
		}
	}
	if cfg.allowSageMaker && cfg.sageMakerSafeRange != "" {
		lo, hi, err := parsePortRange(cfg.sageMakerSafeRange)
		if err != nil {
			return nil, err
		}
		for _, l := range out {
			if l.service != "SageMaker" && (l.port < lo || l.port > hi) {
				return nil, fmt.Errorf("%s", fmt.Sprintf("The server cannot listen to %s requests at port %d, allowed port range is [%d, %d]", l.service, l.port, lo, hi))
			}
		}
	}
	return out, nil
}

func parsePortRange(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || lo > hi || lo < 0 || hi > 65535 {
		return 0, 0, fmt.Errorf("--sagemaker-safe-port-range expects <lo>-<hi>, got %q", s)
	}
	return lo, hi, nil
}

// newListener binds the listener of spec (any service but Vertex AI's,
// which binds before the models load) and returns the actor serving it,
// its bound address and, for a service with an API of its own (gRPC), the
// mark that makes that API refuse new work while the server exits.
func newListener(cfg *config, spec listenSpec, srv *core.Server, api *httpapi.Server, loads *orca.Reporter,
	metricsHandler http.Handler, log *slog.Logger) (serve.Actor, string, func(), error) {
	var h http.Handler
	switch spec.service {
	case "HTTP":
		h = api
	case "metrics":
		// Triton's metrics listener logs its requests as the HTTP one does.
		h = httpapi.LogRequests(metricsHandler, cfg.logs, log)
	case "GRPC":
		return grpcListener(cfg, spec, srv, loads, log)
	case "SageMaker":
		var err error
		if h, err = sageMakerHandler(cfg, srv, api, metricsHandler, log); err != nil {
			return serve.Actor{}, "", nil, err
		}
	default:
		return serve.Actor{}, "", nil, fmt.Errorf("the %s listener is not available in this build", spec.service)
	}
	actor, addr, err := listen(spec, h, cfg.timeouts(), log)
	return actor, addr, nil, err
}

// listen binds spec's address and returns the actor serving h there and
// the bound address. Every listener is built the same way
// (httpapi.NewHTTPServer): panics answered per request, and the header,
// idle and body timeouts of the --http-*-timeout flags.
func listen(spec listenSpec, h http.Handler, t httpapi.Timeouts, log *slog.Logger) (serve.Actor, string, error) {
	ln, err := bind(spec)
	if err != nil {
		return serve.Actor{}, "", err
	}
	return serve.HTTP(spec.service, ln, httpapi.NewHTTPServer(h, t, log)), ln.Addr().String(), nil
}

// bind opens spec's listening socket, with SO_REUSEPORT when asked.
func bind(spec listenSpec) (net.Listener, error) {
	var lc net.ListenConfig
	if spec.reuse {
		// Several servers may bind the port and share its connections.
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	ln, err := lc.Listen(context.Background(), "tcp", spec.hostPort())
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", spec.service, err)
	}
	return ln, nil
}
