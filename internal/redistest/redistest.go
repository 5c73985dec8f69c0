// Package redistest starts a real redis-server (the Debian package, which
// .ci/run and the Makefile's test target install) for the response cache
// tests. A test is skipped only when the binary is missing, with the
// reason; with INFERD_REQUIRE_REDIS=1 (CI) that fails the test instead.
//
// It reads the process environment itself: its variables configure the
// test harness, not the server (docs/environment.md).
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process on a loopback port. Stop and Start
// take it away and bring it back on the same port; Pause and Resume stall
// it (SIGSTOP/SIGCONT) with its connections open.
type Server struct {
	Host string
	Port int
	args []string
	bin  string
	t    testing.TB
	cmd  *exec.Cmd
}

// Addr is host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Start runs redis-server without persistence; extra are further
// redis-server options (e.g. "--requirepass", "secret"). The server is
// stopped when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("INFERD_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server is required (INFERD_REQUIRE_REDIS=1): %v", err)
		}
		t.Skipf("redis-server is not installed (apt-get install redis-server), so the Redis cache tests do not run: %v", err)
	}
	port := 0 // TLS only
	if !slices.Contains(extra, "--tls-port") {
		port = freePort(t)
	}
	s := &Server{Host: "127.0.0.1", Port: port, bin: bin, t: t,
		args: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, extra...)}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// StartTLS runs redis-server serving TLS only (Debian's build has it), with
// a certificate for 127.0.0.1 signed by a fresh CA; caFile is the CA's
// PEM file, for the client's cacert. Clients need no certificate.
func StartTLS(t testing.TB, extra ...string) (s *Server, caFile string) {
	t.Helper()
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCerts(t, dir)
	port := freePort(t)
	args := append([]string{"--tls-port", strconv.Itoa(port), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no"}, extra...)
	s = Start(t, args...)
	s.Port = port
	return s, caFile
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Restart starts the process again after Stop (on the same port).
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var lines []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Ready to accept connections") {
				ready <- nil
				for sc.Scan() { // drain, so the server never blocks on its log
				}
				return
			}
			lines = append(lines, sc.Text())
		}
		ready <- fmt.Errorf("redis-server exited before it was ready:\n%s", strings.Join(lines, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			s.t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		s.Stop()
		s.t.Fatal("redis-server did not become ready in 30 s")
	}
}

// Stop kills the process and waits for it (a no-op when stopped).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stalls the server: connections stay open, nothing is answered.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume ends a Pause.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }
