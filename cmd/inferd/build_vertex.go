//go:build inferd_vertex

package main

// buildName: see build_full.go.
const buildName = "inferd-vertex"
