//go:build inferd_lambda

package main

// buildName: see build_full.go.
const buildName = "inferd-lambda"
