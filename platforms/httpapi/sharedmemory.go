package httpapi

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
	"github.com/inferd/inferd/platforms/shm"
	"github.com/inferd/inferd/platforms/tritonjson"
)

// The shared-memory extension's routes (triton-inference-server/server
// docs/protocol/extension_shared_memory.md), answered as
// HandleSystemSharedMemory and HandleCudaSharedMemory in
// src/http_server.cc answer them: restriction, then method, then the
// action. Options.SharedMemory nil is --allow-client-shm=false: status
// still answers (no regions), register and unregister are refused.

func (s *Server) sharedMemoryRoutes(r chi.Router) {
	for _, kind := range []shm.Kind{shm.System, shm.CUDA} {
		prefix := "/v2/" + kind.String() + "sharedmemory"
		status := s.handle("shared-memory", getOnly, func(w http.ResponseWriter, r *http.Request) error {
			return s.shmStatus(w, r, kind)
		})
		register := s.handle("shared-memory", postOnly, func(w http.ResponseWriter, r *http.Request) error {
			return s.shmRegister(w, r, kind)
		})
		unregister := s.handle("shared-memory", postOnly, func(w http.ResponseWriter, r *http.Request) error {
			err := protocol.ShmUnregister(r.Context(), s.opts.SharedMemory, kind, chi.URLParam(r, "region"))
			if err != nil {
				return err
			}
			writeJSON(w, nil)
			return nil
		})
		for _, p := range []string{prefix, prefix + "/region/{region}"} {
			r.HandleFunc(p+"/status", status)
			r.HandleFunc(p+"/register", register)
			r.HandleFunc(p+"/unregister", unregister)
		}
	}
}

// shmStatus answers the regions of kind as a JSON array: name, key, offset
// and byte_size for system regions; name, device_id and byte_size for CUDA
// ones (SharedMemoryManager::GetStatus in src/shared_memory_manager.cc).
func (s *Server) shmStatus(w http.ResponseWriter, r *http.Request, kind shm.Kind) error {
	regions, err := protocol.ShmStatus(s.opts.SharedMemory, kind, chi.URLParam(r, "region"))
	if err != nil {
		return err
	}
	b := []byte{'['}
	for i, st := range regions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = tritonjson.AppendString(b, st.Name)
		if kind == shm.System {
			b = append(b, `,"key":`...)
			b = tritonjson.AppendString(b, st.Key)
			b = append(b, `,"offset":`...)
			b = strconv.AppendUint(b, st.Offset, 10)
		} else {
			b = append(b, `,"device_id":`...)
			b = strconv.AppendUint(b, uint64(st.DeviceID), 10)
		}
		b = append(b, `,"byte_size":`...)
		b = strconv.AppendUint(b, st.ByteSize, 10)
		b = append(b, '}')
	}
	writeJSON(w, append(b, ']'))
	return nil
}

// shmRegister registers the region the URL names, from the body's fields;
// the checks and their order are Triton's: the switch, the region name,
// (CUDA) the CPU-only refusal before the body is read, then each field.
func (s *Server) shmRegister(w http.ResponseWriter, r *http.Request, kind shm.Kind) error {
	m := s.opts.SharedMemory
	name := chi.URLParam(r, "region")
	switch {
	case m == nil:
		return protocol.ErrShmDisabled
	case name == "":
		return core.Errorf(core.CodeInvalidArg, "'region name' is necessary to register %s shared memory region", kind)
	case kind == shm.CUDA && !protocol.ShmCUDASupported(m):
		return protocol.ShmCUDAUnsupported(name)
	}
	body, err := s.readJSONBody(r)
	if err != nil {
		return err
	}
	// An empty body is parsed too, and fails as invalid JSON
	// (EVRequestToJsonAllowsEmpty).
	doc, err := tritonjson.ParseJSON(body)
	if err != nil {
		return err
	}
	if kind == shm.System {
		err = registerSystem(m, name, doc.Root())
	} else {
		err = registerCUDA(m, name, doc.Root())
	}
	if err != nil {
		return err
	}
	writeJSON(w, nil)
	return nil
}

// registerSystem reads {"key", "offset" (optional), "byte_size"}. A type
// error is TritonJson's text, INTERNAL, as in Triton.
func registerSystem(m *shm.Manager, name string, req tritonjson.Value) error {
	keyJSON, ok := req.Find("key")
	if !ok {
		return core.Errorf(core.CodeInvalidArg, "Shared memory register request has no 'key' field")
	}
	// Triton passes the key on as a C string: it ends at a NUL.
	key, err := keyJSON.CString()
	if err != nil {
		return err
	}
	var offset uint64
	if v, ok := req.Find("offset"); ok {
		if offset, err = v.Uint64(); err != nil {
			return err
		}
	}
	sizeJSON, ok := req.Find("byte_size")
	if !ok {
		return core.Errorf(core.CodeInvalidArg, "Shared memory register request has no 'byte_size' field")
	}
	byteSize, err := sizeJSON.Uint64()
	if err != nil {
		return err
	}
	return protocol.ShmRegisterSystem(m, name, key, offset, byteSize)
}

// registerCUDA reads {"raw_handle": {"b64"}, "byte_size", "device_id"}, the
// handle in base64 decoded as Triton's decoder does (characters outside
// the alphabet skipped).
func registerCUDA(m *shm.Manager, name string, req tritonjson.Value) error {
	handleJSON, ok := req.Find("raw_handle")
	if !ok {
		return core.Errorf(core.CodeInvalidArg, "Shared memory register request has no 'raw_handle' field")
	}
	b64, err := handleJSON.MemberString("b64")
	if err != nil {
		return err
	}
	byteSize, err := req.MemberUint64("byte_size")
	if err != nil {
		return err
	}
	deviceID, err := req.MemberUint64("device_id")
	if err != nil {
		return err
	}
	return protocol.ShmRegisterCUDA(m, name, protocol.LenientBase64(string(b64)), int64(deviceID), byteSize)
}
