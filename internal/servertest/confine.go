package servertest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/inferd/inferd/internal/onnxbuild"
)

// ConfineSecret lies beside the model folders of WriteConfineSeq; no reply
// may show it (NoSecret).
const ConfineSecret = "SECRETSECRETSECRETSECRET!"

// ConfineSeqConfig is the config of "seq", onnxbuild.Previous over INT32
// (OUTPUT = the state): the state's initial_state has dims and data.
func ConfineSeqConfig(dims, data string) string {
	return fmt.Sprintf(`name: "seq"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
sequence_batching {
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ %[1]s ]
    initial_state { name: "init" data_type: TYPE_INT32 dims: [ %[1]s ] %[2]s } } ]
}
instance_group [ { kind: KIND_CPU count: 1 } ]
`, dims, data)
}

// WriteConfineSeq writes into root the model "seq" (ConfineSeqConfig from
// zero data), secret.bin beside it, and in its initial_state folder a
// link to the secret ("link") and a FIFO ("fifo"): what a load override's
// data_file must not reach.
func WriteConfineSeq(t testing.TB, root string) {
	t.Helper()
	WriteModel(t, filepath.Join(root, "seq"), Model{Config: ConfineSeqConfig("1", "zero_data: true"), ONNX: onnxbuild.Must(onnxbuild.Previous(onnxbuild.Int32))})
	Must(t, os.WriteFile(filepath.Join(root, "secret.bin"), []byte(ConfineSecret), 0o600))
	Must(t, os.MkdirAll(filepath.Join(root, "seq", "initial_state"), 0o755))
	Must(t, os.Symlink("../../secret.bin", filepath.Join(root, "seq", "initial_state", "link")))
	Must(t, syscall.Mkfifo(filepath.Join(root, "seq", "initial_state", "fifo"), 0o600))
}

// NoSecret fails the test when text shows ConfineSecret: its bytes, the
// int32 of its first four, its size, or /etc/passwd's first line.
func NoSecret(t testing.TB, text string) {
	t.Helper()
	first := strconv.Itoa(int(int32(binary.LittleEndian.Uint32([]byte(ConfineSecret)))))
	for _, s := range []string{"SECRET", first, strconv.Itoa(len(ConfineSecret)) + " bytes", "root:"} {
		if strings.Contains(text, s) {
			t.Fatalf("a reply shows the secret (%q): %s", s, text)
		}
	}
}
