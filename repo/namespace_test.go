package repo

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
)

// TestSetNamespacing: with Namespacing a name in two roots is one model
// per root, keyed "<root>::<name>"; FindAll lists its roots in order and
// FindIn finds it in one root only.
func TestSetNamespacing(t *testing.T) {
	ctx := context.Background()
	a, b := t.TempDir(), t.TempDir()
	write(t, a, map[string]string{"one/1/": "", "dup/1/": ""})
	write(t, b, map[string]string{"two/1/": "", "dup/1/": ""})
	// b first: FindAll orders roots, not flags.
	set, err := OpenAll(ctx, []string{b, a})
	if err != nil {
		t.Fatal(err)
	}
	set.Namespacing = true
	models, dups, err := set.Scan(ctx)
	if err != nil || dups != nil {
		t.Fatalf("scan: %v, dups %v", err, dups)
	}
	want := []string{Key(a, "dup"), Key(a, "one"), Key(b, "dup"), Key(b, "two")}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(models)); !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	if loc := models[Key(b, "dup")]; loc.Model != "dup" || loc.Source.String() != b {
		t.Errorf("%s::dup at %s %s", b, loc.Source, loc.Model)
	}
	locs, err := set.FindAll(ctx, "dup")
	if err != nil || len(locs) != 2 || locs[0].Source.String() != min(a, b) || locs[1].Source.String() != max(a, b) {
		t.Errorf("FindAll(dup) = %v, %v", locs, err)
	}
	if locs, err := set.FindAll(ctx, "absent"); err != nil || len(locs) != 0 {
		t.Errorf("FindAll(absent) = %v, %v", locs, err)
	}
	if loc, err := set.FindIn(ctx, a, "one"); err != nil || loc.Source.String() != a {
		t.Errorf("FindIn(a, one) = %v, %v", loc, err)
	}
	for _, c := range []struct{ root, name string }{{b, "one"}, {"/elsewhere", "one"}} {
		if _, err := set.FindIn(ctx, c.root, c.name); !errors.Is(err, ErrModelNotFound) {
			t.Errorf("FindIn(%s, %s) = %v", c.root, c.name, err)
		}
	}
	if Key("", "m") != "m" || Key("/r", "m") != "/r::m" {
		t.Errorf("Key: %q %q", Key("", "m"), Key("/r", "m"))
	}
}
