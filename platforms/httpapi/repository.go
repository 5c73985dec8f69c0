package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
)

func (s *Server) repoIndex(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readJSONBody(r)
	if err != nil {
		return err
	}
	readyOnly := false
	if len(body) > 0 {
		ready, present, err := indexReady(body)
		if err != nil {
			return err
		}
		readyOnly = present && ready
	}
	entries, err := protocol.RepositoryIndex(r.Context(), s.core, readyOnly)
	if err != nil {
		return err
	}
	b := []byte{'['}
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = tritonjson.AppendString(b, e.Name)
		if e.Version != "" {
			b = append(b, `,"version":`...)
			b = tritonjson.AppendString(b, e.Version)
		}
		if e.State != "" {
			b = append(b, `,"state":`...)
			b = tritonjson.AppendString(b, e.State)
		}
		if e.Reason != "" {
			b = append(b, `,"reason":`...)
			b = tritonjson.AppendString(b, e.Reason)
		}
		b = append(b, '}')
	}
	writeJSON(w, append(b, ']'))
	return nil
}

func (s *Server) repoLoad(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "model")
	if err := protocol.CheckExplicit(s.core); err != nil {
		return err
	}
	body, err := s.readJSONBody(r)
	if err != nil {
		return err
	}
	var ov *core.LoadOverride
	if len(body) > 0 {
		params, err := loadParameters(body)
		if err != nil {
			return err
		}
		for k, v := range params {
			switch {
			case k == "config":
				if ov == nil {
					ov = &core.LoadOverride{}
				}
				ov.ConfigJSON = v
			case strings.HasPrefix(k, "file:"):
				if ov == nil {
					ov = &core.LoadOverride{}
				}
				if ov.Files == nil {
					ov.Files = map[string][]byte{}
				}
				ov.Files[strings.TrimPrefix(k, "file:")] = lenientBase64(v)
			default:
				return core.Errorf(core.CodeInternal, "unexpected error on creating Triton parameter")
			}
		}
	}
	if err := protocol.Load(r.Context(), s.core, name, ov); err != nil {
		return err
	}
	writeJSON(w, nil)
	return nil
}

func (s *Server) repoUnload(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "model")
	if err := protocol.CheckExplicit(s.core); err != nil {
		return err
	}
	body, err := s.readJSONBody(r)
	if err != nil {
		return err
	}
	dependents := false
	if len(body) > 0 {
		// Only malformed JSON fails: a non-boolean unload_dependents is
		// ignored, as in Triton.
		doc, err := tritonjson.ParseJSON(body)
		if err != nil {
			return err
		}
		if params, ok := doc.Root().Find("parameters"); ok {
			if v, ok := params.Find("unload_dependents"); ok && v.IsBool() {
				dependents, _ = v.Bool()
			}
		}
	}
	if err := protocol.Unload(r.Context(), s.core, name, dependents); err != nil {
		return err
	}
	writeJSON(w, nil)
	return nil
}

// lenientBase64 decodes like Triton's decoder: characters outside the
// alphabet are skipped, never an error.
func lenientBase64(s string) []byte {
	var vals []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c >= 'A' && c <= 'Z':
			v = c - 'A'
		case c >= 'a' && c <= 'z':
			v = c - 'a' + 26
		case c >= '0' && c <= '9':
			v = c - '0' + 52
		case c == '+' || c == '-':
			v = 62
		case c == '/' || c == '_':
			v = 63
		default:
			continue
		}
		vals = append(vals, v)
	}
	out := make([]byte, 0, len(vals)*3/4)
	for i := 0; i+1 < len(vals); i += 4 {
		n := uint32(vals[i])<<18 | uint32(vals[i+1])<<12
		out = append(out, byte(n>>16))
		if i+2 < len(vals) {
			n |= uint32(vals[i+2]) << 6
			out = append(out, byte(n>>8))
		}
		if i+3 < len(vals) {
			n |= uint32(vals[i+3])
			out = append(out, byte(n))
		}
	}
	return out
}
