// Command genmodels writes the generated files of the example model
// repositories (see package examples) under the examples folder. Run it
// through `go generate ./examples`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/inferd/inferd/examples"
)

func main() {
	out := flag.String("out", ".", "the examples folder, which holds the model repositories to write")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "genmodels:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	files, err := examples.Repository()
	if err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
