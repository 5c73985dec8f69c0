package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
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
		if ov, err = protocol.ReadLoadParams(params, protocol.HTTPRules); err != nil {
			return err
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
		// ignored, as in Triton (protocol.ReadUnloadParams).
		doc, err := tritonjson.ParseJSON(body)
		if err != nil {
			return err
		}
		var params map[string]protocol.Param
		if p, ok := doc.Root().Find("parameters"); ok {
			if v, ok := p.Find("unload_dependents"); ok {
				params = map[string]protocol.Param{"unload_dependents": codec.JSONParam(v)}
			}
		}
		if dependents, err = protocol.ReadUnloadParams(params, protocol.HTTPRules); err != nil {
			return err
		}
	}
	if err := protocol.Unload(r.Context(), s.core, name, dependents); err != nil {
		return err
	}
	writeJSON(w, nil)
	return nil
}
