package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// Client shared memory is off by default in Triton since 2.69, and inferd
// does not implement it yet, so these routes answer exactly as a Triton
// started without --allow-client-shm: no regions, and register/unregister
// refused. The extension is not advertised.

const shmDisabled = "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable."

func (s *Server) sharedMemoryRoutes(r chi.Router) {
	for _, kind := range []string{"system", "cuda"} {
		prefix := "/v2/" + kind + "sharedmemory"
		status := s.handle("shared-memory", getOnly, func(w http.ResponseWriter, r *http.Request) {
			region := chi.URLParam(r, "region")
			if region == "" {
				writeJSON(w, []byte("[]"))
				return
			}
			writeErrorStatus(w, http.StatusNotFound, "Unable to find "+kind+" shared memory region: '"+region+"'")
		})
		refused := s.handle("shared-memory", postOnly, func(w http.ResponseWriter, _ *http.Request) {
			writeErrorStatus(w, http.StatusNotImplemented, shmDisabled)
		})
		for _, p := range []string{prefix, prefix + "/region/{region}"} {
			r.HandleFunc(p+"/status", status)
			r.HandleFunc(p+"/register", refused)
			r.HandleFunc(p+"/unregister", refused)
		}
	}
}
