package httpapi

import (
	"net/http"
	"strconv"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/codec"
	"github.com/inferd/inferd/repo/modelconfig"
)

// TritonVersion is the Triton release whose HTTP behaviour this server
// reproduces; clients read it from GET /v2.
const TritonVersion = "2.73.0"

// extensions lists only what this server really implements, in Triton's order.
var extensions = []string{"classification", "model_repository", "model_configuration", "binary_tensor_data", "parameters", "statistics"}

func serverMetadata(id string) []byte {
	b := codec.AppendString([]byte(`{"name":`), id)
	b = append(b, `,"version":`...)
	b = codec.AppendString(b, TritonVersion)
	b = append(b, `,"extensions":[`...)
	for i, e := range extensions {
		if i > 0 {
			b = append(b, ',')
		}
		b = codec.AppendString(b, e)
	}
	return append(b, "]}"...)
}

func (s *Server) live(w http.ResponseWriter, _ *http.Request) {
	if s.exiting.Load() {
		writeErrorStatus(w, http.StatusServiceUnavailable, "Server exiting")
		return
	}
	writeEmpty(w, http.StatusOK)
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	switch {
	case s.exiting.Load():
		writeErrorStatus(w, http.StatusServiceUnavailable, "Server exiting")
	case s.core.Ready():
		writeEmpty(w, http.StatusOK)
	default:
		writeEmpty(w, http.StatusBadRequest)
	}
}

func (s *Server) serverMeta(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.meta) }

func (s *Server) modelMeta(w http.ResponseWriter, _ *http.Request, name string, version int64) {
	mv, release, err := s.core.Acquire(name, version)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	cfg := mv.Config
	b := []byte(`{"name":`)
	b = codec.AppendString(b, name)
	b = append(b, `,"versions":[`...)
	if version != core.LatestVersion {
		b = codec.AppendString(b, strconv.FormatInt(version, 10))
	} else {
		for i, v := range s.core.ReadyVersions(name) {
			if i > 0 {
				b = append(b, ',')
			}
			b = codec.AppendString(b, strconv.FormatInt(v.Version, 10))
		}
	}
	b = append(b, `],"platform":`...)
	platform := cfg.GetPlatform()
	if platform == "" {
		platform = cfg.GetBackend()
	}
	b = codec.AppendString(b, platform)
	batching := cfg.GetMaxBatchSize() >= 1
	b = append(b, `,"inputs":[`...)
	for i, in := range cfg.GetInput() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTensorMeta(b, in.GetName(), in.GetDataType(), in.GetDims(), batching)
	}
	b = append(b, `],"outputs":[`...)
	for i, out := range cfg.GetOutput() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTensorMeta(b, out.GetName(), out.GetDataType(), out.GetDims(), batching)
	}
	writeJSON(w, append(b, "]}"...))
}

func appendTensorMeta(b []byte, name string, dt modelconfig.DataType, dims []int64, batching bool) []byte {
	b = append(b, `{"name":`...)
	b = codec.AppendString(b, name)
	b = append(b, `,"datatype":`...)
	b = codec.AppendString(b, core.DataType(dt).String())
	b = append(b, `,"shape":[`...)
	if batching {
		b = append(b, "-1"...)
	}
	for i, d := range dims {
		if i > 0 || batching {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return append(b, "]}"...)
}

func (s *Server) modelReady(w http.ResponseWriter, _ *http.Request, name string, version int64) {
	if s.core.ModelReady(name, version) {
		writeEmpty(w, http.StatusOK)
		return
	}
	// Every not-ready case, unknown models included, answers 400 as every
	// released Triton does (http-api.md §5.2).
	writeErrorStatus(w, http.StatusBadRequest, "Model version not ready")
}

func (s *Server) modelConfig(w http.ResponseWriter, _ *http.Request, name string, version int64) {
	mv, release, err := s.core.Acquire(name, version)
	if err != nil {
		writeError(w, err)
		return
	}
	defer release()
	body, err := modelconfig.MarshalJSON(mv.Config)
	if err != nil {
		writeError(w, core.Errorf(core.CodeInternal, "render config of '%s': %v", name, err))
		return
	}
	writeJSON(w, body)
}
