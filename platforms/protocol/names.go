package protocol

import "github.com/inferd/inferd/core"

// Names is the duplicate-name check of one request's inputs or requested
// outputs, made by every transport (Triton's core makes it as each input
// and output is added: "already exists in request" in
// triton-inference-server/core src/infer_request.cc). The zero value is
// empty; a few names are scanned in place, more go to a map, so neither a
// small request allocates nor a large one costs quadratic time.
type Names struct {
	small [8]string
	n     int
	set   map[string]struct{}
}

// Add records name and reports whether it was already there.
func (s *Names) Add(name string) (repeated bool) {
	if s.set == nil {
		for _, v := range s.small[:s.n] {
			if v == name {
				return true
			}
		}
		if s.n < len(s.small) {
			s.small[s.n] = name
			s.n++
			return false
		}
		s.set = make(map[string]struct{}, 2*len(s.small))
		for _, v := range s.small {
			s.set[v] = struct{}{}
		}
	}
	if _, ok := s.set[name]; ok {
		return true
	}
	s.set[name] = struct{}{}
	return false
}

// DuplicateInput is the error for an input named twice in request id.
func DuplicateInput(id, name string) error {
	return invalidArg(core.RequestPrefix(id) + "input '" + name + "' already exists in request")
}

// DuplicateOutput is the error for an output requested twice.
func DuplicateOutput(name string) error {
	return invalidArg("output '" + name + "' already exists in request")
}

// RegionTooSmall is the error for an output larger than the span of
// shared memory its request gave it (regionSize bytes), as Triton's
// response allocators word it (InferResponseAlloc in
// triton-inference-server/server src/http_server.cc and
// src/grpc/infer_handler.cc): INTERNAL, HTTP 500.
func RegionTooSmall(output string, regionSize uint64, size int) error {
	return core.Errorf(core.CodeInternal, "shared memory size specified with the request for output '%s' (%d bytes) should be at least %d bytes to hold the results",
		output, regionSize, size)
}
