package core

import (
	"context"
	"testing"
	"time"
)

// returnsWithin fails the test when f has not returned after d.
func returnsWithin(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// TestUnloadDrainsOutsideTheModelLock: while an unload waits for an
// in-flight request, a load of the same model goes ahead (the model's
// lock covers only the state change); the draining copy closing later
// leaves the new copy READY.
func TestUnloadDrainsOutsideTheModelLock(t *testing.T) {
	s, b := gateServer(t)
	result := inFlight(s, b, 7)
	unloaded := make(chan error, 1)
	go func() { unloaded <- s.Unload(context.Background(), "m") }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, _ := stateOf(t, s); st == StateUnloading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never UNLOADING")
		}
	}
	returnsWithin(t, 30*time.Second, "a load while the unload drains", func() error { return s.Load(context.Background(), "m", nil) })
	if !s.ModelReady("m", LatestVersion) {
		t.Fatal("not ready after the load")
	}
	close(b.gate)
	if err := <-result; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	if st, reason := stateOf(t, s); st != StateReady || !s.ModelReady("m", LatestVersion) {
		t.Fatalf("after the old copy closed: %v %q", st, reason)
	}
}

// TestBeginUnload: BeginUnload returns while a request is in flight; the
// version shows UNLOADING, takes no new request, and is UNAVAILABLE
// "unloaded" once the request is done.
func TestBeginUnload(t *testing.T) {
	s, b := gateServer(t)
	result := inFlight(s, b, 7)
	returnsWithin(t, 30*time.Second, "BeginUnload", func() error { return s.BeginUnload(context.Background(), "m", false) })
	if st, _ := stateOf(t, s); st != StateUnloading {
		t.Fatalf("state %v after BeginUnload with a request in flight", st)
	}
	if _, err := s.Infer(context.Background(), request(1)); CodeOf(err) != CodeNotFound {
		t.Fatalf("a new request after BeginUnload: %v", err)
	}
	close(b.gate)
	if err := <-result; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, reason := stateOf(t, s); st == StateUnavailable && reason == "unloaded" {
			break
		}
		if time.Now().After(deadline) {
			st, reason := stateOf(t, s)
			t.Fatalf("after the request: %v %q", st, reason)
		}
	}
}

// TestUnloadWhileDraining: an unload of a model that an earlier unload is
// still closing leaves it UNLOADING (it is not unloaded yet) and, when it
// waits, returns only once that close is done.
func TestUnloadWhileDraining(t *testing.T) {
	s, b := gateServer(t)
	result := inFlight(s, b, 7)
	returnsWithin(t, 30*time.Second, "BeginUnload", func() error { return s.BeginUnload(context.Background(), "m", false) })
	returnsWithin(t, 30*time.Second, "a second BeginUnload", func() error { return s.BeginUnload(context.Background(), "m", false) })
	if st, reason := stateOf(t, s); st != StateUnloading {
		t.Fatalf("after a second unload with a request in flight: %v %q", st, reason)
	}
	unloaded := make(chan error, 1)
	go func() { unloaded <- s.Unload(context.Background(), "m") }()
	select {
	case err := <-unloaded:
		t.Fatalf("a waiting unload returned (%v) while the first unload's version is still closing", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(b.gate)
	if err := <-result; err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	returnsWithin(t, 30*time.Second, "the waiting unload", func() error { return <-unloaded })
	if st, reason := stateOf(t, s); st != StateUnavailable || reason != "unloaded" {
		t.Fatalf("after the close: %v %q", st, reason)
	}
}
