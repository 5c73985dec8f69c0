// Package trace is Triton's request tracing (triton-inference-server/server
// docs/user_guide/trace.md and docs/protocol/extension_trace.md): the trace settings, global and per model, with the settings
// API's parse rules and error texts; the sampler (rate, count); the
// `triton` mode, which writes Triton's JSON trace records to a file with
// rotation by log frequency; and the `opentelemetry` mode, which exports
// spans over OTLP/HTTP through a batch span processor, continuing a
// caller's W3C trace context.
//
// The inference pipeline (platforms/infer) asks a Manager for each
// inference request whether it is traced (Start); a request that is not
// gets nil, and costs the core one nil check (core.Trace).
package trace

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/inferd/inferd/core"
	"github.com/inferd/inferd/platforms/protocol"
)

// Level is a set of trace levels; 0 is OFF.
type Level uint8

// Trace levels, as Triton's TRITONSERVER_InferenceTraceLevel.
const (
	LevelTimestamps Level = 1 << iota
	LevelTensors
)

// Names lists the level as the settings API shows it: ["OFF"], or the set
// levels, TIMESTAMPS first.
func (l Level) Names() []string {
	if l == 0 {
		return []string{"OFF"}
	}
	var out []string
	if l&LevelTimestamps != 0 {
		out = append(out, "TIMESTAMPS")
	}
	if l&LevelTensors != 0 {
		out = append(out, "TENSORS")
	}
	return out
}

// Mode is the trace mode: Triton's own records, or OpenTelemetry spans.
type Mode uint8

// Trace modes.
const (
	ModeTriton Mode = iota
	ModeOpenTelemetry
)

func (m Mode) String() string {
	if m == ModeOpenTelemetry {
		return "opentelemetry"
	}
	return "triton"
}

// Defaults of the trace settings (trace.md).
const (
	DefaultRate = 1000
	DefaultURL  = "http://localhost:4318/v1/traces"
	// DefaultServiceName is the service.name resource attribute unless
	// --trace-config opentelemetry,resource=service.name=... says otherwise.
	DefaultServiceName = "triton-inference-server"
)

// Config is the start-up trace configuration: --trace-config in all its
// forms and the deprecated --trace-* flags.
type Config struct {
	Level        Level
	Rate         uint32
	Count        int32
	LogFrequency uint32
	File         string
	Mode         Mode

	// OpenTelemetry mode: the OTLP/HTTP endpoint, the resource attributes
	// (in order; a later key wins) and the batch span processor's
	// settings (0: the SDK's default, or its OTEL_BSP_* variable).
	URL                                                        string
	Resource                                                   [][2]string
	BSPMaxQueueSize, BSPScheduleDelayMs, BSPMaxExportBatchSize uint32

	// Extra are the mode's own settings, as the settings API lists them
	// after trace_mode (OpenTelemetry mode only, as Triton).
	Extra [][2]string
}

// DefaultConfig is the configuration without any trace flag: OFF.
func DefaultConfig() Config {
	return Config{Rate: DefaultRate, Count: -1, URL: DefaultURL}
}

// Deprecated are the deprecated flags' values, nil (or empty) when not
// given: --trace-file, --trace-level (repeatable), --trace-rate,
// --trace-count and --trace-log-frequency.
type Deprecated struct {
	File                      *string
	Levels                    []string
	Rate, Count, LogFrequency *int
}

// ParseConfig reads the --trace-config values (each
// "[<mode>,]<setting>=<value>") over the deprecated flags, which they
// override, as Triton's command-line parser does: global settings are
// level (repeatable, the levels add up; OFF anywhere wins), rate, count and
// mode; `triton,` settings (file, log-frequency) apply in triton mode and
// `opentelemetry,` ones (url, resource, bsp_max_queue_size,
// bsp_schedule_delay, bsp_max_export_batch_size) in opentelemetry mode.
// Unknown settings are ignored, as Triton.
func ParseConfig(values []string, dep Deprecated) (Config, error) {
	b := &configBuilder{c: DefaultConfig()}
	if err := b.deprecated(dep); err != nil {
		return b.c, err
	}
	modeSettings, err := b.global(values)
	if err != nil {
		return b.c, err
	}
	if b.c.Mode == ModeTriton {
		if dep.File != nil {
			b.c.File = *dep.File
		}
		if dep.LogFrequency != nil {
			b.c.LogFrequency = uint32(*dep.LogFrequency)
		}
	}
	var bsp [3]bool
	for _, s := range modeSettings {
		if s.mode != b.c.Mode.String() {
			continue // another mode's setting: unused, as Triton
		}
		if err := b.modeSetting(s, &bsp); err != nil {
			return b.c, err
		}
	}
	if b.c.Mode == ModeOpenTelemetry {
		// The batch span processor's settings are listed even when not
		// given, with their defaults, as Triton does.
		for i, d := range [3][2]string{{"bsp_max_queue_size", "2048"}, {"bsp_schedule_delay", "5000"}, {"bsp_max_export_batch_size", "512"}} {
			if !bsp[i] {
				b.c.Extra = append(b.c.Extra, d)
			}
		}
	}
	if b.disable {
		b.c.Level = 0
	}
	return b.c, nil
}

// configBuilder is ParseConfig's configuration while it reads the values.
type configBuilder struct {
	c       Config
	disable bool // OFF was among the levels: it wins at the end
}

// modeSetting is a "<mode>,<setting>=<value>" value, applied once the mode
// is known.
type modeSetting struct{ mode, key, value string }

// addLevel adds a level (the levels add up).
func (b *configBuilder) addLevel(v string) error {
	l, off, err := parseLevelFlag(v)
	if err != nil {
		return err
	}
	b.disable = b.disable || off
	b.c.Level |= l
	return nil
}

// deprecated reads the deprecated flags, which --trace-config overrides.
func (b *configBuilder) deprecated(dep Deprecated) error {
	for _, v := range dep.Levels {
		if err := b.addLevel(v); err != nil {
			return fmt.Errorf("--trace-level: %w", err)
		}
	}
	if dep.Rate != nil {
		n, err := flagRange(*dep.Rate, 0)
		if err != nil {
			return fmt.Errorf("bad option --trace-rate: %w", err)
		}
		b.c.Rate = uint32(n)
	}
	if dep.Count != nil {
		n, err := flagRange(*dep.Count, -1)
		if err != nil {
			return fmt.Errorf("bad option --trace-count: %w", err)
		}
		b.c.Count = int32(n)
	}
	if dep.LogFrequency != nil {
		if _, err := flagRange(*dep.LogFrequency, 0); err != nil {
			return fmt.Errorf("bad option --trace-log-frequency: %w", err)
		}
	}
	return nil
}

// global applies the global settings of values in order and returns the
// mode settings, with their mode's canonical name.
func (b *configBuilder) global(values []string) ([]modeSetting, error) {
	var modeSettings []modeSetting
	for _, v := range values {
		mode, key, value, err := splitSetting(v)
		if err != nil {
			return nil, err
		}
		if mode != "" {
			m, err := parseMode(mode)
			if err != nil {
				return nil, err
			}
			modeSettings = append(modeSettings, modeSetting{m.String(), key, value})
			continue
		}
		bad := func(err error) error { return fmt.Errorf("bad option --trace-config %s: %w", key, err) }
		switch key {
		case "rate":
			n, err := flagInt(value, 0)
			if err != nil {
				return nil, bad(err)
			}
			b.c.Rate = uint32(n)
		case "count":
			n, err := flagInt(value, -1)
			if err != nil {
				return nil, bad(err)
			}
			b.c.Count = int32(n)
		case "level":
			if err := b.addLevel(value); err != nil {
				return nil, bad(err)
			}
		case "mode":
			m, err := parseMode(value)
			if err != nil {
				return nil, bad(err)
			}
			b.c.Mode = m
		}
	}
	return modeSettings, nil
}

// modeSetting applies a setting of the configured mode; bsp records which
// batch span processor settings were given.
func (b *configBuilder) modeSetting(s modeSetting, bsp *[3]bool) error {
	c := &b.c
	bad := func(err error) error { return fmt.Errorf("bad option --trace-config %s,%s: %w", s.mode, s.key, err) }
	u32 := func() (uint32, error) {
		n, err := strconv.ParseUint(s.value, 10, 32)
		if err != nil {
			return 0, bad(fmt.Errorf("%q is not an unsigned 32-bit integer", s.value))
		}
		return uint32(n), nil
	}
	var err error
	switch c.Mode {
	case ModeTriton:
		switch s.key {
		case "file":
			c.File = s.value
		case "log-frequency":
			var n int
			if n, err = flagInt(s.value, 0); err == nil {
				c.LogFrequency = uint32(n)
			} else {
				err = bad(err)
			}
		}
	case ModeOpenTelemetry:
		extra := s.value
		switch s.key {
		case "url":
			c.URL = s.value
		case "resource":
			k, v, _ := strings.Cut(s.value, "=")
			c.Resource = append(c.Resource, [2]string{k, v})
		case "bsp_max_queue_size":
			c.BSPMaxQueueSize, err = u32()
			bsp[0] = true
		case "bsp_schedule_delay":
			c.BSPScheduleDelayMs, err = u32()
			bsp[1] = true
		case "bsp_max_export_batch_size":
			c.BSPMaxExportBatchSize, err = u32()
			bsp[2] = true
		}
		c.Extra = append(c.Extra, [2]string{s.key, extra})
	}
	return err
}

// splitSetting splits "[<mode>,]<setting>=<value>": the mode is what
// comes before a comma that precedes the first "=".
func splitSetting(v string) (mode, key, value string, err error) {
	rest := v
	eq := strings.IndexByte(v, '=')
	if i := strings.IndexByte(v, ','); i >= 0 && (eq < 0 || i < eq) {
		mode, rest = v[:i], v[i+1:]
		if mode == "" {
			return "", "", "", fmt.Errorf("no trace mode specified in --trace-config %q: the format is <trace mode>,<setting>=<value> or <setting>=<value>", v)
		}
	}
	key, value, ok := strings.Cut(rest, "=")
	if !ok || key == "" || value == "" {
		return "", "", "", fmt.Errorf("--trace-config %q: the format is <trace mode>,<setting>=<value>", v)
	}
	return mode, key, value, nil
}

func parseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "triton":
		return ModeTriton, nil
	case "opentelemetry":
		return ModeOpenTelemetry, nil
	}
	return 0, fmt.Errorf("invalid value for trace mode option: %s. Available options are \"triton\" and \"opentelemetry\"", s)
}

// parseLevelFlag reads a command-line level (any case): off/false, or
// timestamps (also true, on, min, max), or tensors.
func parseLevelFlag(s string) (l Level, off bool, err error) {
	switch strings.ToLower(s) {
	case "off", "false":
		return 0, true, nil
	case "true", "on", "min", "max", "timestamps":
		return LevelTimestamps, false, nil
	case "tensors":
		return LevelTensors, false, nil
	}
	return 0, false, fmt.Errorf("invalid value for trace level option: %s", s)
}

// flagInt reads a command-line rate, count or log frequency: a 32-bit
// integer, lo or more (-1 for a count, which means no limit; 0 for the
// others, which are unsigned where they are used and would wrap).
func flagInt(s string, lo int) (int, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a 32-bit integer", s)
	}
	return flagRange(int(n), lo)
}

// flagRange checks a command-line value (a deprecated flag's, already an
// integer) as flagInt does.
func flagRange(n, lo int) (int, error) {
	if n < lo || n > math.MaxInt32 {
		return 0, fmt.Errorf("%d is out of range [ %d, %d ]", n, lo, math.MaxInt32)
	}
	return n, nil
}

// Update is one change of the settings API (Triton's NewSetting): a nil
// field is left as it is, a Clear flag falls back to the global setting
// (for a model) or the start-up one (for the global setting).
type Update struct {
	Level                                           *Level
	Rate                                            *uint32
	Count                                           *int32
	LogFrequency                                    *uint32
	ClearLevel, ClearRate, ClearCount, ClearLogFreq bool
}

// Empty says the update changes nothing.
func (u *Update) Empty() bool {
	return u.Level == nil && u.Rate == nil && u.Count == nil && u.LogFrequency == nil &&
		!u.ClearLevel && !u.ClearRate && !u.ClearCount && !u.ClearLogFreq
}

// Errors of the settings API, worded as Triton's frontends.
var (
	ErrFileUpdate = core.Errorf(core.CodeUnsupported, "trace file location can not be updated through network protocol")
	ErrOffAndMore = core.Errorf(core.CodeInvalidArg, "Expect only one trace level 'OFF' is specified")
)

// ErrUnknownModel answers a per-model request for a model whose latest
// version is not READY (or that is unknown); the space before the colon is
// Triton's.
func ErrUnknownModel(model string) error {
	return core.Errorf(core.CodeInvalidArg, "Request for unknown model : %s", model)
}

// SetLevels applies a trace_level list to u: OFF alone turns tracing off,
// OFF with anything else is an error, unknown names are ignored (a list
// of only unknown names changes nothing).
func (u *Update) SetLevels(names []string) error {
	var l Level
	set := false
	for _, n := range names {
		switch n {
		case "OFF":
			if len(names) != 1 {
				return ErrOffAndMore
			}
			set = true
		case "TIMESTAMPS":
			l |= LevelTimestamps
			set = true
		case "TENSORS":
			l |= LevelTensors
			set = true
		}
	}
	if set {
		u.Level = &l
	}
	return nil
}

// Set applies one numeric setting (trace_rate, trace_count or
// log_frequency) given as text, parsed as C's stoi: leading blanks, a
// sign and digits, the rest ignored. countMsg words the trace_count < -1
// error, which differs between the frontends. Other keys are ignored.
func (u *Update) Set(key, s string, countMsg func(string) string) error {
	n, err := stoi(s)
	switch {
	case err == errNoDigits:
		return core.Errorf(core.CodeInvalidArg, "Unable to parse '%s', got: %s", key, s)
	case err != nil && key == "trace_count":
		return core.Errorf(core.CodeInvalidArg, "Unable to parse '%s', value is out of range [ -1, 2147483647 ], got: %s", key, s)
	case err != nil:
		return core.Errorf(core.CodeInvalidArg, "Unable to parse '%s', value is out of range [ 0, 4294967295 ], got: %s", key, s)
	}
	switch key {
	case "trace_rate":
		r := uint32(n) // a negative rate wraps, as Triton's assignment of stoi's int
		u.Rate = &r
	case "trace_count":
		if n < -1 {
			return core.Errorf(core.CodeInvalidArg, "%s", countMsg(s))
		}
		c := n
		u.Count = &c
	case "log_frequency":
		f := uint32(n)
		u.LogFrequency = &f
	}
	return nil
}

// Clear marks key to fall back (a JSON null, or an empty gRPC list).
func (u *Update) Clear(key string) {
	switch key {
	case "trace_level":
		u.ClearLevel = true
	case "trace_rate":
		u.ClearRate = true
	case "trace_count":
		u.ClearCount = true
	case "log_frequency":
		u.ClearLogFreq = true
	}
}

// HTTPCountMsg and GRPCCountMsg are the frontends' words for a trace_count
// below -1 (HTTP has no space after "got:").
func HTTPCountMsg(s string) string {
	return "Unable to parse 'trace_count'. Expecting value >= -1, got:" + s
}

// GRPCCountMsg is gRPC's text for a trace_count below -1.
func GRPCCountMsg(s string) string {
	return "Unable to parse 'trace_count'. Expecting value >= -1, got: " + s
}

type stoiError string

func (e stoiError) Error() string { return string(e) }

const (
	errNoDigits   = stoiError("no digits")
	errOutOfRange = stoiError("out of range")
)

// stoi is C++'s std::stoi: optional leading white space and sign, then
// decimal digits up to the first other byte; no digits, or a value beyond
// a 32-bit int, is an error.
func stoi(s string) (int32, error) {
	neg, mag, digits, overflow := protocol.CInteger(s)
	switch {
	case !digits:
		return 0, errNoDigits
	case overflow || (neg && mag > 1<<31) || (!neg && mag > 1<<31-1):
		return 0, errOutOfRange
	case neg:
		return int32(-int64(mag)), nil
	}
	return int32(mag), nil
}
