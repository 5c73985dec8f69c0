//go:build !race

package gpu

// bundleGoFlags: see race_test.go.
const bundleGoFlags = ""
