package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestNewLocalSettings(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		want     string // error substring; "" = ok
	}{
		{map[string]string{"size": "1024"}, ""},
		{map[string]string{}, "didn't contain a valid 'size' field"},
		{map[string]string{"size": "-1"}, "'size' config must be a string or uint type"},
		{map[string]string{"size": "1k"}, "'size' config must be a string or uint type"},
		{map[string]string{"size": "1", "sise": "2"}, `unknown setting "sise"`},
	} {
		c, err := NewLocal(tc.settings)
		if tc.want == "" {
			if err != nil || c.Size() != 1024 {
				t.Errorf("%v: %v, size %v", tc.settings, err, c)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.settings, err, tc.want)
		}
	}
}

func TestLocalEvictsLeastRecentlyUsedByBytes(t *testing.T) {
	ctx := context.Background()
	c := NewLocalSize(10)
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Insert(ctx, k, []byte("123")); err != nil {
			t.Fatal(err)
		}
	}
	// a is used, so b is now the least recently used.
	if v, ok := c.Lookup(ctx, "a"); !ok || string(v) != "123" {
		t.Fatalf("lookup a = %q, %v", v, ok)
	}
	if err := c.Insert(ctx, "d", []byte("4444")); err != nil { // 9+4 > 10: evict b, then 10 fits
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.Lookup(ctx, k); ok != want {
			t.Errorf("after eviction %s present = %v, want %v", k, ok, want)
		}
	}
	if err := c.Insert(ctx, "a", []byte("x")); !errors.Is(err, ErrExists) {
		t.Errorf("second insert of a: %v, want ErrExists", err)
	}
	err := c.Insert(ctx, "big", make([]byte, 11))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "Requested byte_size: 11 is greater than total cache size: 10") {
		t.Errorf("oversized insert: %v", err)
	}
	if _, ok := c.Lookup(ctx, "a"); !ok {
		t.Error("an oversized insert evicted entries")
	}
	st := c.Stats()
	if st.Entries != 3 || st.Evictions != 1 || st.Util != 1.0 || st.Hits+st.Misses != st.Lookups || st.Misses != 1 {
		t.Errorf("stats %+v", st)
	}
	// A full-size entry evicts everything else.
	if err := c.Insert(ctx, "full", make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Entries != 1 || st.Evictions != 4 {
		t.Errorf("after a full-size insert: %+v", st)
	}
}
