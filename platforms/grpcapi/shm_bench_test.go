package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/internal/shmtest"
	"github.com/inferd/inferd/internal/sidebyside"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
	"github.com/inferd/inferd/platforms/httpapi"
	"github.com/inferd/inferd/platforms/shm"
)

// BenchmarkSharedMemory measures an FP32 identity ([1, n], two CPU
// instances) of 64 KiB and of 16 MiB with its input and output in system
// shared memory, over HTTP and over gRPC, against the same tensors sent
// over the socket (HTTP's binary extension, gRPC's raw contents), at
// concurrency 1 and 16, in one run (BENCHMARKS.md, "Shared memory"). The
// identity's dims are [-1] (the output's shape known after the run) or
// the size's (-known: known before it, so ONNX Runtime can write a large
// output in place); the region table is guarded as cmd/inferd's, so that
// inputs are read in place. A
// shared-memory call does what a client does: it copies the input into its
// own mapping of the region, calls, and copies the output out of its
// mapping; each concurrent caller has its own pair of regions.
//
//	go test ./platforms/grpcapi -run '^$' -bench BenchmarkSharedMemory -benchtime 2s -count 3
func BenchmarkSharedMemory(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"64KiB", 64 << 10}, {"16MiB", 16 << 20}} {
		b.Run(size.name, func(b *testing.B) { benchSharedMemory(b, size.bytes, "identity_fp32") })
		b.Run(size.name+"-known", func(b *testing.B) { benchSharedMemory(b, size.bytes, knownIdentity(size.bytes)) })
	}
}

// knownIdentity is the name of the identity whose dims are size bytes of
// FP32.
func knownIdentity(size int) string { return "identity_fp32_" + strconv.Itoa(size/4) }

func benchSharedMemory(b *testing.B, size int, model string) {
	regions := shm.NewManager(nil)
	servertest.Must(b, regions.InstallGuard())
	srv := startSharedMemoryServers(b, regions)
	client := dialBench(b, srv.grpcAddr, true)
	elems := size / 4
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	shape := "[1," + strconv.Itoa(elems) + "]"
	url := srv.httpBase + "/v2/models/" + model + "/infer"
	header := `{"inputs":[{"name":"INPUT0","shape":` + shape + `,"datatype":"FP32","parameters":{"binary_data_size":` +
		strconv.Itoa(size) + `}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}`
	raw := &pb.ModelInferRequest{
		ModelName:        model,
		Inputs:           []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, int64(elems)}}},
		RawInputContents: [][]byte{data},
	}

	// Sixteen pairs of regions, one per concurrent caller.
	const pairs = 16
	pool := make(chan *regionPair, pairs)
	for i := range pairs {
		p := newRegionPair(b, regions, i, size)
		p.httpBody = []byte(`{"inputs":[{"name":"INPUT0","shape":` + shape + `,"datatype":"FP32","parameters":` + p.params("in") + `}],` +
			`"outputs":[{"name":"OUTPUT0","parameters":` + p.params("out") + `}]}`)
		p.grpcReq = &pb.ModelInferRequest{
			ModelName: model,
			Inputs: []*pb.ModelInferRequest_InferInputTensor{{Name: "INPUT0", Datatype: "FP32", Shape: []int64{1, int64(elems)},
				Parameters: shmParams(p.in, 0, int64(size))}},
			Outputs: []*pb.ModelInferRequest_InferRequestedOutputTensor{{Name: "OUTPUT0", Parameters: shmParams(p.out, 0, int64(size))}},
		}
		pool <- p
	}
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	// A call through regions: the input copied into the caller's mapping,
	// the call, the output copied out of it.
	through := func(p *regionPair, call func(p *regionPair) error) error {
		copy(p.inMap, data)
		if err := call(p); err != nil {
			return err
		}
		copy(p.result, p.outMap)
		return nil
	}
	viaRegions := func(call func(p *regionPair) error) func() error {
		return func() error {
			p := <-pool
			defer func() { pool <- p }()
			return through(p, call)
		}
	}
	httpSHM := func(p *regionPair) error {
		resp, err := httpClient.Post(url, "application/json", bytes.NewReader(p.httpBody))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	grpcSHM := func(p *regionPair) error {
		resp, err := client.ModelInfer(context.Background(), p.grpcReq)
		if err != nil {
			return err
		}
		if len(resp.RawOutputContents) != 1 || len(resp.RawOutputContents[0]) != 0 {
			return fmt.Errorf("raw outputs %d beside the region", len(resp.RawOutputContents))
		}
		return nil
	}

	// Every way gives the identity's answer before anything is measured.
	for _, call := range []func(p *regionPair) error{httpSHM, grpcSHM} {
		p := <-pool
		servertest.Must(b, through(p, call))
		if !bytes.Equal(p.result, data) {
			b.Fatal("the output region does not hold the input")
		}
		clear(p.outMap)
		pool <- p
	}
	if resp, err := client.ModelInfer(context.Background(), raw); err != nil || !bytes.Equal(resp.GetRawOutputContents()[0], data) {
		b.Fatalf("gRPC raw: %v", err)
	}

	callers := []struct {
		name string
		call func() error
	}{
		{"http-binary", httpBinaryCaller(url, header, data)},
		{"grpc-raw", grpcCaller(client, raw, 1)},
		{"http-shm", viaRegions(httpSHM)},
		{"grpc-shm", viaRegions(grpcSHM)},
	}
	rs := sidebyside.Results{}
	for _, conc := range []int{1, 16} {
		for _, cl := range callers {
			rs.Run(b, cl.name+"/c"+strconv.Itoa(conc), conc, 1, cl.call)
		}
	}
	var ratios []sidebyside.Ratio
	for _, c := range []string{"c1", "c16"} {
		ratios = append(ratios,
			sidebyside.Ratio{Unit: "http-shm/binary-thru-" + c, Num: "http-shm/" + c, Den: "http-binary/" + c, Of: sidebyside.ReqOf},
			sidebyside.Ratio{Unit: "grpc-shm/binary-thru-" + c, Num: "grpc-shm/" + c, Den: "http-binary/" + c, Of: sidebyside.ReqOf},
			sidebyside.Ratio{Unit: "grpc-shm/grpc-raw-thru-" + c, Num: "grpc-shm/" + c, Den: "grpc-raw/" + c, Of: sidebyside.ReqOf},
			sidebyside.Ratio{Unit: "http-shm/binary-p50-" + c, Num: "http-shm/" + c, Den: "http-binary/" + c, Of: sidebyside.P50Of},
		)
	}
	rs.Report(b, ratios...)
}

// regionPair is one caller's input and output regions, registered with the
// server and mapped by the caller as a client maps them.
type regionPair struct {
	in, out       string
	size          int
	inMap, outMap []byte
	result        []byte // where the caller copies the output
	httpBody      []byte
	grpcReq       *pb.ModelInferRequest
}

func newRegionPair(b *testing.B, regions *shm.Manager, i, size int) *regionPair {
	p := &regionPair{in: "in" + strconv.Itoa(i), out: "out" + strconv.Itoa(i), size: size, result: make([]byte, size)}
	p.inMap = mapRegion(b, regions, p.in, size)
	p.outMap = mapRegion(b, regions, p.out, size)
	return p
}

func (p *regionPair) params(which string) string {
	name := p.in
	if which == "out" {
		name = p.out
	}
	return `{"shared_memory_region":"` + name + `","shared_memory_byte_size":` + strconv.Itoa(p.size) + `}`
}

// mapRegion creates an object of size bytes, maps it as a client would and
// registers it as region name.
func mapRegion(b *testing.B, regions *shm.Manager, name string, size int) []byte {
	key := shmtest.ObjectWith(b, make([]byte, size))
	f, err := os.OpenFile(shmtest.Path(key), os.O_RDWR, 0)
	servertest.Must(b, err)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	servertest.Must(b, err)
	b.Cleanup(func() { _ = unix.Munmap(m) })
	servertest.Must(b, regions.RegisterSystem(name, key, 0, uint64(size)))
	return m
}

// startSharedMemoryServers is startBenchServers with both frontends on one
// shared-memory table.
func startSharedMemoryServers(b *testing.B, regions *shm.Manager) benchServers {
	b.Helper()
	models := benchModels()
	for _, size := range []int{64 << 10, 16 << 20} {
		name, dims := knownIdentity(size), strconv.Itoa(size/4)
		models[name] = servertest.Model{Config: strings.ReplaceAll(strings.ReplaceAll(benchIdentityConfig,
			"identity_fp32", name), "[ -1 ]", "[ "+dims+" ]"), ONNX: onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1, int64(size/4)))}
	}
	root := servertest.WriteRepo(b, models)
	c := servertest.Start(b, servertest.Options{Repo: root})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	api := New(c, Options{Logger: quiet, SharedMemory: regions})
	g := grpc.NewServer(api.ServerOptions()...)
	api.Register(g)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(b, err)
	go func() { _ = g.Serve(gl) }()
	b.Cleanup(g.Stop)

	hs := &http.Server{Handler: httpapi.New(c, httpapi.Options{Logger: quiet, SharedMemory: regions}), ReadHeaderTimeout: 10 * time.Second}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	servertest.Must(b, err)
	go func() { _ = hs.Serve(hl) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return benchServers{grpcAddr: gl.Addr().String(), httpBase: "http://" + hl.Addr().String(), root: root, core: c}
}
