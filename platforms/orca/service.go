package orca

import (
	"time"

	xds "github.com/cncf/xds/go/xds/data/orca/v3"
	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"

	"github.com/inferd/inferd/core"
)

// DefaultMinInterval is the shortest interval between out-of-band reports
// that Service grants when ServiceOptions leave it unset. grpc-go's own
// service (google.golang.org/grpc/orca) holds every client to at least
// 30 s with no public way to lower it; a report here costs a few atomic
// loads per model, so a client asking for weighted_round_robin's default
// 10 s gets it.
const DefaultMinInterval = time.Second

// ServiceOptions configure Service.
type ServiceOptions struct {
	// Versions are the model versions whose load the process's report
	// sums (core.Server.ReadyVersions("")).
	Versions func() []*core.ModelVersion
	// MinInterval is the shortest interval granted; 0: DefaultMinInterval.
	MinInterval time.Duration
	// Done, when closed, ends every stream (the server is exiting: an open
	// stream would hold grpc.Server.GracefulStop until the client left).
	// nil: streams end only with their client.
	Done <-chan struct{}
}

// Service is ORCA's out-of-band service, xds.service.orca.v3.OpenRcaService
// (github.com/cncf/xds xds/service/orca/v3/orca.proto), which grpc-go's
// weighted_round_robin calls with enableOobLoadReport: a stream of the
// process's report (ServerReport) every interval the client asks for.
type Service struct {
	orcaservice.UnimplementedOpenRcaServiceServer
	reports *Reporter
	opts    ServiceOptions
}

// NewService returns the out-of-band service over r's figures.
func NewService(r *Reporter, opts ServiceOptions) *Service {
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinInterval
	}
	return &Service{reports: r, opts: opts}
}

// Register registers the service on g.
func (s *Service) Register(g grpc.ServiceRegistrar) { orcaservice.RegisterOpenRcaServiceServer(g, s) }

// StreamCoreMetrics sends the process's report at once and then every
// interval (the request's, at least MinInterval) until the client goes or
// Done is closed.
func (s *Service) StreamCoreMetrics(req *orcaservice.OrcaLoadReportRequest, stream grpc.ServerStreamingServer[xds.OrcaLoadReport]) error {
	interval := max(req.GetReportInterval().AsDuration(), s.opts.MinInterval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if err := stream.Send(s.reports.ServerReport(s.versions())); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil // the client went
		case <-s.opts.Done:
			return nil // the server is exiting; the client's balancer reconnects elsewhere
		case <-tick.C:
		}
	}
}

func (s *Service) versions() []*core.ModelVersion {
	if s.opts.Versions == nil {
		return nil
	}
	return s.opts.Versions()
}

// ServerReport is the process's report over mvs: CPU and memory as in
// every report, requests and errors per second summed over the models,
// application utilisation the busy fraction of all their instances
// together, and the queue size summed.
func (r *Reporter) ServerReport(mvs []*core.ModelVersion) *xds.OrcaLoadReport {
	p := r.proc.figures(time.Now())
	rep := &xds.OrcaLoadReport{CpuUtilization: p.cpu, MemUtilization: p.mem}
	var busy float64
	var instances int
	var pending int64
	for _, mv := range mvs {
		u := mv.Utilization()
		rep.RpsFractional += u.RPS
		rep.Eps += u.EPS
		busy += u.Compute * float64(u.Instances)
		instances += u.Instances
		pending += u.Pending
	}
	if instances > 0 {
		rep.ApplicationUtilization = busy / float64(instances)
	}
	rep.NamedMetrics = map[string]float64{QueueSize: float64(pending)}
	return rep
}
