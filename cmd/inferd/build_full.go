//go:build !inferd_sagemaker && !inferd_vertex && !inferd_lambda

package main

// buildName names this build in the errors of the parts it leaves out
// (builds.go). The per-cloud builds are chosen with one of the tags
// inferd_sagemaker, inferd_vertex or inferd_lambda; two at once declare
// buildName twice and fail to compile, which is the point.
const buildName = "inferd"
