package core

// TestBatching is the batching scheduler the core's tests run their models
// on: core/dynamic's, which imports the core and so only an external test
// file may import (dynamic_test.go sets it before any test runs).
var TestBatching Batching

// newTestServer is NewServer with the tests' batching scheduler.
func newTestServer(o Options) *Server {
	if o.Batching == nil {
		o.Batching = TestBatching
	}
	return NewServer(o)
}
