// Package modroot finds the module's root folder, for tests and test helpers
// that need files kept there (third_party, the source tree).
package modroot

import (
	"errors"
	"os"
	"path/filepath"
)

// Dir walks up from the working directory (the package's, under go test) to
// the folder holding go.mod.
func Dir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
