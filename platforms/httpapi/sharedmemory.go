package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	v2 "github.com/inferd/inferd/platforms/v2"
)

// Client shared memory is off by default in Triton since 2.69, and inferd
// does not implement it yet, so these routes answer exactly as a Triton
// started without --allow-client-shm: no regions, and register/unregister
// refused (texts in v2, shared with gRPC). The extension is not advertised.

func (s *Server) sharedMemoryRoutes(r chi.Router) {
	for _, kind := range []string{"system", "cuda"} {
		prefix := "/v2/" + kind + "sharedmemory"
		status := s.handle("shared-memory", getOnly, func(w http.ResponseWriter, r *http.Request) {
			region := chi.URLParam(r, "region")
			if region == "" {
				writeJSON(w, []byte("[]"))
				return
			}
			writeErrorStatus(w, http.StatusNotFound, v2.ShmRegionNotFound(kind, region).Msg)
		})
		refused := s.handle("shared-memory", postOnly, func(w http.ResponseWriter, _ *http.Request) {
			writeErrorStatus(w, http.StatusNotImplemented, v2.ShmDisabled)
		})
		for _, p := range []string{prefix, prefix + "/region/{region}"} {
			r.HandleFunc(p+"/status", status)
			r.HandleFunc(p+"/register", refused)
			r.HandleFunc(p+"/unregister", refused)
		}
	}
}
