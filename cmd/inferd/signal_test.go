package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as inferd itself, so the signal test
// runs the real main in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("INFERD_TEST_AS_MAIN") == "1" {
		args := strings.Fields(os.Getenv("INFERD_TEST_ARGS"))
		if argv := os.Getenv("INFERD_TEST_ARGV"); argv != "" {
			// Arguments with spaces, as a JSON array.
			args = nil
			if err := json.Unmarshal([]byte(argv), &args); err != nil {
				panic(err)
			}
		}
		// argv[0] stays the name the binary was run under (tritonserver
		// through a link).
		os.Args = append([]string{os.Args[0]}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSIGTERM starts inferd as a process, serves a request, sends SIGTERM and
// expects a clean exit 0 with the models unloaded.
func TestSIGTERM(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "INFERD_TEST_AS_MAIN=1",
		"INFERD_TEST_ARGS=--model-repository=../../examples/model_repository --http-port=0 --metrics-port=0 --grpc-port=0 --http-address=127.0.0.1 --exit-timeout-secs=5")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	addr := regexp.MustCompile(`] "serving" http=(\S+)`)
	var base string
	deadline := time.After(60 * time.Second)
	for base == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("inferd exited before serving")
			}
			if m := addr.FindStringSubmatch(l); m != nil {
				base = "http://" + m[1]
			}
		case <-deadline:
			t.Fatal("inferd did not start")
		}
	}
	if s, body := post(t, base+"/v2/models/simple/infer", readmeExample); s != 200 {
		t.Fatalf("infer: %d %s", s, body)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for l := range lines {
		log.WriteString(l + "\n")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v\n%s", err, log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("inferd did not exit after SIGTERM")
	}
	if !strings.Contains(log.String(), "unloading models") {
		t.Errorf("no unload in the log:\n%s", log.String())
	}
}
