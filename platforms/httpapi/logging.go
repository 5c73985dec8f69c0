package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/logging"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// logSettings is GET|POST /v2/logging (triton-inference-server/server
// docs/protocol/extension_logging.md; HandleLogging in src/http_server.cc).
// A POST body is required JSON; its keys are applied in Triton's order, each null one
// skipped, and the first error stops the rest (keys already applied stay
// applied). Either way the answer is every setting.
func (s *Server) logSettings(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodPost {
		body, err := s.readJSONBody(r)
		if err == nil {
			err = applyLogSettings(s.logs, body)
		}
		if err != nil {
			return err
		}
	}
	writeJSON(w, renderLogSettings(s.logs))
	return nil
}

// applyLogSettings applies a /v2/logging body. Type errors are TritonJson's
// (INTERNAL, 500); an unknown format is UNAVAILABLE (503), Triton's code
// for it, with Triton's text naming the option as --log_format.
func applyLogSettings(logs *logging.Settings, body []byte) error {
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return err
	}
	root := doc.Root()
	present := func(key string) (tritonjson.Value, bool) {
		v, ok := root.Find(key)
		return v, ok && !v.IsNull()
	}
	if _, ok := present("log_file"); ok {
		return logging.ErrFileFixed
	}
	for _, sw := range logging.Switches {
		v, ok := present(sw.Key)
		if !ok {
			continue
		}
		on, err := v.Bool()
		if err != nil {
			return err
		}
		logs.Update(func(st *logging.State) { sw.Set(st, on) })
	}
	if v, ok := present("log_verbose_level"); ok {
		n, err := v.Uint64()
		if err != nil {
			return err
		}
		logs.Update(func(st *logging.State) { st.Verbose = verboseLevel(n) })
	}
	if v, ok := present("log_format"); ok {
		name, err := v.Str()
		if err != nil {
			return err
		}
		// Only Triton's two formats: json is a start-up choice.
		f, ok := logging.ParseFormat(name)
		if !ok || f == logging.FormatJSON {
			return core.Errorf(core.CodeUnavailable, "invalid argument for --log_format, got: %s", name)
		}
		logs.Update(func(st *logging.State) { st.Format = f })
	}
	return nil
}

// verboseLevel bounds a requested level to what Triton's int32 holds.
func verboseLevel(n uint64) uint32 { return uint32(min(n, 1<<31-1)) }

// renderLogSettings is the six settings in Triton's order.
func renderLogSettings(logs *logging.Settings) []byte {
	st := logs.Load()
	b := tritonjson.AppendString([]byte(`{"log_file":`), logs.File())
	b = append(b, `,"log_info":`...)
	b = strconv.AppendBool(b, st.Info)
	b = append(b, `,"log_warning":`...)
	b = strconv.AppendBool(b, st.Warning)
	b = append(b, `,"log_error":`...)
	b = strconv.AppendBool(b, st.Error)
	b = append(b, `,"log_verbose_level":`...)
	b = strconv.AppendUint(b, uint64(st.Verbose), 10)
	b = append(b, `,"log_format":`...)
	b = tritonjson.AppendString(b, st.Format.String())
	return append(b, '}')
}

// LogRequests writes Triton's verbose "HTTP request: <method> <path>" line
// for every request h receives (logging.Settings.LogHTTP), whatever its
// route, before h sees it. With verbose logging off a request pays one
// atomic load and no allocation.
func LogRequests(h http.Handler, logs *logging.Settings, log *slog.Logger) http.Handler {
	if logs == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if logs.Verbose() > 0 {
			// Triton prints the path as it came, escapes kept, without
			// the query.
			logs.LogHTTP(r.Context(), log, r.Method, r.URL.EscapedPath())
		}
		h.ServeHTTP(w, r)
	})
}
