//go:build race

package gpu

// bundleGoFlags builds the CI bundle with -race when the test itself is, so
// that `make test` (go test -race) links it from the packages it compiled.
const bundleGoFlags = "-race"
