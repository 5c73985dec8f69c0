package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/tritonjson"
	"github.com/inferd/inferd/repo/modelconfig"
)

// renderServerMeta renders GET /v2's body.
func renderServerMeta(m protocol.ServerMeta) []byte {
	b := tritonjson.AppendString([]byte(`{"name":`), m.Name)
	b = append(b, `,"version":`...)
	b = tritonjson.AppendString(b, m.Version)
	b = append(b, `,"extensions":`...)
	b = appendStrings(b, m.Extensions)
	return append(b, '}')
}

// appendStrings appends a JSON array of strings.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = tritonjson.AppendString(b, s)
	}
	return append(b, ']')
}

func (s *Server) live(w http.ResponseWriter, _ *http.Request) error {
	if _, err := protocol.ServerLive(s.core, s.exiting.Load()); err != nil {
		return err
	}
	writeEmpty(w, http.StatusOK)
	return nil
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) error {
	ready, err := protocol.ServerReady(s.core, s.exiting.Load())
	switch {
	case err != nil:
		return err
	case ready:
		writeEmpty(w, http.StatusOK)
	default:
		writeEmpty(w, http.StatusBadRequest)
	}
	return nil
}

func (s *Server) serverMeta(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, s.meta)
	return nil
}

func (s *Server) modelMeta(w http.ResponseWriter, _ *http.Request, name string, version int64) error {
	md, err := protocol.ModelMetadata(s.core, name, version)
	if err != nil {
		return err
	}
	b := []byte(`{"name":`)
	b = tritonjson.AppendString(b, md.Name)
	b = append(b, `,"versions":`...)
	b = appendStrings(b, md.Versions)
	b = append(b, `,"platform":`...)
	b = tritonjson.AppendString(b, md.Platform)
	b = append(b, `,"inputs":[`...)
	b = appendTensorMetas(b, md.Inputs)
	b = append(b, `],"outputs":[`...)
	b = appendTensorMetas(b, md.Outputs)
	writeJSON(w, append(b, "]}"...))
	return nil
}

func appendTensorMetas(b []byte, ts []protocol.TensorMeta) []byte {
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = tritonjson.AppendString(b, t.Name)
		b = append(b, `,"datatype":`...)
		b = tritonjson.AppendString(b, t.Datatype)
		b = append(b, `,"shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, "]}"...)
	}
	return b
}

func (s *Server) modelReady(w http.ResponseWriter, _ *http.Request, name string, version int64) error {
	// With model namespacing Triton's model lookup answers an unknown,
	// unloaded or ambiguous name with its own error.
	if err := s.core.Resolve(name); err != nil {
		return err
	}
	if protocol.ModelReady(s.core, name, version) {
		writeEmpty(w, http.StatusOK)
		return nil
	}
	return errVersionNotReady
}

func (s *Server) modelConfig(w http.ResponseWriter, _ *http.Request, name string, version int64) error {
	cfg, err := protocol.ModelConfig(s.core, name, version)
	if err != nil {
		return err
	}
	body, err := modelconfig.MarshalJSON(cfg)
	if err != nil {
		return core.Errorf(core.CodeInternal, "render config of '%s': %v", name, err)
	}
	writeJSON(w, body)
	return nil
}
