package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A conformance file holds cases separated by lines "=== <name>". Each case
// is a request (method and path, headers, blank line, body) then a line
// "---" and the expectation: the status, headers ("Name: value" must match
// exactly, "!Name" must be absent), a blank line, then either the exact body
// or lines "~ <text>" that must each appear in the body.
type conformanceCase struct {
	name, method, path string
	reqHeader          http.Header
	reqBody            string
	status             int
	wantHeader         map[string]string
	absentHeader       []string
	exactBody          *string
	contains           []string
}

func parseConformance(t *testing.T, path string) []conformanceCase {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	var cases []conformanceCase
	for _, chunk := range strings.Split(string(data), "\n=== ")[1:] {
		lines := strings.Split(chunk, "\n")
		c := conformanceCase{name: lines[0], reqHeader: http.Header{}, wantHeader: map[string]string{}}
		i := 1
		c.method, c.path, _ = strings.Cut(lines[i], " ")
		i++
		for ; i < len(lines) && lines[i] != ""; i++ {
			k, v, _ := strings.Cut(lines[i], ": ")
			c.reqHeader.Add(k, v)
		}
		i++
		var body []string
		for ; i < len(lines) && lines[i] != "---"; i++ {
			body = append(body, lines[i])
		}
		c.reqBody = strings.Join(body, "\n")
		i++
		if i >= len(lines) {
			t.Fatalf("%s: case %q has no expectation", path, c.name)
		}
		c.status, err = strconv.Atoi(strings.TrimSpace(lines[i]))
		must(t, err)
		i++
		for ; i < len(lines) && lines[i] != ""; i++ {
			if name, ok := strings.CutPrefix(lines[i], "!"); ok {
				c.absentHeader = append(c.absentHeader, name)
				continue
			}
			k, v, _ := strings.Cut(lines[i], ": ")
			c.wantHeader[k] = v
		}
		i++
		var rest []string
		for ; i < len(lines); i++ {
			rest = append(rest, lines[i])
		}
		for len(rest) > 0 && rest[len(rest)-1] == "" {
			rest = rest[:len(rest)-1]
		}
		if len(rest) > 0 && strings.HasPrefix(rest[0], "~ ") {
			for _, l := range rest {
				c.contains = append(c.contains, strings.TrimPrefix(l, "~ "))
			}
		} else {
			exact := strings.Join(rest, "\n")
			c.exactBody = &exact
		}
		cases = append(cases, c)
	}
	return cases
}

// TestConformance runs every testdata/conformance/*.txt file against one
// server over the standard models in NONE mode.
func TestConformance(t *testing.T) {
	base, _ := startServer(t, writeRepo(t, standardModels(t)), serverOpts{})
	files, err := filepath.Glob("testdata/conformance/*.txt")
	must(t, err)
	if len(files) == 0 {
		t.Fatal("no conformance files")
	}
	for _, f := range files {
		for _, c := range parseConformance(t, f) {
			t.Run(filepath.Base(f)+"/"+c.name, func(t *testing.T) {
				runCase(t, base, c)
			})
		}
	}
}

func runCase(t *testing.T, base string, c conformanceCase) {
	t.Helper()
	status, header, body := do(t, c.method, base+c.path, c.reqHeader, strings.NewReader(c.reqBody))
	if status != c.status {
		t.Errorf("status = %d, want %d (body %s)", status, c.status, body)
	}
	for k, v := range c.wantHeader {
		if got := header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	for _, k := range c.absentHeader {
		if _, ok := header[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("header %s present (%q), want absent", k, header.Get(k))
		}
	}
	if c.exactBody != nil && string(body) != *c.exactBody {
		t.Errorf("body = %s\nwant   %s", body, *c.exactBody)
	}
	for _, s := range c.contains {
		if !strings.Contains(string(body), s) {
			t.Errorf("body %s does not contain %q", body, s)
		}
	}
}
