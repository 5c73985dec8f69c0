// Package redis is the response cache in Redis, configured as Triton's
// redis cache is (triton-inference-server/redis_cache README.md): one
// --cache-config=redis,<key>=<value> per setting.
package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/inferd/inferd/core/cache"
)

// Defaults that keep a slow or missing Redis from slowing requests much.
// Triton's redis cache waits forever unless told otherwise; inferd bounds
// connecting and each command unless connect_timeout or socket_timeout is
// set (0 asks for no bound, as in Triton).
const (
	DefaultConnectTimeout = 500 * time.Millisecond
	DefaultSocketTimeout  = 500 * time.Millisecond
	// DefaultWaitTimeout is Triton's wait for a pooled connection.
	DefaultWaitTimeout = time.Second
	// pause is how long the cache is skipped (every lookup a miss) after
	// Redis failed, so that an outage costs requests one timeout per
	// pause rather than one each.
	pause = time.Second
)

// Environment variables Triton's redis cache reads the credentials from;
// user and password settings override them.
const (
	EnvUsername = "TRITONCACHE_REDIS_USERNAME"
	EnvPassword = "TRITONCACHE_REDIS_PASSWORD"
)

// Cache is a response cache in Redis. It implements cache.Store: Redis
// failing (gone, stalled, refusing the credentials) makes lookups misses
// and insertions no-ops, with one warning per episode.
type Cache struct {
	client *goredis.Client
	addr   string
	log    *slog.Logger
	pause  time.Duration

	mu        sync.Mutex
	downUntil time.Time // skip Redis until then
	down      bool      // in an episode: warned, not yet recovered
}

// New connects to Redis with the given settings and pings it: a Redis that
// cannot be reached stops the start, as in Triton. getenv supplies the
// credential variables (the binary hands down its environment's,
// cmd/inferd env.go; docs/environment.md).
func New(ctx context.Context, settings map[string]string, getenv func(string) string, log *slog.Logger) (*Cache, error) {
	opts, err := Options(settings, getenv)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// go-redis writes its own lines (a failed dial, each time) to stderr
	// in its own layout; the cache reports an episode once itself, so the
	// client's lines go to the debug level of the first cache's log.
	clientLog.Do(func() { goredis.SetLogger(debugLog{log}) })
	c := &Cache{client: goredis.NewClient(opts), addr: opts.Addr, log: log, pause: pause}
	pctx, cancel := context.WithTimeout(ctx, max(opts.DialTimeout, DefaultConnectTimeout)+max(opts.ReadTimeout, 0))
	defer cancel()
	if err := c.client.Ping(pctx).Err(); err != nil {
		_ = c.client.Close()
		return nil, initError("cannot reach Redis at %s: %w", opts.Addr, err)
	}
	return c, nil
}

// clientLog sets the client library's logger once: it is the library's
// process-wide setting.
var clientLog sync.Once

// debugLog hands the client library's lines to a logger at debug level.
type debugLog struct{ log *slog.Logger }

func (d debugLog) Printf(ctx context.Context, format string, v ...any) {
	d.log.DebugContext(ctx, fmt.Sprintf(format, v...))
}

// initError words an error as Triton's redis cache does.
func initError(format string, args ...any) error {
	return fmt.Errorf("Failed to initialize RedisCache: "+format, args...)
}

// known are the settings Triton's redis cache reads.
var known = map[string]bool{
	"host": true, "port": true, "user": true, "password": true, "db": true,
	"connect_timeout": true, "socket_timeout": true, "pool_size": true, "wait_timeout": true,
	"tls_enabled": true, "cert": true, "key": true, "cacert": true, "cacert_dir": true, "sni": true,
}

// Options maps the settings onto the client's options.
func Options(settings map[string]string, getenv func(string) string) (*goredis.Options, error) {
	host, hasHost := settings["host"]
	port, hasPort := settings["port"]
	if !hasHost || !hasPort {
		//lint:ignore ST1005 Triton's exact wording.
		return nil, errors.New("Failed to initialize RedisCache, didn't specify address. Must at a minimum specify 'host' and 'port' in the configuration - e.g. tritonserver --cache-config redis,host=redis --cache-config redis,port=6379 --model-repository=/models ...")
	}
	for k := range settings {
		if !known[k] {
			return nil, initError("unknown setting %q", k)
		}
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	opts := &goredis.Options{
		Addr:        net.JoinHostPort(host, port),
		Username:    getenv(EnvUsername),
		Password:    getenv(EnvPassword),
		DialTimeout: DefaultConnectTimeout, ReadTimeout: DefaultSocketTimeout, WriteTimeout: DefaultSocketTimeout,
		PoolTimeout: DefaultWaitTimeout,
		// A cache answers now or not at all: no retries, and no client
		// name command a restricted ACL user might be refused.
		MaxRetries:      -1,
		DialerRetries:   1,
		DisableIdentity: true,
	}
	if v, ok := settings["user"]; ok {
		opts.Username = v
	}
	if v, ok := settings["password"]; ok {
		opts.Password = v
	}
	if _, err := strconv.Atoi(port); err != nil {
		return nil, initError("port=%q is not a number", port)
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, num := range []struct {
		key string
		min int
		set func(n int)
	}{
		{"db", 0, func(n int) { opts.DB = n }},
		// 0: no bound of inferd's; the client's own 5 s dial bound stays.
		{"connect_timeout", 0, func(n int) { opts.DialTimeout = ms(n) }},
		{"socket_timeout", 0, func(n int) {
			d := ms(n)
			if n == 0 {
				d = -1 // no timeout
			}
			opts.ReadTimeout, opts.WriteTimeout = d, d
		}},
		{"pool_size", 1, func(n int) { opts.PoolSize = n }},
		{"wait_timeout", 0, func(n int) { opts.PoolTimeout = ms(n) }},
	} {
		v, ok := settings[num.key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < num.min {
			return nil, initError("%s=%q is not a whole number of at least %d", num.key, v, num.min)
		}
		num.set(n)
	}
	if settings["tls_enabled"] == "true" {
		cfg, err := tlsConfig(settings, host)
		if err != nil {
			return nil, err
		}
		opts.TLSConfig = cfg
	}
	return opts, nil
}

// tlsConfig builds the client's TLS from cert/key (client certificate),
// cacert and cacert_dir (trusted roots; the system's when neither is set)
// and sni (the server name; host by default).
func tlsConfig(settings map[string]string, host string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if sni := settings["sni"]; sni != "" {
		cfg.ServerName = sni
	}
	cert, key := settings["cert"], settings["key"]
	if (cert == "") != (key == "") {
		return nil, initError("TLS needs both 'cert' and 'key', or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, initError("TLS certificate %s and key %s: %w", cert, key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	var files []string
	if f := settings["cacert"]; f != "" {
		files = append(files, f)
	}
	if dir := settings["cacert_dir"]; dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, initError("cacert_dir: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(files) > 0 {
		pool := x509.NewCertPool()
		for _, f := range files {
			pem, err := os.ReadFile(f)
			if err != nil {
				return nil, initError("CA certificate: %w", err)
			}
			if !pool.AppendCertsFromPEM(pem) && f == settings["cacert"] {
				return nil, initError("CA certificate %s holds no PEM certificate", f)
			}
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Lookup implements cache.Store.
func (c *Cache) Lookup(ctx context.Context, key string) ([]byte, bool) {
	if c.skipping() {
		return nil, false
	}
	v, err := c.client.Get(ctx, key).Bytes()
	if errors.Is(err, goredis.Nil) {
		c.answered()
		return nil, false
	}
	if err != nil {
		c.failed(ctx, "Timeout retrieving key: ", "Failed to retrieve key: ", key, err)
		return nil, false
	}
	c.answered()
	return v, true
}

// Insert implements cache.Store. An entry goes in only if the key is
// free, so that two misses of one key count one insertion.
func (c *Cache) Insert(ctx context.Context, key string, entry []byte) error {
	if c.skipping() {
		return nil
	}
	ok, err := c.client.SetNX(ctx, key, entry, 0).Result()
	if err != nil {
		c.failed(ctx, "Timeout inserting key: ", "Failed to insert key: ", key, err)
		return nil
	}
	c.answered()
	if !ok {
		return fmt.Errorf("key '%s' already exists: %w", key, cache.ErrExists)
	}
	return nil
}

// skipping reports whether to leave Redis alone: in an episode, every
// call but one per pause, which probes whether Redis answers again.
func (c *Cache) skipping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down {
		return false
	}
	now := time.Now()
	if now.Before(c.downUntil) {
		return true
	}
	c.downUntil = now.Add(c.pause) // this call probes; the others skip
	return false
}

// failed starts or extends an episode; only its start is logged, in the
// words of Triton's redis cache. A request's own cancellation is no
// episode.
func (c *Cache) failed(ctx context.Context, timeoutMsg, msg, key string, err error) {
	if ctx.Err() != nil {
		return
	}
	c.mu.Lock()
	first := !c.down
	c.down = true
	c.downUntil = time.Now().Add(c.pause)
	c.mu.Unlock()
	if first {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			msg = timeoutMsg
		}
		c.log.Warn(fmt.Sprintf("%s%s. %v", msg, key, err),
			"redis", c.addr, "effect", "requests miss the response cache until Redis answers again")
	}
}

// answered ends an episode.
func (c *Cache) answered() {
	c.mu.Lock()
	recovered := c.down
	c.down = false
	c.mu.Unlock()
	if recovered {
		c.log.Info("Redis answers again: the response cache is back", "redis", c.addr)
	}
}

// Close implements cache.Store.
func (c *Cache) Close() error { return c.client.Close() }
