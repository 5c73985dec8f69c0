// Package options is tritonserver's command line: every option of
// `tritonserver --help` (plus inferd's own), parsed with Triton's grammar
// (`--name value` or `--name=value`, booleans that take a value, unique
// prefixes, repeatable options) and printed in Triton's help groups.
//
// Each option says what it does here: it is in effect, its feature is
// planned (parsed and validated, reported at start-up until the feature's
// issue lands), or it has no meaning for an ONNX Runtime server (accepted
// and reported once).
package options

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/inferd/inferd/repo/modelconfig"
)

// Kind is how an option's value is parsed.
type Kind int

// Value kinds, as Triton's parsers read them (but strict: "8000abc" is not
// an integer here, where Triton's stoi would read 8000).
const (
	None     Kind = iota // takes no value (--help, --disable-auto-complete-config)
	Bool                 // true/false, on/off, 1/0, any case
	Int                  // 32-bit signed
	Int64                // 64-bit signed
	Float                // float64
	String               // any text
	Duration             // Go duration (inferd's own timeouts)
	IntBool              // --log-verbose: an integer, or true (1) / false (0)
)

// Status says whether an option takes effect in this server.
type Status int

// Statuses.
const (
	Active  Status = iota // does what Triton's does
	Planned               // parsed and validated; its feature is not built yet
	NoOp                  // means nothing for an ONNX Runtime server
)

// Option is one command-line option.
type Option struct {
	Name    string
	Group   string
	Kind    Kind
	Label   string // the value's label in --help ("" derives it from Kind)
	Default string // as the user would write it; "" for none
	Repeat  bool   // every occurrence is kept (otherwise the last wins)
	Status  Status
	// Feature names what a Planned option waits for, or why a NoOp one
	// has no meaning here.
	Feature string
	Inferd  bool   // inferd's own option, not Triton's
	Alias   string // the option this one is another name for
	Usage   string
	// Check validates a value beyond its kind (formats, ranges, enums).
	Check func(v string) error
}

// Groups are Triton's help groups, in its order; "inferd" holds options
// Triton does not have.
var Groups = []string{"", "Server", "Logging", "Model Repository", "HTTP", "GRPC", "Sagemaker", "Vertex", "Metrics",
	"Tracing", "Backend", "Repository Agent", "Response Cache", "Rate Limiter", "Memory/Device Management",
	"Shared Memory", "DEPRECATED"}

// ParseBool reads a boolean as Triton does: true/on/1 and false/off/0, in
// any case.
func ParseBool(v string) (bool, error) {
	b, err := modelconfig.ParseBool(v) // the same spellings as config parameters
	if err != nil {
		return false, fmt.Errorf("invalid value for bool option: %q (want true/false, on/off or 1/0)", v)
	}
	return b, nil
}

// parseValue checks v against kind.
func parseValue(kind Kind, v string) error {
	var err error
	switch kind {
	case Bool:
		_, err = ParseBool(v)
	case Int:
		_, err = strconv.ParseInt(v, 10, 32)
	case Int64:
		_, err = strconv.ParseInt(v, 10, 64)
	case Float:
		_, err = strconv.ParseFloat(v, 64)
	case Duration:
		_, err = parseDuration(v)
	case IntBool:
		_, err = parseIntBool(v)
	}
	if ne, ok := err.(*strconv.NumError); ok {
		if ne.Err == strconv.ErrRange {
			return fmt.Errorf("%q is out of range", v)
		}
		return fmt.Errorf("%q is not %s", v, article(kind))
	}
	return err
}

func article(k Kind) string {
	switch k {
	case Int, Int64:
		return "an integer"
	case Float:
		return "a number"
	}
	return "valid"
}

func parseIntBool(v string) (int, error) {
	switch strings.ToLower(v) {
	case "true":
		return 1, nil
	case "false":
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer, true or false", v)
	}
	return int(n), nil
}

// parseDuration reads a Go duration; a bare number is seconds.
func parseDuration(v string) (float64, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		return n, nil
	}
	d, err := timeParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 30s, 5m, 1h)", v)
	}
	return d.Seconds(), nil
}

func (o *Option) label() string {
	if o.Label != "" {
		return o.Label
	}
	switch o.Kind {
	case Bool:
		return "boolean"
	case Int, Int64, IntBool:
		return "integer"
	case Float:
		return "float"
	case Duration:
		return "duration"
	case String:
		return "string"
	}
	return ""
}
