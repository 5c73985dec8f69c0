package options

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrHelp is returned by Parse for --help.
var ErrHelp = errors.New("help requested")

// Values are the parsed command line.
type Values struct {
	byName map[string]*Option
	order  []*Option           // all options, table order
	set    map[string][]string // canonical name -> values given, in order
	given  []string            // canonical names, first-given order
}

// Parse reads args with Triton's grammar:
//   - `--name=value` or `--name value` (the next word is the value even
//     when it starts with "-", as getopt takes it);
//   - every option takes a value but --help, --version and
//     --disable-auto-complete-config;
//   - a unique prefix of a name stands for it (an exact name always wins);
//   - a repeated option keeps every value when it is repeatable, else the
//     last wins;
//   - any other word is an error.
//
// Every value is checked now, planned and no-op options included, so a
// launch line that works today keeps working when their features land.
func Parse(args []string) (*Values, error) {
	v := newValues()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "--") || len(a) == 2 {
			return nil, fmt.Errorf("unexpected argument %q", a)
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		o, err := v.lookup(name)
		if err != nil {
			return nil, err
		}
		if o.Kind == None {
			if hasValue {
				return nil, fmt.Errorf("option --%s takes no value (got %q)", o.Name, value)
			}
			if o.Name == "help" {
				return nil, ErrHelp
			}
			v.record(o, "true")
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				return nil, fmt.Errorf("option --%s requires a value", o.Name)
			}
			i++
			value = args[i]
		}
		if err := parseValue(o.Kind, value); err != nil {
			return nil, fmt.Errorf("invalid value for --%s: %v", o.Name, err)
		}
		if o.Check != nil {
			if err := o.Check(value); err != nil {
				return nil, fmt.Errorf("invalid value for --%s: %v", o.Name, err)
			}
		}
		v.record(o, value)
	}
	return v, nil
}

func newValues() *Values {
	v := &Values{byName: map[string]*Option{}, set: map[string][]string{}}
	for _, o := range All() {
		v.byName[o.Name] = o
		v.order = append(v.order, o)
	}
	return v
}

func (v *Values) record(o *Option, value string) {
	name := o.Name
	if o.Alias != "" {
		name = o.Alias
	}
	if _, seen := v.set[name]; !seen {
		v.given = append(v.given, o.Name)
	} else if o.Alias != "" && !slices.Contains(v.given, o.Name) {
		v.given = append(v.given, o.Name)
	}
	v.set[name] = append(v.set[name], value)
}

// lookup finds an option by its name or a unique prefix of it.
func (v *Values) lookup(name string) (*Option, error) {
	if o, ok := v.byName[name]; ok {
		return o, nil
	}
	var matches []*Option
	if name != "" {
		for _, o := range v.order {
			if strings.HasPrefix(o.Name, name) {
				matches = append(matches, o)
			}
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		if s := v.suggest(name); s != "" {
			return nil, fmt.Errorf("unknown option --%s (did you mean --%s?)", name, s)
		}
		return nil, fmt.Errorf("unknown option --%s", name)
	}
	names := make([]string, len(matches))
	for i, o := range matches {
		names[i] = "--" + o.Name
	}
	return nil, fmt.Errorf("option --%s is ambiguous: %s", name, strings.Join(names, ", "))
}

// suggest is the known name closest to name in edit distance, when close
// enough to be a typo.
func (v *Values) suggest(name string) string {
	best, bestD := "", max(2, len(name)/3)+1
	for _, o := range v.order {
		if d := editDistance(name, o.Name); d < bestD {
			best, bestD = o.Name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Given reports whether the option (or its alias) was on the command line.
func (v *Values) Given(name string) bool {
	_, ok := v.set[v.canonical(name)]
	return ok
}

func (v *Values) canonical(name string) string {
	o, ok := v.byName[name]
	if !ok {
		panic("options: no option --" + name)
	}
	if o.Alias != "" {
		return o.Alias
	}
	return name
}

// String is the option's last value, or its default.
func (v *Values) String(name string) string {
	if vals := v.set[v.canonical(name)]; len(vals) > 0 {
		return vals[len(vals)-1]
	}
	return v.byName[name].Default
}

// List is every value of a repeatable option, in order.
func (v *Values) List(name string) []string { return slices.Clone(v.set[v.canonical(name)]) }

// Bool is the option's boolean value.
func (v *Values) Bool(name string) bool {
	b, _ := ParseBool(v.String(name))
	if v.byName[name].Kind == None {
		return v.Given(name)
	}
	return b
}

// Int is the option's integer value (0 when unset without a default).
func (v *Values) Int(name string) int {
	if v.byName[name].Kind == IntBool {
		n, _ := parseIntBool(v.String(name))
		return n
	}
	n, _ := strconv.ParseInt(v.String(name), 10, 64)
	return int(n)
}

// Int64 is the option's 64-bit integer value.
func (v *Values) Int64(name string) int64 {
	n, _ := strconv.ParseInt(v.String(name), 10, 64)
	return n
}

// Duration is the option's duration (a bare number is seconds).
func (v *Values) Duration(name string) time.Duration {
	s, _ := parseDuration(v.String(name))
	return time.Duration(s * float64(time.Second))
}

// Inert lists the given options that do not take effect here: planned
// ones ("--allow-grpc (gRPC)") and no-ops, each once, in the order given.
func (v *Values) Inert() (planned, noop []string) {
	for _, name := range v.given {
		o := v.byName[name]
		switch o.Status {
		case Planned:
			planned = append(planned, "--"+o.Name+" ("+o.Feature+")")
		case NoOp:
			noop = append(noop, "--"+o.Name)
		}
	}
	return planned, noop
}
