package core_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/internal/servertest"
)

// namespacedRepos writes two roots that both hold `simple` (version 1 in
// a, version 3 in b), an ensemble over `simple` in each, a model only a
// holds and, in b, an ensemble over that model.
func namespacedRepos(t *testing.T) (a, b string) {
	simple3 := servertest.Simple("simple")
	simple3.Versions = []string{"3"}
	a = servertest.WriteRepo(t, map[string]servertest.Model{
		"simple":  servertest.Simple("simple"),
		"chain_a": servertest.Chain("chain_a"),
		"only_a":  servertest.Simple("only_a"),
	})
	b = servertest.WriteRepo(t, map[string]servertest.Model{
		"simple":  simple3,
		"chain_b": servertest.Chain("chain_b"),
		"cross": servertest.Ensemble(servertest.EnsembleConfig("cross", 8, servertest.SimpleInputs, []string{"OUT0:TYPE_INT32:[ 16 ]"},
			servertest.Step{Model: "only_a", In: []string{"INPUT0=IN0", "INPUT1=IN1"}, Out: []string{"OUTPUT0=OUT0"}})),
	})
	return a, b
}

// served is the READY version of name in namespace ns.
func served(t *testing.T, s *core.Server, ns, name string) *core.ModelVersion {
	t.Helper()
	for _, mv := range s.ReadyVersions("") {
		if mv.Namespace == ns && mv.Name == name {
			return mv
		}
	}
	t.Fatalf("%s::%s is not served", ns, name)
	return nil
}

func wantCoreError(t *testing.T, what string, err error, code core.Code, msg string) {
	t.Helper()
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != code || ce.Msg != msg {
		t.Fatalf("%s: got %v (%#v), want code %v %q", what, err, ce, code, msg)
	}
}

// TestNamespacing: with --model-namespacing the same name in two
// repositories loads twice; a request by that name is ambiguous, one by a
// name never loaded is INVALID_ARG, one whose models were all unloaded
// NOT_FOUND (Triton's FindModelIdentifier); ensembles run the model of
// their own repository, else the only one of the name; load and unload
// act on every repository's model of the name.
func TestNamespacing(t *testing.T) {
	a, b := namespacedRepos(t)
	s := servertest.Start(t, servertest.Options{Repo: a, Repos: []string{b}, Namespacing: true})
	ctx := context.Background()
	infer := func(model string) error {
		_, err := s.Infer(ctx, &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{servertest.Int32Rows("IN0", 1, func(i int) int32 { return int32(i) }), servertest.Int32Rows("IN1", 1, func(int) int32 { return 1 })}})
		return err
	}
	inferSimple := func(model string) error {
		_, err := s.Infer(ctx, &core.InferRequest{ModelName: model, ModelVersion: core.LatestVersion,
			Inputs: []*core.Tensor{servertest.Int32Rows("INPUT0", 1, func(i int) int32 { return int32(i) }), servertest.Int32Rows("INPUT1", 1, func(int) int32 { return 1 })}})
		return err
	}

	if served(t, s, a, "simple").Version != 1 || served(t, s, b, "simple").Version != 3 {
		t.Fatal("each repository's simple must serve its own version")
	}
	ambiguous := "There are 2 identifiers of model 'simple' in global map, model namespace must be provided to resolve ambiguity."
	wantCoreError(t, "infer simple", inferSimple("simple"), core.CodeInvalidArg, ambiguous)
	_, _, err := s.Acquire("simple", 1)
	wantCoreError(t, "acquire simple", err, core.CodeInvalidArg, ambiguous)
	if s.ModelReady("simple", core.LatestVersion) || s.ReadyVersions("simple") != nil {
		t.Error("an ambiguous name is neither ready nor has versions")
	}
	wantCoreError(t, "infer nope", inferSimple("nope"), core.CodeInvalidArg, "Request for unknown model: 'nope' is not found")
	servertest.Must(t, inferSimple("only_a"))

	// Each ensemble runs its own repository's simple (two steps each).
	servertest.Must(t, infer("chain_a"))
	if got := served(t, s, a, "simple").Stats.Snapshot().Success.Count; got != 2 {
		t.Errorf("a's simple ran %d times for chain_a, want 2", got)
	}
	if got := served(t, s, b, "simple").Stats.Snapshot().Success.Count; got != 0 {
		t.Errorf("b's simple ran %d times for chain_a, want 0", got)
	}
	servertest.Must(t, infer("chain_b"))
	if got := served(t, s, b, "simple").Stats.Snapshot().Success.Count; got != 2 {
		t.Errorf("b's simple ran %d times for chain_b, want 2", got)
	}
	// b has no only_a: cross runs a's, and its step records the namespace.
	servertest.Must(t, infer("cross"))
	if got := served(t, s, a, "only_a").Stats.Snapshot().Success.Count; got != 2 {
		t.Errorf("only_a ran %d times, want 2 (one direct, one for cross)", got)
	}
	if ns := served(t, s, b, "cross").Config.GetEnsembleScheduling().GetStep()[0].GetModelNamespace(); ns != a {
		t.Errorf("cross's step model_namespace = %q, want %q", ns, a)
	}

	// The index: by repository, then name; both simples under their name.
	index := func() []string {
		entries, err := s.Index(ctx, false)
		servertest.Must(t, err)
		var rows []string
		for _, e := range entries {
			rows = append(rows, e.Name+":"+e.State.String()+":"+e.Reason)
		}
		return rows
	}
	want := []string{"chain_a:READY:", "only_a:READY:", "simple:READY:", "chain_b:READY:", "cross:READY:", "simple:READY:"}
	if got := index(); !slices.Equal(got, want) {
		t.Errorf("index %q, want %q", got, want)
	}

	// Unloading the name unloads both (and the ensembles over them).
	servertest.Must(t, s.Unload(ctx, "simple"))
	wantCoreError(t, "infer unloaded simple", inferSimple("simple"), core.CodeNotFound, "Identifier of model 'simple' is not found in global map")
	want = []string{"chain_a:UNAVAILABLE:unloaded", "only_a:READY:", "simple:UNAVAILABLE:unloaded", "chain_b:UNAVAILABLE:unloaded", "cross:READY:", "simple:UNAVAILABLE:unloaded"}
	if got := index(); !slices.Equal(got, want) {
		t.Errorf("index after unload %q, want %q", got, want)
	}
	// Loading it brings back both, and the ensembles that went with them.
	servertest.Must(t, s.Load(ctx, "simple", nil))
	wantCoreError(t, "infer reloaded simple", inferSimple("simple"), core.CodeInvalidArg, ambiguous)
	servertest.Must(t, infer("chain_a"))
	servertest.Must(t, infer("chain_b"))
	if served(t, s, a, "simple").Version != 1 || served(t, s, b, "simple").Version != 3 {
		t.Fatal("reload: each repository's simple must serve its own version")
	}
	// Unloading one name leaves the other repository's models alone.
	servertest.Must(t, s.Unload(ctx, "only_a"))
	wantCoreError(t, "infer unloaded only_a", inferSimple("only_a"), core.CodeNotFound, "Identifier of model 'only_a' is not found in global map")
}

// TestNamespacingLoadFailures: a name whose model fails in both
// repositories answers one line per repository's model, named
// "<repository>::<name>" as Triton names them.
func TestNamespacingLoadFailures(t *testing.T) {
	bad := servertest.Model{Config: `name: "bad"
backend: "nonexistent"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
`}
	a := servertest.WriteRepo(t, map[string]servertest.Model{"bad": bad})
	b := servertest.WriteRepo(t, map[string]servertest.Model{"bad": bad})
	s := servertest.Start(t, servertest.Options{Repo: a, Repos: []string{b}, Namespacing: true, Mode: core.ModeExplicit})
	err := s.Load(context.Background(), "bad", nil)
	var ce *core.Error
	if !errors.As(err, &ce) || ce.Code != core.CodeInvalidArg {
		t.Fatalf("load: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(ce.Msg, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "load failed for model '"+a+"::bad': ") || !strings.HasPrefix(lines[1], "load failed for model '"+b+"::bad': ") {
		t.Fatalf("load error %q", ce.Msg)
	}
	// A name no repository holds fails to poll, as without namespacing.
	wantCoreError(t, "load nope", s.Load(context.Background(), "nope", nil), core.CodeInternal, "failed to load 'nope', failed to poll from model repository")

	// A copy whose configuration cannot be read fails the load to poll;
	// the other copy loads regardless.
	servertest.WriteModel(t, filepath.Join(a, "half"), servertest.Simple("half"))
	servertest.WriteModel(t, filepath.Join(b, "half"), servertest.Model{Config: "this is not a config"})
	wantCoreError(t, "load half", s.Load(context.Background(), "half", nil), core.CodeInternal, "failed to load 'half', failed to poll from model repository")
	served(t, s, a, "half")
}

// TestNamespacingPoll: in POLL mode a name that appears in a second
// repository loads there too, beside the first; one whose folder goes
// from one repository is unloaded there only.
func TestNamespacingPoll(t *testing.T) {
	a := servertest.WriteRepo(t, map[string]servertest.Model{"simple": servertest.Simple("simple")})
	b := t.TempDir()
	s := servertest.Start(t, servertest.Options{Repo: a, Repos: []string{b}, Namespacing: true, Mode: core.ModePoll})
	ctx := context.Background()
	simple3 := servertest.Simple("simple")
	simple3.Versions = []string{"3"}
	servertest.WriteModel(t, filepath.Join(b, "simple"), simple3)
	servertest.Must(t, s.Poll(ctx))
	if served(t, s, a, "simple").Version != 1 || served(t, s, b, "simple").Version != 3 {
		t.Fatal("both repositories' simple must serve")
	}
	servertest.Must(t, os.RemoveAll(filepath.Join(a, "simple")))
	servertest.Must(t, s.Poll(ctx))
	mv, release, err := s.Acquire("simple", core.LatestVersion)
	servertest.Must(t, err)
	release()
	if mv.Namespace != b || mv.Version != 3 {
		t.Fatalf("after a's simple went: %s version %d serves", mv.Namespace, mv.Version)
	}
}

// TestNamespacingAmbiguousStep: an ensemble whose repository lacks a
// step's model, which two other repositories hold, cannot resolve the
// step and fails to load with Triton's message, naming itself by
// "<repository>::<name>".
func TestNamespacingAmbiguousStep(t *testing.T) {
	a := servertest.WriteRepo(t, map[string]servertest.Model{"simple": servertest.Simple("simple")})
	b := servertest.WriteRepo(t, map[string]servertest.Model{"simple": servertest.Simple("simple")})
	c := servertest.WriteRepo(t, map[string]servertest.Model{"chain": servertest.Chain("chain")})
	s := servertest.Start(t, servertest.Options{Repo: a, Repos: []string{b, c}, Namespacing: true, Mode: core.ModeExplicit})
	err := s.Load(context.Background(), "chain", nil)
	want := "ensemble " + c + "::chain contains models that are not available or ambiguous: simple"
	if err == nil || !strings.HasPrefix(err.Error(), "load failed for model '"+c+"::chain': ") || !strings.Contains(err.Error(), want) {
		t.Fatalf("load chain: %v, want %q", err, want)
	}
	// Both simples loaded as its composing models, and serve.
	if served(t, s, a, "simple") == nil || served(t, s, b, "simple") == nil {
		t.Fatal("the composing models must serve")
	}
}

// TestNamespacingCycles: ensembles that depend on each other fail with
// the cycle, named by "<repository>::<name>", whether the loop stays in
// one repository or runs through another.
func TestNamespacingCycles(t *testing.T) {
	out16 := []string{"OUT0:TYPE_INT32:[ 16 ]", "OUT1:TYPE_INT32:[ 16 ]"}
	step := func(model string) servertest.Step {
		return servertest.Step{Model: model, In: []string{"IN0=IN0", "IN1=IN1"}, Out: []string{"OUT0=OUT0", "OUT1=OUT1"}}
	}
	loop := func(name, next string) servertest.Model {
		return servertest.Ensemble(servertest.EnsembleConfig(name, 8, servertest.SimpleInputs, out16, step(next)))
	}
	a := servertest.WriteRepo(t, map[string]servertest.Model{"loop_a": loop("loop_a", "loop_b"), "loop_b": loop("loop_b", "loop_a"), "x": loop("x", "y")})
	b := servertest.WriteRepo(t, map[string]servertest.Model{"y": loop("y", "x")})
	s := servertest.Start(t, servertest.Options{Repo: a, Repos: []string{b}, Namespacing: true, Mode: core.ModeExplicit})
	for _, tc := range []struct{ model, want string }{
		{"loop_a", "circular dependency between ensembles: " + a + "::loop_a -> " + a + "::loop_b -> " + a + "::loop_a"},
		{"x", "circular dependency between ensembles: " + a + "::x -> " + b + "::y -> " + a + "::x"},
	} {
		done := make(chan error, 1)
		go func() { done <- s.Load(context.Background(), tc.model, nil) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("load %s: %v, want %q", tc.model, err, tc.want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("load %s never ended", tc.model)
		}
	}
}
