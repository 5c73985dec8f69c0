//go:build !notrace

package core

// TracingBuilt says the tracing hooks are compiled in (build without the
// notrace tag); the notrace build exists to measure what they cost.
const TracingBuilt = true
