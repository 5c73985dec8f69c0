//go:build notrace

package core

// TracingBuilt is false in the notrace build: every tracing hook compiles
// away, the baseline against which the hooks' cost is measured.
const TracingBuilt = false
