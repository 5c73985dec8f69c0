//go:build inferd_sagemaker

package main

// buildName: see build_full.go.
const buildName = "inferd-sagemaker"
