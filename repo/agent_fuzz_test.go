package repo

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzChecksumKey: whatever a checksum key says, the agent answers with
// one of its errors or none, and reads (reports a digest for) only files
// inside the model folder: a secret beside the folder, whose digest the
// value names, never matches.
func FuzzChecksumKey(f *testing.F) {
	for _, seed := range []string{"MD5:1/model.onnx", "md5:../secret", "MD5:1/../../secret", "MD5:/etc/passwd", "MD5:", ":", "SHA1:x", "1/model.onnx", "MD5:1/link", "MD5:./1//model.onnx"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		m := agentModel(t, checksumAgent(map[string]string{key: md5Hex("secret")}))
		write(t, filepath.Dir(m.Dir), map[string]string{"secret": "secret"})
		err := RunAgents(context.Background(), m, []int64{1, 2})
		switch {
		case err == nil:
			t.Fatalf("key %q: the secret beside the model folder was read", key)
		case errors.Is(err, ErrChecksumMismatch), errors.Is(err, ErrChecksumKey), errors.Is(err, ErrChecksumFile):
		default:
			t.Fatalf("key %q: unexpected error %v", key, err)
		}
		if strings.Contains(err.Error(), "got: "+md5Hex("secret")) {
			t.Fatalf("key %q: read the secret: %v", key, err)
		}
	})
}
