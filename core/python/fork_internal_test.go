package python

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/repo/modelconfig"
)

func forkConfig(value string) *modelconfig.ModelConfig {
	cfg := &modelconfig.ModelConfig{Name: "m"}
	if value != "-" {
		cfg.Parameters = map[string]*modelconfig.ModelParameter{forkParam: {StringValue: value}}
	}
	return cfg
}

// TestForkRequested: FORK_INSTANCES is a boolean, off when absent; any
// other value fails the load with a clear error.
func TestForkRequested(t *testing.T) {
	for _, tc := range []struct {
		value string
		on    bool
		err   bool
	}{
		{"-", false, false},
		{"", false, false},
		{"true", true, false},
		{" TRUE ", true, false},
		{"1", true, false},
		{"false", false, false},
		{"yes", false, true},
	} {
		on, err := forkRequested(forkConfig(tc.value))
		if on != tc.on || (err != nil) != tc.err {
			t.Errorf("FORK_INSTANCES=%q: %v, %v", tc.value, on, err)
		}
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != core.CodeInvalidArg || !strings.Contains(err.Error(), "FORK_INSTANCES") {
				t.Errorf("FORK_INSTANCES=%q: error %v", tc.value, err)
			}
		}
		if checkErr := checkParameters(forkConfig(tc.value)); (checkErr != nil) != tc.err {
			t.Errorf("checkParameters with FORK_INSTANCES=%q: %v", tc.value, checkErr)
		}
	}
}

// TestZygoteForKinds: only KIND_CPU instances of a model that asks share
// a zygote (one per loaded configuration); a GPU instance is refused with
// a warning and starts a worker of its own. The last release forgets the
// zygote.
func TestZygoteForKinds(t *testing.T) {
	var logged bytes.Buffer
	b := New(Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	defer b.Close()
	on, off := forkConfig("true"), forkConfig("false")
	spec := func(cfg *modelconfig.ModelConfig, kind modelconfig.ModelInstanceGroup_Kind, name string) core.InstanceSpec {
		return core.InstanceSpec{VersionFiles: core.VersionFiles{ModelName: "m", Version: 1}, Name: name, Kind: kind, Config: cfg}
	}
	if z := b.zygoteFor(spec(off, modelconfig.ModelInstanceGroup_KIND_CPU, "m_0")); z != nil {
		t.Fatal("a zygote without FORK_INSTANCES")
	}
	if z := b.zygoteFor(spec(on, modelconfig.ModelInstanceGroup_KIND_GPU, "m_0")); z != nil {
		t.Fatal("a zygote for a KIND_GPU instance")
	}
	if !strings.Contains(logged.String(), "FORK_INSTANCES applies to KIND_CPU instances only") || !strings.Contains(logged.String(), "instance=m_0") {
		t.Fatalf("the GPU refusal is not logged:\n%s", logged.String())
	}
	z1 := b.zygoteFor(spec(on, modelconfig.ModelInstanceGroup_KIND_CPU, "m_1"))
	z2 := b.zygoteFor(spec(on, modelconfig.ModelInstanceGroup_KIND_CPU, "m_2"))
	if z1 == nil || z1 != z2 || z1.refs != 2 {
		t.Fatalf("two CPU instances of one load: zygotes %p %p", z1, z2)
	}
	if other := b.zygoteFor(spec(forkConfig("true"), modelconfig.ModelInstanceGroup_KIND_CPU, "m_0")); other == z1 {
		t.Fatal("a reload's instances share the old load's zygote")
	} else {
		b.releaseZygote(other)
	}
	b.releaseZygote(z1)
	b.releaseZygote(z2)
	if len(b.zygotes) != 0 || !z1.closed {
		t.Fatalf("zygotes %v after the last release", b.zygotes)
	}
}
