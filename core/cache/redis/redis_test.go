package redis

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/inferd/inferd/core/cache"
	"github.com/inferd/inferd/internal/redistest"
)

func TestOptions(t *testing.T) {
	env := map[string]string{EnvUsername: "envuser", EnvPassword: "envpass"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name     string
		settings map[string]string
		want     string // error substring; "" = ok
		check    func(t *testing.T, s map[string]string)
	}{
		{"no port", map[string]string{"host": "h"}, "didn't specify address. Must at a minimum specify 'host' and 'port'", nil},
		{"no host", map[string]string{"port": "1"}, "didn't specify address", nil},
		{"unknown", map[string]string{"host": "h", "port": "1", "hots": "x"}, `unknown setting "hots"`, nil},
		{"bad port", map[string]string{"host": "h", "port": "x"}, `port="x" is not a number`, nil},
		{"bad db", map[string]string{"host": "h", "port": "1", "db": "-1"}, `db="-1"`, nil},
		{"bad pool", map[string]string{"host": "h", "port": "1", "pool_size": "0"}, `pool_size="0"`, nil},
		{"cert without key", map[string]string{"host": "h", "port": "1", "tls_enabled": "true", "cert": "c.pem"}, "needs both 'cert' and 'key'", nil},
		{"missing cacert", map[string]string{"host": "h", "port": "1", "tls_enabled": "true", "cacert": "/nonexistent.pem"}, "CA certificate", nil},
		{"defaults and env credentials", map[string]string{"host": "h", "port": "7"}, "", nil},
		{"settings override env", map[string]string{"host": "h", "port": "7", "user": "u", "password": "p", "db": "3",
			"connect_timeout": "20", "socket_timeout": "0", "pool_size": "4", "wait_timeout": "30", "tls_enabled": "true", "sni": "redis.example"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Options(tc.settings, getenv)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Addr != "h:7" {
				t.Errorf("addr %q", o.Addr)
			}
			if _, ok := tc.settings["user"]; ok {
				if o.Username != "u" || o.Password != "p" || o.DB != 3 || o.DialTimeout != 20*time.Millisecond || o.ReadTimeout != -1 ||
					o.PoolSize != 4 || o.PoolTimeout != 30*time.Millisecond || o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.example" {
					t.Errorf("options %+v", o)
				}
				return
			}
			if o.Username != "envuser" || o.Password != "envpass" || o.DialTimeout != DefaultConnectTimeout ||
				o.ReadTimeout != DefaultSocketTimeout || o.PoolTimeout != DefaultWaitTimeout || o.TLSConfig != nil {
				t.Errorf("options %+v", o)
			}
		})
	}
}

func TestUnreachableRedisStopsTheStart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	_, err := New(context.Background(), map[string]string{"host": srv.Host, "port": strconv.Itoa(srv.Port)}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "Failed to initialize RedisCache: cannot reach Redis at "+srv.Addr()) {
		t.Fatalf("error %v", err)
	}
}

func TestCredentials(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "s3cret")
	settings := map[string]string{"host": srv.Host, "port": strconv.Itoa(srv.Port)}
	if _, err := New(context.Background(), settings, nil, nil); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("without a password: %v", err)
	}
	settings["password"] = "wrong"
	if _, err := New(context.Background(), settings, nil, nil); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("with a wrong password: %v", err)
	}
	delete(settings, "password")
	c, err := New(context.Background(), settings, func(k string) string {
		if k == EnvPassword {
			return "s3cret"
		}
		return ""
	}, nil)
	if err != nil {
		t.Fatalf("with %s: %v", EnvPassword, err)
	}
	c.Close()
}

// logCount keeps the messages of records at or above Warn, and of those
// at Info. Debug records are left out: they are the client library's own
// lines (a failed dial each time), which go to the first cache's logger
// of the process, whichever test made it.
type logCount struct {
	mu    sync.Mutex
	warns []string
	infos []string
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.Level >= slog.LevelWarn:
		l.warns = append(l.warns, r.Message)
	case r.Level >= slog.LevelInfo:
		l.infos = append(l.infos, r.Message)
	}
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }
func (l *logCount) counts() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.warns), len(l.infos)
}

func TestStoreAndOutages(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	logs := &logCount{}
	c, err := New(ctx, map[string]string{"host": srv.Host, "port": strconv.Itoa(srv.Port), "socket_timeout": "200"}, nil, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.pause = 100 * time.Millisecond
	if _, ok := c.Lookup(ctx, "k"); ok {
		t.Fatal("hit in an empty Redis")
	}
	if err := c.Insert(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Insert(ctx, "k", []byte("v2")); !errors.Is(err, cache.ErrExists) {
		t.Errorf("second insert: %v, want ErrExists", err)
	}
	if v, ok := c.Lookup(ctx, "k"); !ok || !bytes.Equal(v, []byte("v1")) {
		t.Fatalf("lookup = %q, %v", v, ok)
	}

	// An outage: every call is a miss, quickly, with one warning.
	srv.Stop()
	for range 20 {
		start := time.Now()
		if _, ok := c.Lookup(ctx, "k"); ok {
			t.Fatal("hit while Redis is down")
		}
		if err := c.Insert(ctx, "k2", []byte("x")); err != nil {
			t.Fatalf("insert while Redis is down: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("a call took %v while Redis was down", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w, _ := logs.counts(); w != 1 {
		t.Errorf("%d warnings for one outage, want 1: %v", w, logs.warns)
	}
	srv.Restart() // no persistence: empty again
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := c.Insert(ctx, "k", []byte("v3")); err == nil {
			if v, ok := c.Lookup(ctx, "k"); ok && string(v) == "v3" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache did not come back after Redis restarted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, infos := logs.counts(); infos != 1 {
		t.Errorf("%d recovery notes, want 1: %v", infos, logs.infos)
	}

	// A stall: calls end at the socket timeout, as misses.
	srv.Pause()
	start := time.Now()
	if _, ok := c.Lookup(ctx, "k"); ok {
		t.Error("hit while Redis is stalled")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a lookup took %v while Redis was stalled", d)
	}
	if _, ok := c.Lookup(ctx, "k"); ok {
		t.Error("hit while Redis is stalled")
	}
	srv.Resume()
	if w, _ := logs.counts(); w != 2 {
		t.Errorf("%d warnings after an outage and a stall, want 2: %v", w, logs.warns)
	}
}

// A Redis that starts refusing the credentials mid-run (its password
// changed, connections dropped) turns into misses with one warning, and
// the cache is back once it accepts them again.
func TestRefusedCredentialsMidRun(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	logs := &logCount{}
	c, err := New(ctx, map[string]string{"host": srv.Host, "port": strconv.Itoa(srv.Port)}, nil, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.pause = 50 * time.Millisecond
	if err := c.Insert(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), DisableIdentity: true})
	defer admin.Close()
	if err := admin.ConfigSet(ctx, "requirepass", "changed").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, ok := c.Lookup(ctx, "k"); ok {
			t.Fatal("hit while Redis refuses the credentials")
		}
		time.Sleep(60 * time.Millisecond)
	}
	if w, _ := logs.counts(); w != 1 || !strings.Contains(logs.warns[0], "NOAUTH") {
		t.Errorf("warnings %v, want one naming NOAUTH", logs.warns)
	}
	if err := admin.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if v, ok := c.Lookup(ctx, "k"); !ok || string(v) != "v" {
		t.Errorf("after the credentials are accepted again: %q, %v", v, ok)
	}
}

// TestTLS: a plain client cannot talk to a TLS-only Redis, TLS without the
// CA fails on the certificate, and TLS with it works. The timeouts are
// long: the point is which error, and on a busy machine a handshake may
// outlast the default half second, which would read as a timeout.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	srv, ca := redistest.StartTLS(t)
	settings := map[string]string{"host": srv.Host, "port": strconv.Itoa(srv.Port), "connect_timeout": "20000", "socket_timeout": "20000"}
	if _, err := New(ctx, settings, nil, nil); err == nil {
		t.Error("a plain connection to a TLS-only Redis succeeded")
	}
	settings["tls_enabled"] = "true"
	if _, err := New(ctx, settings, nil, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("TLS without the CA: %v, want a certificate error", err)
	}
	settings["cacert"] = ca
	c, err := New(ctx, settings, nil, nil)
	if err != nil {
		t.Fatalf("TLS with the CA: %v", err)
	}
	defer c.Close()
	if err := c.Insert(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Lookup(ctx, "k"); !ok || string(v) != "v" {
		t.Errorf("lookup over TLS = %q, %v", v, ok)
	}
}

// getCount is a go-redis hook that counts the GET commands the client
// sends to Redis (the lookups; not the handshake of a new connection).
type getCount struct{ n atomic.Int32 }

func (*getCount) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *getCount) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if cmd.Name() == "get" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (*getCount) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// In a stall, after each pause one call probes Redis (and waits for the
// socket timeout) while the calls beside it miss without asking Redis.
// The test counts the commands sent rather than timing the calls, and
// ends the pause itself, so a slow machine cannot make a skipping call
// look like a probe or let the pause run out among the eight calls.
func TestOneProbePerPause(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c, err := New(ctx, map[string]string{"host": srv.Host, "port": strconv.Itoa(srv.Port), "socket_timeout": "300"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := &getCount{}
	c.client.AddHook(sent)
	c.pause = time.Hour // only the test ends a pause
	srv.Pause()
	defer srv.Resume()
	if _, ok := c.Lookup(ctx, "k"); ok { // starts the episode after the timeout
		t.Fatal("hit while stalled")
	}
	if n := sent.n.Load(); n != 1 {
		t.Fatalf("%d GETs for the first lookup, want 1", n)
	}
	// While the pause lasts, every call misses without a command.
	for range 4 {
		c.Lookup(ctx, "k")
	}
	if n := sent.n.Load(); n != 1 {
		t.Fatalf("%d GETs sent during the pause, want none", n-1)
	}
	c.mu.Lock()
	c.downUntil = time.Now() // the pause is over
	c.mu.Unlock()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := c.Lookup(ctx, "k"); ok {
				t.Error("hit while stalled")
			}
		}()
	}
	wg.Wait()
	if n := sent.n.Load() - 1; n != 1 {
		t.Errorf("%d of 8 calls after the pause asked the stalled Redis, want exactly 1 (the probe)", n)
	}
}
