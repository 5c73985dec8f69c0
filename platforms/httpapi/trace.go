package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/trace"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// traceRoutes serves the trace extension (triton-inference-server/server
// docs/protocol/extension_trace.md): the global
// and the per-model settings; the per-model route has no version form
// (that path stays a 404). Without Options.Trace the server keeps a
// manager of its own with tracing OFF, as Triton always has one.
func (s *Server) traceRoutes(r chi.Router) {
	if s.opts.Trace == nil {
		s.opts.Trace, _ = trace.New(trace.DefaultConfig(), slog.New(slog.DiscardHandler))
	}
	methods := []string{http.MethodGet, http.MethodPost}
	r.HandleFunc("/v2/trace/setting", s.handle("trace", methods, func(w http.ResponseWriter, r *http.Request) error {
		return s.traceSetting(w, r, "")
	}))
	r.HandleFunc("/v2/models/{model}/trace/setting", s.handle("trace", methods, func(w http.ResponseWriter, r *http.Request) error {
		return s.traceSetting(w, r, chi.URLParam(r, "model"))
	}))
}

// traceSetting answers, and on POST first updates, model's trace setting
// ("": the global one), in Triton's order: readiness of the model, then
// the body's keys (trace_file, trace_level, trace_rate, trace_count,
// log_frequency), the first error winning.
func (s *Server) traceSetting(w http.ResponseWriter, r *http.Request, model string) error {
	if model != "" && !protocol.ModelReady(s.core, model, core.LatestVersion) {
		return trace.ErrUnknownModel(model)
	}
	if r.Method == http.MethodPost {
		body, err := s.readJSONBody(r)
		if err != nil {
			return err
		}
		if len(body) > 0 {
			u, err := traceUpdate(body)
			if err != nil {
				return err
			}
			if !u.Empty() {
				if err := s.opts.Trace.Update(model, u); err != nil {
					return err
				}
			}
		}
	}
	writeJSON(w, appendTraceSettings(nil, s.opts.Trace.Settings(model)))
	return nil
}

// traceUpdate reads a settings body: each key may be null (fall back);
// values are strings (trace_level an array of them), and any other JSON
// type is Triton's type error (500).
func traceUpdate(body []byte) (trace.Update, error) {
	var u trace.Update
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return u, err
	}
	root := doc.Root()
	if root.Has("trace_file") {
		return u, trace.ErrFileUpdate
	}
	if v, ok := root.Find("trace_level"); ok {
		if v.IsNull() {
			u.Clear("trace_level")
		} else {
			arr, err := root.MemberArray("trace_level")
			if err != nil {
				return u, err
			}
			var names []string
			for _, e := range arr.Elements() {
				n, err := e.Str()
				if err != nil {
					return u, err
				}
				names = append(names, n)
			}
			if err := u.SetLevels(names); err != nil {
				return u, err
			}
		}
	}
	for _, key := range [...]string{"trace_rate", "trace_count", "log_frequency"} {
		v, ok := root.Find(key)
		if !ok {
			continue
		}
		if v.IsNull() {
			u.Clear(key)
			continue
		}
		text, err := v.Str()
		if err != nil {
			return u, err
		}
		if err := u.Set(key, text, trace.HTTPCountMsg); err != nil {
			return u, err
		}
	}
	return u, nil
}

// appendTraceSettings renders a setting in Triton's key order; every
// scalar is a string, log_frequency and trace_file only in triton mode,
// the mode's own settings last.
func appendTraceSettings(b []byte, st trace.Settings) []byte {
	b = append(b, `{"trace_level":[`...)
	for i, n := range st.Level.Names() {
		if i > 0 {
			b = append(b, ',')
		}
		b = tritonjson.AppendString(b, n)
	}
	b = append(b, `],"trace_rate":"`...)
	b = strconv.AppendUint(b, uint64(st.Rate), 10)
	b = append(b, `","trace_count":"`...)
	b = strconv.AppendInt(b, int64(st.Count), 10)
	b = append(b, '"')
	if st.Mode == trace.ModeTriton {
		b = append(b, `,"log_frequency":"`...)
		b = strconv.AppendUint(b, uint64(st.LogFrequency), 10)
		b = append(b, `","trace_file":`...)
		b = tritonjson.AppendString(b, st.File)
	}
	b = append(b, `,"trace_mode":`...)
	b = tritonjson.AppendString(b, st.Mode.String())
	for _, kv := range st.Extra {
		b = append(b, ',')
		b = tritonjson.AppendString(b, kv[0])
		b = append(b, ':')
		b = tritonjson.AppendString(b, kv[1])
	}
	return append(b, '}')
}
