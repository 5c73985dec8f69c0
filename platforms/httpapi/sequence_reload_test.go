package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/onnxbuild"
)

// TestSequenceReloadOverHTTP reloads the ONNX accumulator over the
// repository API while 8 sequences are half way: each finishes with its
// running sum on the copy it started on, none failing, and 8 sequences
// started after the reload run on the new copy. An unload then ends the
// sequences live on the model: their next request gets Triton's answer for
// a model with no version left.
func TestSequenceReloadOverHTTP(t *testing.T) {
	acc := testModel{config: onnxbuild.AccumulatorConfig(onnxbuild.Int32), onnx: onnxbuild.Must(onnxbuild.Accumulator(onnxbuild.Int32))}
	root := writeRepo(t, map[string]testModel{"acc": acc})
	base, _ := startServer(t, root, serverOpts{mode: core.ModeExplicit, startup: []string{"acc"}})
	url := base + "/v2/models/acc/infer"
	const sequences, steps = 8, 6
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * sequences}}
	send := func(id int, step int, v int32, sum int64) error {
		rid := fmt.Sprintf("%d/%d", id, step)
		code, r, err := postJSON(client, url, seqBody(rid, v, seqParams(id, step == 0, step == steps-1)))
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("sequence %d step %d: %d %q %v", id, step, code, r.Error, err)
		}
		if got := r.output(t, "OUTPUT"); got != strconv.FormatInt(sum, 10) {
			return fmt.Errorf("sequence %d step %d: OUTPUT %v, want %d", id, step, got, sum)
		}
		return nil
	}
	run := func(id, from, to int, sum *int64) error {
		for step := from; step < to; step++ {
			v := int32(id*10 + step)
			*sum += int64(v)
			if err := send(id, step, v, *sum); err != nil {
				return err
			}
		}
		return nil
	}
	var half, all sync.WaitGroup
	reloaded := make(chan struct{})
	for i := range sequences {
		half.Add(1)
		all.Go(func() {
			var sum int64
			err := run(100+i, 0, steps/2, &sum)
			half.Done()
			if err != nil {
				t.Error(err)
				return
			}
			<-reloaded
			if err := run(100+i, steps/2, steps, &sum); err != nil {
				t.Error(err)
			}
		})
	}
	half.Wait()
	acc.config += "\n# reloaded\n"
	writeRepoInto(t, root, map[string]testModel{"acc": acc})
	repoCall(t, client, base+"/v2/repository/models/acc/load")
	close(reloaded)
	for i := range sequences {
		all.Go(func() {
			var sum int64
			if err := run(200+i, 0, steps, &sum); err != nil {
				t.Error(err)
			}
		})
	}
	all.Wait()

	// A sequence live when the model is unloaded.
	var sum int64
	if err := run(300, 0, 2, &sum); err != nil {
		t.Fatal(err)
	}
	repoCall(t, client, base+"/v2/repository/models/acc/unload")
	code, r, err := postJSON(client, url, seqBody("300/2", 1, seqParams(300, false, false)))
	if err != nil || code == http.StatusOK || !strings.Contains(r.Error, "Request for unknown model: 'acc' has no available versions") {
		t.Errorf("after the unload: %d %q %v, want Triton's unknown model error", code, r.Error, err)
	}
}

// repoCall posts an empty repository API request and wants 200.
func repoCall(t *testing.T, client *http.Client, url string) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", url, resp.StatusCode)
	}
}
