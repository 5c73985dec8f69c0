package httpapi

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
	"github.com/inferd/inferd/platforms/codec"
)

// FuzzHTTPInferIntoCore sends what an HTTP client may put in one binary
// input (any datatype name, shape and bytes) through the request codec
// into a running core, to identity models of every datatype with a
// variable dim (one core for the whole run, no process per execution).
// Nothing panics; what the core accepts has exactly the bytes its shape
// needs, computed without wrapping, and comes back unchanged.
func FuzzHTTPInferIntoCore(f *testing.F) {
	f.Add("FP32", "4611686018427387904", []byte{})
	f.Add("FP32", "4611686018427387905", make([]byte, 4))
	f.Add("FP64", "2305843009213693952", []byte{})
	f.Add("FP32", "4294967296,4294967296", []byte{})
	f.Add("FP32", "2", make([]byte, 8))
	f.Add("BYTES", "2", []byte{1, 0, 0, 0, 'a', 0, 0, 0, 0})
	f.Add("BYTES", "4611686018427387904", []byte{})
	f.Add("BF16", "3", make([]byte, 6))
	f.Add("INT8", "18446744073709551615", []byte{1})
	root := f.TempDir()
	for dt := core.TypeBool; dt <= core.TypeBF16; dt++ {
		servertest.WriteModel(f, filepath.Join(root, "id_"+dt.String()), servertest.Model{Config: fmt.Sprintf(`backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: %s dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: %s dims: [ -1 ] } ]
`, dt.ConfigName(), dt.ConfigName())})
	}
	srv := servertest.Start(f, servertest.Options{Repo: root})
	f.Fuzz(func(t *testing.T, datatype, shape string, data []byte) {
		model := "id_FP32"
		if dt := core.ParseDataType(datatype); dt != core.TypeInvalid {
			model = "id_" + dt.String()
		}
		header := `{"inputs":[{"name":"INPUT0","datatype":` + strconv.Quote(datatype) + `,"shape":[` + shape +
			`],"parameters":{"binary_data_size":` + strconv.Itoa(len(data)) + `}}]}`
		body := append([]byte(header), data...)
		env, err := codec.DecodeRequest(context.Background(), model, body, len(header), 1<<20, nil)
		if err != nil {
			return
		}
		req := env.Request
		req.ModelName, req.ModelVersion = model, core.LatestVersion
		resp, err := srv.Infer(context.Background(), req)
		if err := servertest.CheckIdentityAnswer(req.Inputs[0], resp, err); err != nil {
			t.Fatalf("%v (%s)", err, strings.TrimSpace(shape))
		}
	})
}
