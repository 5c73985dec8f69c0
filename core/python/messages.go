package python

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/inferd/inferd/core"
)

// The worker's own messages to its instance: a decoupled model's sends,
// its log lines, BLS calls (bls.go), model control and custom metrics.

// handle serves the worker's own messages; it runs on the reader
// goroutine, so anything that may wait runs on its own.
func (in *instance) handle(w *worker, op string, f frameIn) {
	switch op {
	case "send":
		in.onSend(w, f)
	case "log":
		in.onLog(w, f)
	case "bls":
		go in.onBLS(w, f)
	case "bls_cancel":
		in.onBLSCancel(w, f)
	case "model_control":
		go in.onModelControl(w, f)
	case "metric":
		in.onMetric(w, f)
	default:
		w.log.Error("Python worker sent an unknown message", "op", op)
	}
}

// onSend delivers a response the model sent through a request's sender.
// It runs on the reader goroutine, which must not wait for a consumer (a
// client that stopped reading would hold back every request of the
// worker): the response is converted here and queued on its request, whose
// own goroutine delivers it and then answers the model's send, so a slow
// consumer holds back only the sends of its request, in their order.
func (in *instance) onSend(w *worker, f frameIn) {
	var m struct {
		Seq      int64         `json:"seq"`
		RID      int64         `json:"rid"`
		Flags    int           `json:"flags"`
		Response *wireResponse `json:"response"`
	}
	reply := map[string]any{"op": "reply"}
	if err := decode(f, &m); err != nil {
		reply["error"] = err.Error()
		_ = w.send(reply, nil)
		return
	}
	reply["seq"] = m.Seq
	final := m.Flags == 1
	var resp *core.ExecResponse
	if m.Response != nil {
		resp = in.response(m.Response, f, nil)
	}
	in.mu.Lock()
	o := in.open[m.RID]
	if o == nil {
		in.mu.Unlock()
		reply["error"] = core.Errorf(core.CodeInternal, "Unable to send response. Response sender has been closed.").Error()
		_ = w.send(reply, nil)
		return
	}
	if final {
		delete(in.open, m.RID)
	}
	if resp != nil {
		o.responded = true
	}
	o.sends = append(o.sends, func() {
		var err error
		if resp != nil || final {
			err = o.r.Send(resp, final)
		}
		if final {
			o.stop()
		}
		if err != nil {
			reply["error"] = err.Error()
		}
		_ = w.send(reply, nil)
	})
	if !o.sending {
		o.sending = true
		go in.deliver(o)
	}
	in.mu.Unlock()
}

// deliver runs o's queued sends in order until none is left.
func (in *instance) deliver(o *openRequest) {
	for {
		in.mu.Lock()
		if len(o.sends) == 0 {
			o.sending = false
			in.mu.Unlock()
			return
		}
		send := o.sends[0]
		o.sends = o.sends[1:]
		in.mu.Unlock()
		send()
	}
}

// onLog writes a model's Logger message to the server log.
func (in *instance) onLog(w *worker, f frameIn) {
	var m struct {
		Level   string `json:"level"`
		File    string `json:"file"`
		Line    int    `json:"line"`
		Message string `json:"message"`
	}
	if decode(f, &m) != nil {
		return
	}
	level := map[string]slog.Level{"INFO": slog.LevelInfo, "WARNING": slog.LevelWarn, "ERROR": slog.LevelError, "VERBOSE": slog.LevelDebug}[m.Level]
	w.log.Log(context.Background(), level, m.Message, "file", fmt.Sprintf("%s:%d", m.File, m.Line))
}

// onMetric serves pb_utils.MetricFamily and Metric: creation and value()
// answer; increment, set and observe do not (errors are logged).
func (in *instance) onMetric(w *worker, f frameIn) {
	var m struct {
		Seq         int64             `json:"seq"`
		Action      string            `json:"action"`
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Kind        int               `json:"kind"`
		Labels      map[string]string `json:"labels"`
		Buckets     []float64         `json:"buckets"`
		ID          int64             `json:"id"`
		Value       float64           `json:"value"`
	}
	if err := decode(f, &m); err != nil {
		w.log.Error("custom metric", "err", err)
		return
	}
	c := in.b.metrics
	reply := map[string]any{"op": "reply", "seq": m.Seq}
	var err error
	switch m.Action {
	case "family":
		err = c.family(m.Name, m.Description, m.Kind)
	case "metric":
		var id int64
		id, err = c.metric(w, m.Name, m.Labels, m.Buckets)
		reply["value"] = id
	case "value":
		var v float64
		v, err = c.value(m.ID)
		reply["value"] = v
	default:
		if err := c.update(m.ID, m.Action, m.Value); err != nil {
			w.log.Error("custom metric", "err", err)
		}
		return
	}
	if err != nil {
		reply["error"] = err.Error()
	}
	_ = w.send(reply, nil)
}
