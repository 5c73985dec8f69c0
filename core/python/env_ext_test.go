package python_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// TestUnpackDoesNotBlockOtherLoads: while one model's EXECUTION_ENV_PATH
// archive is being extracted (here: a pipe nobody has written yet),
// another Python model loads and serves; the first then loads too.
func TestUnpackDoesNotBlockOtherLoads(t *testing.T) {
	e := start(t, options{mode: core.ModeExplicit, noAutoComplete: true}, "init_args", "add_sub")
	fifo := filepath.Join(t.TempDir(), "env.tar.gz")
	servertest.Must(t, syscall.Mkfifo(fifo, 0o600))
	cfgPath := filepath.Join(e.root, "init_args", "config.pbtxt")
	cfg, err := os.ReadFile(cfgPath)
	servertest.Must(t, err)
	cfg = append(cfg, []byte(`parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "`+fifo+`" } }`+"\n")...)
	servertest.Must(t, os.WriteFile(cfgPath, cfg, 0o644))

	slow := make(chan error, 1)
	go func() { slow <- e.srv.Load(context.Background(), "init_args", nil) }()
	// Opening the pipe for writing waits for the extraction to open it.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	servertest.Must(t, err)
	defer w.Close()

	other := make(chan error, 1)
	go func() { other <- e.srv.Load(context.Background(), "add_sub", nil) }()
	select {
	case err := <-other:
		servertest.Must(t, err)
		if _, err := e.infer(&core.InferRequest{ModelName: "add_sub",
			Inputs: []*core.Tensor{fp32("INPUT0", []int64{1, 4}, 1, 2, 3, 4), fp32("INPUT1", []int64{1, 4}, 1, 1, 1, 1)}}); err != nil {
			t.Errorf("add_sub while another model's environment unpacks: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("loading add_sub waited for another model's environment to unpack")
	}

	// Now the archive arrives and the first model loads.
	pack := filepath.Join(t.TempDir(), "pack.tar.gz")
	servertest.Must(t, writePack(pack, servertest.Python(t)))
	data, err := os.ReadFile(pack)
	servertest.Must(t, err)
	_, err = w.Write(data)
	servertest.Must(t, err)
	servertest.Must(t, w.Close())
	select {
	case err := <-slow:
		servertest.Must(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("the model with the packed environment did not load")
	}
	if _, err := e.infer(&core.InferRequest{ModelName: "init_args", Inputs: []*core.Tensor{fp32("IN", []int64{1}, 1)}}); err != nil {
		t.Fatalf("the model with the packed environment: %v", err)
	}
}
