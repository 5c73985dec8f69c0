package tritonjson

import (
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// TestAppendFloat pins RapidJSON's layout of doubles (and FP32 widened),
// which Triton's JSON replies use.
func TestAppendFloat(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{-1, "-1.0"},
		{100, "100.0"},
		{12.5, "12.5"},
		{0.001234, "0.001234"},
		{0.1, "0.1"},
		{float64(float32(0.1)), "0.10000000149011612"},
		{float64(float32(1.1)), "1.100000023841858"},
		{1e-6, "0.000001"},
		{1.5e-6, "0.0000015"},
		{1e-7, "1e-7"},
		{2.5e-10, "2.5e-10"},
		{1e20, "100000000000000000000.0"},
		{123456789012345678, "123456789012345680.0"},
		{1e21, "1e21"},
		{1.5e21, "1.5e21"},
		{1e100, "1e100"},
		{-1.25e-100, "-1.25e-100"},
		{math.MaxFloat64, "1.7976931348623157e308"},
		{5e-324, "5e-324"},
		{2.2250738585072014e-308, "2.2250738585072014e-308"},
		{float64(math.MaxFloat32), "3.4028234663852886e38"},
		{float64(float32(math.SmallestNonzeroFloat32)), "1.401298464324817e-45"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{3.14159, "3.14159"},
		{-123.456, "-123.456"},
		{1 << 53, "9007199254740992.0"},
	}
	for _, c := range cases {
		if got := string(AppendFloat(nil, c.f)); got != c.want {
			t.Errorf("AppendFloat(%v) = %s, want %s", c.f, got, c.want)
		}
	}
	if got := string(AppendFloat32([]byte("x"), 0.5)); got != "x0.5" {
		t.Errorf("AppendFloat32 = %s", got)
	}
}

// TestAppendFloatRoundTrips checks Grisu2 output always parses back to the
// same double, for random FP64 bit patterns and widened FP32 values, and
// reports how often it is longer than the shortest form.
func TestAppendFloatRoundTrips(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	longer := 0
	const n = 200000
	for i := 0; i < n; i++ {
		var f float64
		if i%2 == 0 {
			f = math.Float64frombits(r.Uint64())
		} else {
			f = float64(math.Float32frombits(r.Uint32()))
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := AppendFloat(nil, f)
		g, err := strconv.ParseFloat(string(s), 64)
		if err != nil || g != f || math.Signbit(g) != math.Signbit(f) {
			t.Fatalf("%v -> %s -> %v (%v)", f, s, g, err)
		}
		if digits(string(s)) > digits(strconv.FormatFloat(f, 'e', -1, 64)) {
			longer++
		}
	}
	t.Logf("Grisu2 longer than shortest in %d of %d values", longer, n)
}

// digits counts the significant digits of a formatted number.
func digits(s string) int {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(strings.NewReplacer("-", "", ".", "").Replace(s), "0")
	return len(s)
}

// TestCachedPowers spot-checks the computed table against RapidJSON's
// published constants.
func TestCachedPowers(t *testing.T) {
	want := map[int]diyFp{
		0:  {0xfa8fd5a0081c0288, -1220},
		1:  {0xbaaee17fa23ebf76, -1193},
		20: {0xb23867fb2a35b28e, -688},
		43: {0xd1b71758e219652c, -77},
		44: {0x9c40000000000000, -50},
		45: {0xe8d4a51000000000, -24},
		46: {0xad78ebc5ac620000, 3},
		47: {0x813f3978f8940984, 30},
		60: {0xb454e4a179dd1877, 375},
		85: {0xeb96bf6ebadf77d9, 1039},
		86: {0xaf87023b9bf0ee6b, 1066},
	}
	for i, w := range want {
		if cachedPowers[i] != w {
			t.Errorf("cachedPowers[%d] = %#x e%d, want %#x e%d", i, cachedPowers[i].f, cachedPowers[i].e, w.f, w.e)
		}
	}
}

// TestAppendString pins RapidJSON's string escaping, which Triton's JSON
// replies use.
func TestAppendString(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\s/`, `"q\"b\\s/"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x01\x0b\x1f", `"\u0000\u0001\u000B\u001F"`},
		{"\x7f", "\"\x7f\""},
		{"é€😀", `"é€😀"`},
		{"\xff\xfe", "\"\xff\xfe\""},
		{"\u2028<>&", "\"\u2028<>&\""},
	}
	for _, c := range cases {
		if got := string(AppendString(nil, c.in)); got != c.want {
			t.Errorf("AppendString(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := string(AppendStringBytes(nil, []byte(c.in))); got != c.want {
			t.Errorf("AppendStringBytes(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	// What the writer produces, the parser reads back unchanged.
	for i := 0; i < 256; i++ {
		s := string([]byte{'a', byte(i), 'z'})
		d, err := ParseJSON(AppendString(nil, s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got, _ := d.Root().Str(); got != s {
			t.Fatalf("round trip %q -> %q", s, got)
		}
	}
}

func TestAppendScalars(t *testing.T) {
	b := AppendInt(nil, math.MinInt64)
	b = append(b, ' ')
	b = AppendUint(b, math.MaxUint64)
	b = append(b, ' ')
	b = AppendBool(b, true)
	b = AppendBool(b, false)
	if string(b) != "-9223372036854775808 18446744073709551615 truefalse" {
		t.Fatal(string(b))
	}
}
