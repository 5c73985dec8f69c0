package repo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/inferd/inferd/repo/modelconfig"
	"github.com/inferd/inferd/repo/modelfile"
)

// A label_filename resolves inside the model folder after links and names
// a regular file no larger than maxLabelBytes: before, a link in the
// model folder served the file it points to as labels (the lexical check
// let it through), a FIFO held the load and /dev/zero read for ever.
func TestLabelsConfined(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	write(t, root, map[string]string{"secret": "root:x:0:0\n", "m/labels.txt": "a\nb\n", "m/sub/more.txt": "c\n", "m/1/": ""})
	for link, target := range map[string]string{"out.txt": "../secret", "zero.txt": "/dev/zero", "inner.txt": "sub/more.txt"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(dir, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(maxLabelBytes + 1); err != nil { // sparse: takes no disk
		t.Fatal(err)
	}
	big.Close()
	for _, tc := range []struct {
		file, first string
		err         error
	}{
		{"labels.txt", "a", nil},
		{"inner.txt", "c", nil},
		{"sub/../labels.txt", "a", nil},
		{"out.txt", "", modelfile.ErrOutside},
		{"../secret", "", modelfile.ErrOutside},
		{filepath.Join(root, "secret"), "", modelfile.ErrOutside},
		{"zero.txt", "", modelfile.ErrOutside},
		{"fifo.txt", "", modelfile.ErrNotRegular},
		{"sub", "", modelfile.ErrNotRegular},
		{"big.txt", "", modelfile.ErrTooLarge},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cfg, err := modelconfig.Parse([]byte(strings.Replace(onnxConfig, "labels.txt", tc.file, 1)))
			if err != nil {
				t.Fatal(err)
			}
			m := &Model{Dir: dir, Config: cfg}
			labels, err := m.Labels()
			if tc.err != nil {
				want := "output 'y' label_filename '" + tc.file + "' " + tc.err.Error()
				if !errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("Labels = %v, %v; want %q", labels, err, want)
				}
				return
			}
			if err != nil || len(labels["y"]) == 0 || labels["y"][0] != tc.first {
				t.Fatalf("Labels = %v, %v; want first label %q", labels, err, tc.first)
			}
		})
	}
}
