package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/inferd/inferd/internal/onnxbuild"
	"github.com/inferd/inferd/internal/servertest"
	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// The hostile requests of the hardening review, sent to the real binary
// running under an address-space limit (RLIMIT_AS): a request that makes
// the server allocate far more than it sent kills the child process and
// fails the test, instead of the machine the tests run on. The test
// binary itself cannot be that child: under -race its sanitizer maps
// terabytes of shadow memory, so the server is built without it.
//
// addressLimit is the server's RLIMIT_AS. An idle server with one ONNX
// model maps about 1.8 GiB (ONNX Runtime's thread stacks, Go's heap
// reservations), so the limit leaves it 1.2 GiB: more than any bounded
// request needs, less than any of the amplifications below asks for.
const addressLimit = 3 << 30

// hostileServer is the binary under its limit.
type hostileServer struct {
	cmd        *exec.Cmd
	http, grpc string
	exited     chan struct{}
	log        *servertest.LogBuffer
}

// buildServer builds inferd without the race detector (whose shadow
// mappings no address-space limit admits), with the flags of deploy's
// image test so that the two share the build cache.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inferd")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startLimited runs bin with args under addressLimit and waits for it to
// serve.
func startLimited(t *testing.T, bin string, args ...string) *hostileServer {
	t.Helper()
	// dash's ulimit -v sets RLIMIT_AS, in KiB, for the exec'd server.
	sh := []string{"-c", `ulimit -v "$1" && shift && exec "$@"`, "sh", strconv.Itoa(addressLimit >> 10), bin}
	cmd := exec.Command("/bin/sh", append(sh, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	s := &hostileServer{cmd: cmd, exited: make(chan struct{}), log: &servertest.LogBuffer{}}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.exited
	})
	serving := regexp.MustCompile(`"serving" http=\S*:(\d+) grpc=\S*:(\d+)`)
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		fmt.Fprintln(s.log, sc.Text())
		if m := serving.FindStringSubmatch(sc.Text()); m != nil {
			s.http, s.grpc = "http://127.0.0.1:"+m[1], "127.0.0.1:"+m[2]
			break
		}
	}
	go func() {
		_, _ = io.Copy(s.log, stderr)
		_ = cmd.Wait()
		close(s.exited)
	}()
	if s.http == "" {
		<-s.exited
		t.Fatalf("inferd did not serve:\n%s", s.log.String())
	}
	return s
}

// alive fails the test when the server has died, and checks that it still
// answers an ordinary infer.
func (s *hostileServer) alive(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("the server died (%v):\n%s", s.cmd.ProcessState, fatal(s.log.String()))
	default:
	}
	code, body := post(t, s.http+"/v2/models/ident/infer", `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}]}`)
	if code != http.StatusOK || !strings.Contains(body, `"data":[1.0,2.0]`) {
		t.Fatalf("an ordinary infer after the hostile request: %d %s", code, body)
	}
}

// fatal is the Go runtime's reason for a crash (its "fatal error" or
// "panic" line and the few after), else the log's last lines.
func fatal(log string) string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "fatal error") || strings.HasPrefix(l, "panic") {
			return strings.Join(lines[i:min(i+6, len(lines))], "\n")
		}
	}
	return strings.Join(lines[max(len(lines)-20, 0):], "\n")
}

// TestHostileClientsUnderAddressLimit sends the server, one after another,
// requests that cost it far more than they cost the client on the code
// this test was written against, and checks after each that the server is
// alive, answers, and told the client a clear error.
func TestHostileClientsUnderAddressLimit(t *testing.T) {
	root := t.TempDir()
	writeModel(t, root, "ident", `platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
`, onnxbuild.Must(onnxbuild.Identity(onnxbuild.Float, -1)))
	writeModel(t, root, "acc", onnxbuild.AccumulatorConfig(onnxbuild.Int32), onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32)))
	bin := buildServer(t)
	// Each case gets a server of its own, so that one that dies does not
	// hide what the next would do.
	serve := func(t *testing.T) *hostileServer {
		s := startLimited(t, bin, "--model-repository="+root, "--model-control-mode=explicit", "--load-model=*",
			"--allow-model-file-override=false", "--http-thread-count=2", "--http-address=127.0.0.1",
			"--http-port=0", "--grpc-port=0", "--metrics-port=0")
		s.alive(t)
		return s
	}

	t.Run("300k request parameters", func(t *testing.T) {
		s := serve(t)
		// 4.9 MB of parameters, each looked up by a linear scan of the
		// others, took minutes of CPU; the client gives up long before.
		reqBody := `{"parameters":{` + string(servertest.ParamMembers(300_000, "p")) +
			`},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":[1]}]}`
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.http+"/v2/models/ident/infer", strings.NewReader(reqBody))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer within 60 s: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("status %d: %.300s", resp.StatusCode, body)
		}
		s.alive(t)
	})

	t.Run("concurrent gzip bombs", func(t *testing.T) {
		s := serve(t)
		// 64 KiB each on the wire, 64 MiB (the body limit) inflated: an
		// ordinary infer padded with blanks. Each inflation must wait for
		// one of the 2 decode slots.
		infer := `{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[2],"data":[1,2]}]}`
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
		_, _ = zw.Write([]byte(infer))
		_, _ = zw.Write(bytes.Repeat([]byte{' '}, 64<<20-len(infer)))
		_ = zw.Close()
		var wg sync.WaitGroup
		codes := make([]int, 32)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, s.http+"/v2/models/ident/infer", bytes.NewReader(zb.Bytes()))
				req.Header.Set("Content-Encoding", "gzip")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				codes[i] = resp.StatusCode
			}()
		}
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusOK {
				t.Errorf("bomb %d: status %d, want 200", i, c)
			}
		}
		s.alive(t)
	})

	t.Run("50M empty bytes_contents", func(t *testing.T) {
		s := serve(t)
		// 2 bytes on the wire an element (100 MB), 24 in a generated
		// message; refused for its shape [1].
		const n = 50_000_000
		msg := emptyBytesContents(t, "ident", n)
		conn, err := grpc.NewClient(s.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(len(msg)+1024)))
		must(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var resp pb.ModelInferResponse
		err = conn.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", msg, &resp, grpc.ForceCodec(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("err = %v, want INVALID_ARGUMENT", err)
		}
		s.alive(t)
	})

	load := func(t *testing.T, s *hostileServer, stateDims, initialState string) (int, string) {
		t.Helper()
		cfg := `{"platform":"onnxruntime_onnx","max_batch_size":8,
"input":[{"name":"INPUT","data_type":"TYPE_INT32","dims":[1]}],
"output":[{"name":"OUTPUT","data_type":"TYPE_INT32","dims":[1]}],
"sequence_batching":{"state":[{"input_name":"STATE_IN","output_name":"STATE_OUT","data_type":"TYPE_INT32","dims":[` + stateDims + `],
"initial_state":[` + initialState + `]}]},
"instance_group":[{"kind":"KIND_CPU","count":1}]}`
		body, _ := json.Marshal(map[string]any{"parameters": map[string]string{"config": cfg}})
		return post(t, s.http+"/v2/repository/models/acc/load", string(body))
	}
	for _, c := range []struct {
		name, dims, state string
	}{
		// 2^34 INT32 zeros from a 400-byte request, for a state of any
		// length.
		{"zero_data of 64 GiB", "-1", `{"name":"z","data_type":"TYPE_INT32","dims":[17179869184],"zero_data":true}`},
		// A file outside the model folder, one that never ends, and one
		// whose read blocks.
		{"data_file outside the model", "1", `{"name":"f","data_type":"TYPE_INT32","dims":[1],"data_file":"../../../../../../../../etc/passwd"}`},
		{"data_file /dev/zero", "1", `{"name":"f","data_type":"TYPE_INT32","dims":[1],"data_file":"../../../../../../../../dev/zero"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serve(t)
			code, body := load(t, s, c.dims, c.state)
			if code != http.StatusBadRequest {
				t.Errorf("load: %d %s, want 400", code, body)
			}
			if code == http.StatusOK {
				// A state is set up when a sequence starts.
				code, body = post(t, s.http+"/v2/models/acc/infer", `{"parameters":{"sequence_id":1,"sequence_start":true},
"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[0]}]}`)
				t.Logf("a sequence's first infer: %d %s", code, body)
			}
			if strings.Contains(body, "root:") || strings.Contains(body, strconv.Itoa(int(int32(binary.LittleEndian.Uint32([]byte("root")))))) {
				t.Errorf("the reply holds /etc/passwd: %s", body)
			}
			s.alive(t)
			// The repository's own config loads again afterwards.
			if code, body := post(t, s.http+"/v2/repository/models/acc/load", `{}`); code != http.StatusOK {
				t.Errorf("reload from the repository: %d %s", code, body)
			}
		})
	}
}

// emptyBytesContents is the wire form of a ModelInferRequest for model
// whose one BYTES input of shape [1] carries n empty bytes_contents,
// written field by field: the generated message would hold n slices.
func emptyBytesContents(t *testing.T, model string, n int) []byte {
	t.Helper()
	// InferTensorContents.bytes_contents is field 8.
	contents := bytes.Repeat(protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), nil), n)
	input, err := proto.Marshal(&pb.ModelInferRequest_InferInputTensor{Name: "INPUT0", Datatype: "BYTES", Shape: []int64{1}})
	must(t, err)
	// InferInputTensor.contents is field 5.
	input = protowire.AppendBytes(protowire.AppendTag(input, 5, protowire.BytesType), contents)
	req, err := proto.Marshal(&pb.ModelInferRequest{ModelName: model})
	must(t, err)
	// ModelInferRequest.inputs is field 5.
	return protowire.AppendBytes(protowire.AppendTag(req, 5, protowire.BytesType), input)
}

// rawCodec sends a message already in wire form and decodes the reply as
// its generated type.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }

func (rawCodec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }

func (rawCodec) Name() string { return "proto" }
