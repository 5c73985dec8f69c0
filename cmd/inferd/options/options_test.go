package options

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestParseGrammar(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, v *Values)
	}{
		{"equals and separate value", []string{"--http-port=9000", "--metrics-port", "9002"}, func(t *testing.T, v *Values) {
			if v.Int("http-port") != 9000 || v.Int("metrics-port") != 9002 {
				t.Fatalf("ports %d %d", v.Int("http-port"), v.Int("metrics-port"))
			}
		}},
		{"boolean spellings", []string{"--allow-http", "True", "--log-info=OFF", "--exit-on-error", "0", "--strict-readiness=on"}, func(t *testing.T, v *Values) {
			if !v.Bool("allow-http") || v.Bool("log-info") || v.Bool("exit-on-error") || !v.Bool("strict-readiness") {
				t.Fatal("booleans misread")
			}
		}},
		{"defaults", nil, func(t *testing.T, v *Values) {
			if v.Int("http-port") != 8000 || !v.Bool("allow-http") || v.String("id") != "triton" || v.Given("http-port") {
				t.Fatal("defaults misread")
			}
		}},
		{"repeatable keeps all, scalar keeps the last", []string{"--model-repository=/a", "--model-store", "/b", "--http-port=1", "--http-port=2"}, func(t *testing.T, v *Values) {
			if got := v.List("model-repository"); !slices.Equal(got, []string{"/a", "/b"}) || v.Int("http-port") != 2 {
				t.Fatalf("repos %v port %d", got, v.Int("http-port"))
			}
		}},
		{"value starting with a dash", []string{"--id", "--odd-name"}, func(t *testing.T, v *Values) {
			if v.String("id") != "--odd-name" {
				t.Fatalf("id %q", v.String("id"))
			}
		}},
		{"unique prefix", []string{"--allow-gpu=false", "--grpc-use-ssl=true"}, func(t *testing.T, v *Values) {
			if !v.Given("allow-gpu-metrics") || !v.Given("grpc-use-ssl") || v.Given("grpc-use-ssl-mutual") {
				t.Fatal("prefix or exact match misread")
			}
		}},
		{"log-verbose takes true", []string{"--log-verbose=true"}, func(t *testing.T, v *Values) {
			if v.Int("log-verbose") != 1 {
				t.Fatal("log-verbose true != 1")
			}
		}},
		{"flag options take no value", []string{"--disable-auto-complete-config"}, func(t *testing.T, v *Values) {
			if !v.Bool("disable-auto-complete-config") {
				t.Fatal("flag not set")
			}
		}},
		{"global backend config", []string{"--backend-config=default-max-batch-size=8", "--backend-config=onnxruntime,library-path=/x,y"}, func(t *testing.T, v *Values) {
			if len(v.List("backend-config")) != 2 {
				t.Fatal(v.List("backend-config"))
			}
		}},
		{"durations", []string{"--http-idle-timeout=90", "--http-read-header-timeout=2m"}, func(t *testing.T, v *Values) {
			if v.Duration("http-idle-timeout").Seconds() != 90 || v.Duration("http-read-header-timeout").Minutes() != 2 {
				t.Fatal("durations misread")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Parse(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, v)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--htp-port=1"}, "unknown option --htp-port (did you mean --http-port?)"},
		{[]string{"--no-such-thing=1"}, "unknown option --no-such-thing"},
		{[]string{"--allow=1"}, "option --allow is ambiguous"},
		{[]string{"--allow-http", "maybe"}, `invalid value for --allow-http: invalid value for bool option: "maybe"`},
		{[]string{"--allow-http"}, "option --allow-http requires a value"},
		{[]string{"--http-port=8000abc"}, `invalid value for --http-port: "8000abc" is not an integer`},
		{[]string{"--http-port=70000"}, "must be in the range 0 to 65535"},
		{[]string{"--disable-auto-complete-config=true"}, "takes no value"},
		{[]string{"serve"}, `unexpected argument "serve"`},
		{[]string{"--model-repository=/m", "--", "x"}, `unexpected argument "--"`},
		{[]string{"--grpc-infer-thread-count=1"}, "Must be in the range 2 to 128."},
		{[]string{"--cache-config=size=1"}, "names no cache"},
		{[]string{"--trace-config=zipkin,url=x"}, "invalid trace mode"},
		{[]string{"--cuda-memory-pool-byte-size=4096000000"}, "is not <first>:<second>"},
		{[]string{"--model-load-gpu-limit=0:1.5"}, "expects limit fraction"},
		{[]string{"--rate-limit=sometimes"}, "is not one of execution_count, off"},
		{[]string{"--rate-limit-resource=R1"}, "invalid value for --rate-limit-resource: --rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got R1"},
		{[]string{"--host-policy=gpu_0,bogus=1"}, "unsupported host policy setting"},
		{[]string{"--http-restricted-api=admin"}, `"admin" is not <category>[,<category>...]:<key>=<value>`},
		{[]string{"--backend-config=,x=1"}, "the name before ',' is empty"},
		{[]string{"--metrics-config=a,b=c"}, "is not <setting>=<value>"},
		{[]string{"--log-format=xml"}, "is not one of default, ISO8601, json"},
		{[]string{"--model-control-mode=sometimes"}, "is not one of none, poll, explicit"},
		{[]string{"--http-max-input-size=0"}, "must be greater than 0"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.args, err, tt.want)
		}
	}
	if _, err := Parse([]string{"--help"}); err != ErrHelp {
		t.Errorf("--help: %v", err)
	}
}

func TestInert(t *testing.T) {
	v, err := Parse([]string{"--pinned-memory-pool-byte-size=2048000000", "--grpc-max-response-pool-size=4", "--http-port=1",
		"--cuda-memory-pool-byte-size=0:4096000000", "--cuda-memory-pool-byte-size=1:4096000000", "--trace-config=rate=10"})
	if err != nil {
		t.Fatal(err)
	}
	planned, noop := v.Inert()
	if !slices.Equal(planned, []string{"--grpc-max-response-pool-size (decoupled responses)"}) ||
		!slices.Equal(noop, []string{"--pinned-memory-pool-byte-size", "--cuda-memory-pool-byte-size"}) {
		t.Fatalf("planned %v noop %v", planned, noop)
	}
}

// Every option is in a known group, documented, with a default of its own
// kind; names are unique.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range All() {
		if seen[o.Name] {
			t.Errorf("--%s twice", o.Name)
		}
		seen[o.Name] = true
		if !slices.Contains(Groups, o.Group) || o.Usage == "" {
			t.Errorf("--%s: group %q, usage %q", o.Name, o.Group, o.Usage)
		}
		if o.Default != "" && o.Kind != None {
			if err := parseValue(o.Kind, o.Default); err != nil {
				t.Errorf("--%s default: %v", o.Name, err)
			}
			if o.Check != nil && o.Check(o.Default) != nil {
				t.Errorf("--%s default fails its check: %v", o.Name, o.Check(o.Default))
			}
		}
		if (o.Status != Active) != (o.Feature != "") {
			t.Errorf("--%s: status %v with feature %q", o.Name, o.Status, o.Feature)
		}
	}
	var out bytes.Buffer
	Usage(&out, "tritonserver")
	for _, g := range Groups[1:] {
		if !strings.Contains(out.String(), "\n"+g+":\n") {
			t.Errorf("help lacks group %q", g)
		}
	}
	for _, want := range []string{"  --allow-grpc <boolean>", "[planned:", "  --cuda-memory-pool-byte-size <<integer>:<integer>>", "[no-op:", "[inferd]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}
