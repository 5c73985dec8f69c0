package servertest

import (
	"os"
	"os/exec"
	"testing"
)

// Python finds a python3 with numpy for the Python backend's tests:
// INFERD_PYTHON, Debian's /usr/bin/python3, then python3 on PATH (a pyenv
// shim there may lack numpy). CI installs python3-numpy, so finding none
// fails the test rather than skipping it.
func Python(t testing.TB) string {
	t.Helper()
	candidates := []string{os.Getenv("INFERD_PYTHON"), "/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if c != "" && exec.Command(c, "-c", "import numpy").Run() == nil {
			return c
		}
	}
	t.Fatal("no python3 with numpy (install python3-numpy, or set INFERD_PYTHON)")
	return ""
}
