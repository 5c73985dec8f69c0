package perf

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The command line of `inferd perf search`: its own flags, split from the
// load flags it shares with `inferd perf`.

// searchOptions are the search's own flags.
type searchOptions struct {
	mode        string // brute or quick
	instances   []int
	maxBatch    []int
	delays      []int // µs; -1: no dynamic batching
	preferred   []int
	concurrency []int
	// rates, when set (--request-rate-range), sweep open-loop request
	// rates instead of concurrency, as Model Analyzer's request rate
	// search does: a constant rate queues as live traffic does, where a
	// closed loop never holds more than its concurrency.
	rates         []float64
	latencyBudget time.Duration // p99; 0: none
	configOut     string
	setBatch      bool // --max-batch-sizes was given
}

const searchUsage = `usage: inferd perf search -m MODEL [search flags] [inferd perf flags]

Tries model configurations on a running server in explicit model control
mode (--model-control-mode=explicit), through load requests with a config
override, measures each over a concurrency sweep (or, with
--request-rate-range, a sweep of open-loop request rates), writes the best one's
config.pbtxt and reloads the model's own configuration at the end.

  --run-config-search-mode brute|quick  brute: every combination (default);
                                  quick: hill-climb from the smallest one
  --instance-counts LIST          instance_group counts (default 1,2,3,4,5)
  --max-batch-sizes LIST          max_batch_size values (default 1,2,4,...,128;
                                  a model with max_batch_size 0 keeps it)
  --dynamic-batching-delays LIST  max_queue_delay_microseconds values; "off"
                                  tries no dynamic batching (default off,0)
  --preferred-batch-sizes LIST    preferred_batch_size of every dynamic
                                  batching configuration (default none)
  --concurrency LIST              concurrency sweep (default 1,2,4,8,16,32;
                                  or --concurrency-range S:E:STEP)
  --latency-budget MS             best throughput with p99 latency within MS
  --config-out FILE               the best config.pbtxt (default MODEL.best.pbtxt)
  --report FILE                   an HTML report with charts

The measurement flags of inferd perf apply to every setting: -u, -b,
--input-data, --shape, -p, -s, --max-trials, --percentile, ...; the search
uses HTTP (-i http).
`

// searchFlagNames are the flags the search reads itself; every other flag
// goes to the measurement's parser.
var searchFlagNames = map[string]bool{
	"run-config-search-mode": true, "instance-counts": true, "max-batch-sizes": true,
	"dynamic-batching-delays": true, "preferred-batch-sizes": true, "concurrency": true,
	"latency-budget": true, "config-out": true,
}

// splitSearchArgs separates the search's flags (each with its value) from
// the rest.
func splitSearchArgs(args []string) (own, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !searchFlagNames[name] {
			rest = append(rest, a)
			continue
		}
		own = append(own, a)
		if !hasValue {
			if i+1 == len(args) {
				return nil, nil, usagef("flag needs an argument: %s", a)
			}
			i++
			own = append(own, args[i])
		}
	}
	return own, rest, nil
}

// intList reads a comma-separated list of integers at least lo; "off" is
// read as -1 where off is allowed.
func intList(flagName, v string, lo int, off bool) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if off && strings.EqualFold(f, "off") {
			out = append(out, -1)
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < lo {
			return nil, usagef("--%s %q: %q is not a whole number of at least %d", flagName, v, f, lo)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseSearchArgs(args []string, stderr io.Writer) (*options, *searchOptions, error) {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stderr, searchUsage)
			return nil, nil, flag.ErrHelp
		}
	}
	own, rest, err := splitSearchArgs(args)
	if err != nil {
		return nil, nil, err
	}
	fs := flag.NewFlagSet("inferd perf search", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var instances, batches, delays, preferred, conc string
	var budgetMS float64
	so := &searchOptions{}
	fs.StringVar(&so.mode, "run-config-search-mode", "brute", "brute or quick")
	fs.StringVar(&instances, "instance-counts", "1,2,3,4,5", "instance counts")
	fs.StringVar(&batches, "max-batch-sizes", "1,2,4,8,16,32,64,128", "max_batch_size values")
	fs.StringVar(&delays, "dynamic-batching-delays", "off,0", "queue delays µs")
	fs.StringVar(&preferred, "preferred-batch-sizes", "", "preferred batch sizes")
	fs.StringVar(&conc, "concurrency", "", "concurrency list")
	fs.Float64Var(&budgetMS, "latency-budget", 0, "p99 budget ms")
	fs.StringVar(&so.configOut, "config-out", "", "best config.pbtxt")
	if err := fs.Parse(own); err != nil {
		return nil, nil, usageError{err}
	}
	fs.Visit(func(f *flag.Flag) { so.setBatch = so.setBatch || f.Name == "max-batch-sizes" })

	o, err := parseArgs(rest, stderr)
	if err != nil {
		return nil, nil, err
	}
	if so.mode != "brute" && so.mode != "quick" {
		return nil, nil, usagef("--run-config-search-mode %q: want brute or quick", so.mode)
	}
	if o.protocol != "http" {
		return nil, nil, usagef("search loads configurations over HTTP: use -i http")
	}
	if o.serviceKind != "triton" {
		return nil, nil, usagef("search measures /v2 infer: --service-kind=%s does not apply", o.serviceKind)
	}
	if o.csvPath != "" || o.jsonPath != "" {
		return nil, nil, usagef("search writes --report and --config-out; -f and --json are for a plain sweep")
	}
	if so.instances, err = intList("instance-counts", instances, 1, false); err != nil {
		return nil, nil, err
	}
	if so.maxBatch, err = intList("max-batch-sizes", batches, 1, false); err != nil {
		return nil, nil, err
	}
	if so.delays, err = intList("dynamic-batching-delays", delays, 0, true); err != nil {
		return nil, nil, err
	}
	if preferred != "" {
		if so.preferred, err = intList("preferred-batch-sizes", preferred, 1, false); err != nil {
			return nil, nil, err
		}
	}
	so.concurrency = []int{1, 2, 4, 8, 16, 32}
	switch {
	case len(o.rates) > 0 && (conc != "" || slices.ContainsFunc(rest, func(a string) bool { return strings.Contains(a, "concurrency-range") })):
		return nil, nil, usagef("search sweeps either concurrency or --request-rate-range, not both")
	case len(o.rates) > 0:
		so.rates, so.concurrency = o.rates, nil
	case conc != "":
		if so.concurrency, err = intList("concurrency", conc, 1, false); err != nil {
			return nil, nil, err
		}
	case slices.ContainsFunc(rest, func(a string) bool { return strings.Contains(a, "concurrency-range") }):
		so.concurrency = o.concurrency
	}
	if budgetMS < 0 || bad(budgetMS) {
		return nil, nil, usagef("--latency-budget %v: must not be negative", budgetMS)
	}
	so.latencyBudget = time.Duration(budgetMS * float64(time.Millisecond))
	if so.configOut == "" {
		so.configOut = o.model + ".best.pbtxt"
	}
	return o, so, nil
}
