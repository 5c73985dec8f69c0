// Package azurite starts Azurite, Microsoft's Azure Storage emulator (the
// npm package azurite, which speaks the real Blob protocol), for tests of
// as:// repositories, and puts blobs into it.
//
// The emulator is found at $INFERD_AZURITE (the azurite-blob script), then
// under third_party/azurite (where `make azurite` installs it), then on
// PATH. A test is skipped only when it cannot be started, with the reason;
// with INFERD_REQUIRE_AZURITE=1 (CI) that fails the test instead.
//
// It reads the process environment itself: its variables configure the
// test harness, not the server (docs/environment.md).
package azurite

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/inferd/inferd/internal/modroot"
)

// Server is one running emulator holding one storage account.
type Server struct {
	// Endpoint is the account's blob service URL (path-style:
	// http://127.0.0.1:<port>/<account>).
	Endpoint string
	Account  string
	Key      string // base64 shared key
	client   *azblob.Client
}

// ConnectionString is a storage connection string for the account.
func (s *Server) ConnectionString() string {
	return fmt.Sprintf("BlobEndpoint=%s;AccountName=%s;AccountKey=%s", s.Endpoint, s.Account, s.Key)
}

// Client is a blob client of the account, authenticated by its key.
func (s *Server) Client() *azblob.Client { return s.client }

var listening = regexp.MustCompile(`listens on (http://[0-9.]+:[0-9]+)`)

// Start runs azurite-blob in memory on a free loopback port with a fresh
// account named account and a random key, and stops it when the test ends.
func Start(t testing.TB, account string) *Server {
	t.Helper()
	bin, err := find()
	if err != nil {
		unavailable(t, err)
	}
	keyBytes := make([]byte, 64)
	if _, err := rand.Read(keyBytes); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString(keyBytes)
	cmd := exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
		"--skipApiVersionCheck", "--disableTelemetry", "--silent")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "AZURITE_ACCOUNTS="+account+":"+key)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &output{url: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		unavailable(t, fmt.Errorf("start %s: %w", bin, err))
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		// The process group: node may have started helpers.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	var base string
	const within = 90 * time.Second
	select {
	case base = <-out.url:
	case <-exited:
		unavailable(t, fmt.Errorf("%s exited before listening: %s", bin, strings.TrimSpace(out.String())))
	case <-time.After(within):
		stop()
		unavailable(t, fmt.Errorf("%s not listening after %s: %s", bin, within, strings.TrimSpace(out.String())))
	}
	t.Cleanup(stop)
	s := &Server{Endpoint: base + "/" + account, Account: account, Key: key}
	cred, err := azblob.NewSharedKeyCredential(account, key)
	if err != nil {
		t.Fatal(err)
	}
	if s.client, err = azblob.NewClientWithSharedKeyCredential(s.Endpoint, cred, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// output keeps the start of the emulator's output and hands on the URL it
// says it listens at.
type output struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	url  chan string
	sent bool
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.buf.Len() < 64<<10 {
		o.buf.Write(p)
	}
	if !o.sent {
		if m := listening.FindSubmatch(o.buf.Bytes()); m != nil {
			o.sent = true
			o.url <- string(m[1])
		}
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// find locates the azurite-blob script.
func find() (string, error) {
	if p := os.Getenv("INFERD_AZURITE"); p != "" {
		return p, nil
	}
	if root, err := modroot.Dir(); err == nil {
		p := filepath.Join(root, "third_party", "azurite", "node_modules", ".bin", "azurite-blob")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("azurite-blob"); err == nil {
		return p, nil
	}
	return "", errors.New("azurite-blob not found: run `make azurite` (npm install of the azurite package into third_party/azurite), put it on PATH or set INFERD_AZURITE")
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("INFERD_REQUIRE_AZURITE") == "1" {
		t.Fatalf("Azurite is required (INFERD_REQUIRE_AZURITE=1) but cannot be started: %v", err)
	}
	t.Skipf("Azurite cannot be started, so the Azure Blob Storage tests do not run: %v", err)
}

// CreateContainer creates a container.
func (s *Server) CreateContainer(t testing.TB, name string) {
	t.Helper()
	if _, err := s.client.CreateContainer(context.Background(), name, nil); err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
}

// Put uploads data as one blob in one request, so the service records
// its Content-MD5.
func (s *Server) Put(t testing.TB, cont, name string, data []byte) {
	t.Helper()
	bb := s.client.ServiceClient().NewContainerClient(cont).NewBlockBlobClient(name)
	if _, err := bb.Upload(context.Background(), nopCloser{bytes.NewReader(data)}, nil); err != nil {
		t.Fatalf("put %s/%s: %v", cont, name, err)
	}
}

// PutBlocks uploads data as staged blocks committed together, with no
// Content-MD5, as large files are uploaded.
func (s *Server) PutBlocks(t testing.TB, cont, name string, data []byte, blockSize int) {
	t.Helper()
	ctx := context.Background()
	bb := s.client.ServiceClient().NewContainerClient(cont).NewBlockBlobClient(name)
	var ids []string
	for i := 0; i*blockSize < len(data); i++ {
		id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "block-%08d", i))
		block := data[i*blockSize : min((i+1)*blockSize, len(data))]
		if _, err := bb.StageBlock(ctx, id, nopCloser{bytes.NewReader(block)}, nil); err != nil {
			t.Fatalf("stage block %d of %s/%s: %v", i, cont, name, err)
		}
		ids = append(ids, id)
	}
	if _, err := bb.CommitBlockList(ctx, ids, nil); err != nil {
		t.Fatalf("commit %s/%s: %v", cont, name, err)
	}
}

// Delete removes a blob.
func (s *Server) Delete(t testing.TB, cont, name string) {
	t.Helper()
	if _, err := s.client.DeleteBlob(context.Background(), cont, name, nil); err != nil {
		t.Fatalf("delete %s/%s: %v", cont, name, err)
	}
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }
