package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// echoed is what echoHandler reports about the request it saw.
type echoed struct {
	Method        string            `json:"method"`
	Path          string            `json:"path"`
	EscapedPath   string            `json:"escapedPath"`
	Query         string            `json:"query"`
	Host          string            `json:"host"`
	ContentLength int64             `json:"contentLength"`
	Header        map[string]string `json:"header"`
	Body          []byte            `json:"body"`
}

// echoHandler is a small real handler: /bin answers binary bytes, /text
// text, /big?n= n bytes, /cookie two cookies, /status/<n> that status,
// /panic panics, /sse two flushed events; anything else echoes the request.
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/bin":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(binaryBytes)
		case r.URL.Path == "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = io.WriteString(w, "héllo")
		case r.URL.Path == "/big":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			n = min(n, 8<<20) // fuzzed queries must not write for ever
			w.Header().Set("Content-Type", r.URL.Query().Get("type"))
			chunk := bytes.Repeat([]byte("a"), 1024)
			for n > 0 {
				c := chunk[:min(n, len(chunk))]
				_, _ = w.Write(c)
				n -= len(c)
			}
		case r.URL.Path == "/cookie":
			w.Header().Add("Set-Cookie", "a=1; Path=/")
			w.Header().Add("Set-Cookie", "b=2; Path=/")
			w.Header().Add("X-Multi", "x")
			w.Header().Add("X-Multi", "y")
			w.WriteHeader(http.StatusNoContent)
		case strings.HasPrefix(r.URL.Path, "/status/"):
			code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
			w.WriteHeader(code)
		case r.URL.Path == "/panic":
			panic("boom")
		case r.URL.Path == "/sse":
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			for i := range 2 {
				_, _ = io.WriteString(w, "data: {\"n\":"+strconv.Itoa(i)+"}\n\n")
				http.NewResponseController(w).Flush()
			}
		default:
			body, _ := io.ReadAll(r.Body)
			e := echoed{Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(), Query: r.URL.RawQuery,
				Host: r.Host, ContentLength: r.ContentLength, Header: map[string]string{}, Body: body}
			for k, vs := range r.Header {
				e.Header[k] = strings.Join(vs, "|")
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(e)
		}
	})
}

// binaryBytes is not valid UTF-8.
var binaryBytes = []byte{0x00, 0xff, 0xfe, 0x80, 0x01, 0x02}

// result is a response event in source-independent form.
type result struct {
	status      int
	description string
	headers     map[string]string
	multi       map[string][]string
	cookies     []string
	body        []byte
	b64         bool
}

func decodeResult(t *testing.T, res any) result {
	t.Helper()
	var r result
	var body string
	switch v := res.(type) {
	case events.LambdaFunctionURLResponse:
		r = result{status: v.StatusCode, headers: v.Headers, cookies: v.Cookies, b64: v.IsBase64Encoded}
		body = v.Body
	case events.APIGatewayV2HTTPResponse:
		r = result{status: v.StatusCode, headers: v.Headers, multi: v.MultiValueHeaders, cookies: v.Cookies, b64: v.IsBase64Encoded}
		body = v.Body
	case events.APIGatewayProxyResponse:
		r = result{status: v.StatusCode, headers: v.Headers, multi: v.MultiValueHeaders, b64: v.IsBase64Encoded}
		body = v.Body
	case events.ALBTargetGroupResponse:
		r = result{status: v.StatusCode, description: v.StatusDescription, headers: v.Headers, multi: v.MultiValueHeaders, b64: v.IsBase64Encoded}
		body = v.Body
	default:
		t.Fatalf("Invoke returned %T, not a response event", res)
	}
	r.body = []byte(body)
	if r.b64 {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			t.Fatalf("isBase64Encoded body does not decode: %v", err)
		}
		r.body = b
	}
	return r
}

func (r result) echo(t *testing.T) echoed {
	t.Helper()
	var e echoed
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("status %d body %q is not an echo: %v", r.status, r.body, err)
	}
	return e
}

func (r result) errorText(t *testing.T) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == "" {
		t.Fatalf("status %d body %q is not an error body: %v", r.status, r.body, err)
	}
	return e.Error
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func urlEvent(method, rawPath, query, body string, b64 bool) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: rawPath, RawQueryString: query,
		Headers: map[string]string{"host": "abc123.lambda-url.us-east-1.on.aws", "x-custom": "one,two", "content-type": "application/json"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: "123456789012", APIID: "abc123", DomainName: "abc123.lambda-url.us-east-1.on.aws", DomainPrefix: "abc123",
			RequestID: "req-1", TimeEpoch: 1700000000000,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: method, Path: rawPath, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9", UserAgent: "test"},
		},
		Body: body, IsBase64Encoded: b64,
	}
}

func httpAPIEvent(method, stage, rawPath, query, body string, b64 bool) events.APIGatewayV2HTTPRequest {
	routeKey := "$default"
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: routeKey, RawPath: rawPath, RawQueryString: query,
		Headers: map[string]string{"host": "api1.execute-api.us-east-1.amazonaws.com", "content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: routeKey, AccountID: "123456789012", Stage: stage, RequestID: "req-2", APIID: "api1",
			DomainName: "api1.execute-api.us-east-1.amazonaws.com", DomainPrefix: "api1", TimeEpoch: 1700000000000,
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: rawPath, Protocol: "HTTP/1.1", SourceIP: "203.0.113.9", UserAgent: "test"},
		},
		Body: body, IsBase64Encoded: b64,
	}
}

func restEvent(method, stage, path, ctxPath, body string, b64 bool) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource: "/{proxy+}", Path: path, HTTPMethod: method,
		Headers:                         map[string]string{"Host": "api2.execute-api.us-east-1.amazonaws.com", "Content-Type": "application/json", "X-Rep": "b"},
		MultiValueHeaders:               map[string][]string{"Host": {"api2.execute-api.us-east-1.amazonaws.com"}, "Content-Type": {"application/json"}, "X-Rep": {"a", "b"}},
		QueryStringParameters:           map[string]string{"q": "x y"},
		MultiValueQueryStringParameters: map[string][]string{"q": {"x y"}},
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID: "123456789012", ResourceID: "r1", Stage: stage, RequestID: "req-3", ResourcePath: "/{proxy+}",
			Path: ctxPath, HTTPMethod: method, APIID: "api2", DomainName: "api2.execute-api.us-east-1.amazonaws.com",
			Identity: events.APIGatewayRequestIdentity{SourceIP: "203.0.113.9"},
		},
		Body: body, IsBase64Encoded: b64,
	}
}

func albEvent(method, path string, multi bool, body string, b64 bool) events.ALBTargetGroupRequest {
	ev := events.ALBTargetGroupRequest{
		HTTPMethod: method, Path: path,
		RequestContext: events.ALBTargetGroupRequestContext{ELB: events.ELBContext{TargetGroupArn: "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/tg/abc"}},
		Body:           body, IsBase64Encoded: b64,
	}
	if multi {
		ev.MultiValueHeaders = map[string][]string{"host": {"alb.example.com"}, "x-rep": {"a", "b"}}
		ev.MultiValueQueryStringParameters = map[string][]string{"q": {"a%20b", "c"}}
	} else {
		ev.Headers = map[string]string{"host": "alb.example.com", "x-rep": "a"}
		ev.QueryStringParameters = map[string]string{"q": "a%20b"}
	}
	return ev
}

func newTestHandler(h http.Handler, opts Options) *Handler {
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return NewHandler(h, opts)
}

func TestInvoke(t *testing.T) {
	withCookies := urlEvent("GET", "/echo/a%2Fb", "a=1&b=x%20y", "", false)
	withCookies.Cookies = []string{"c1=v1", "c2=v2"}
	binURL := base64.StdEncoding.EncodeToString(binaryBytes)
	// HTTP API payload 1.0 is the REST shape plus "version":"1.0".
	var payload10 map[string]any
	if err := json.Unmarshal(mustJSON(t, restEvent("POST", "prod", "/prod/echo", "/prod/echo", "{}", false)), &payload10); err != nil {
		t.Fatal(err)
	}
	payload10["version"] = "1.0"

	cases := []struct {
		name    string
		payload json.RawMessage
		opts    Options
		check   func(t *testing.T, r result)
	}{
		{
			name: "function URL: method, path, query, headers, cookies", payload: mustJSON(t, withCookies),
			check: func(t *testing.T, r result) {
				e := r.echo(t)
				if r.status != 200 || r.b64 || e.Method != "GET" || e.Path != "/echo/a/b" || e.EscapedPath != "/echo/a%2Fb" || e.Query != "a=1&b=x%20y" {
					t.Errorf("got status %d b64 %v echo %+v", r.status, r.b64, e)
				}
				if e.Header["Cookie"] != "c1=v1; c2=v2" || e.Header["X-Custom"] != "one,two" || e.Host != "abc123.lambda-url.us-east-1.on.aws" {
					t.Errorf("headers %v host %q", e.Header, e.Host)
				}
				if r.headers["Content-Type"] != "application/json" {
					t.Errorf("response headers %v", r.headers)
				}
			},
		},
		{
			// Checklist 75: the base64 body is decoded and Content-Length is the decoded size.
			name: "function URL: base64 binary request body", payload: mustJSON(t, urlEvent("POST", "/echo", "", binURL, true)),
			check: func(t *testing.T, r result) {
				e := r.echo(t)
				if !bytes.Equal(e.Body, binaryBytes) || e.ContentLength != int64(len(binaryBytes)) || e.Header["Content-Length"] != strconv.Itoa(len(binaryBytes)) {
					t.Errorf("body %v content length %d header %q", e.Body, e.ContentLength, e.Header["Content-Length"])
				}
			},
		},
		{
			name: "function URL: plain text body, Content-Length set", payload: mustJSON(t, urlEvent("POST", "/echo", "", `{"k":"v"}`, false)),
			check: func(t *testing.T, r result) {
				e := r.echo(t)
				if string(e.Body) != `{"k":"v"}` || e.ContentLength != 9 || e.Header["Content-Length"] != "9" {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			// Checklist 76: binary responses are base64.
			name: "function URL: binary response is base64", payload: mustJSON(t, urlEvent("GET", "/bin", "", "", false)),
			check: func(t *testing.T, r result) {
				if !r.b64 || !bytes.Equal(r.body, binaryBytes) || r.headers["Content-Type"] != "application/octet-stream" {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "function URL: text response stays plain", payload: mustJSON(t, urlEvent("GET", "/text", "", "", false)),
			check: func(t *testing.T, r result) {
				if r.b64 || string(r.body) != "héllo" {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "function URL: JSON response stays plain", payload: mustJSON(t, urlEvent("GET", "/big", "n=3&type=application/json", "", false)),
			check: func(t *testing.T, r result) {
				if r.b64 || string(r.body) != "aaa" {
					t.Errorf("valid UTF-8 JSON should be plain: %+v", r)
				}
			},
		},
		{
			name: "function URL: Set-Cookie becomes cookies", payload: mustJSON(t, urlEvent("GET", "/cookie", "", "", false)),
			check: func(t *testing.T, r result) {
				if r.status != 204 || len(r.cookies) != 2 || r.cookies[0] != "a=1; Path=/" || r.headers["Set-Cookie"] != "" || r.headers["X-Multi"] != "x,y" {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			// Checklist 77.
			name: "HTTP API: named stage stripped", payload: mustJSON(t, httpAPIEvent("POST", "prod", "/prod/echo/x", "k=v", "e30=", true)),
			check: func(t *testing.T, r result) {
				e := r.echo(t)
				if e.Path != "/echo/x" || e.Query != "k=v" || string(e.Body) != "{}" || e.ContentLength != 2 {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			name: "HTTP API: $default stage keeps the path", payload: mustJSON(t, httpAPIEvent("GET", "$default", "/prod/echo", "", "", false)),
			check: func(t *testing.T, r result) {
				if e := r.echo(t); e.Path != "/prod/echo" {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			name: "HTTP API: stage path itself", payload: mustJSON(t, httpAPIEvent("GET", "prod", "/prod", "", "", false)),
			check: func(t *testing.T, r result) {
				if e := r.echo(t); e.Path != "/" {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			name: "HTTP API: cookies and status", payload: mustJSON(t, httpAPIEvent("GET", "prod", "/prod/cookie", "", "", false)),
			check: func(t *testing.T, r result) {
				if r.status != 204 || len(r.cookies) != 2 || r.multi != nil {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "REST: stage only in requestContext.path, multi-value headers and query", payload: mustJSON(t, restEvent("PUT", "prod", "/echo", "/prod/echo", "hi", false)),
			check: func(t *testing.T, r result) {
				e := r.echo(t)
				if e.Method != "PUT" || e.Path != "/echo" || e.Query != "q=x+y" || e.Header["X-Rep"] != "a|b" || string(e.Body) != "hi" {
					t.Errorf("echo %+v", e)
				}
				if r.multi == nil || r.headers != nil || r.multi["Content-Type"][0] != "application/json" {
					t.Errorf("multi-value request must get multiValueHeaders: %+v", r)
				}
			},
		},
		{
			name: "REST: stage named like the first path segment is kept", payload: mustJSON(t, restEvent("GET", "v2", "/v2/echo", "/v2/v2/echo", "", false)),
			check: func(t *testing.T, r result) {
				if e := r.echo(t); e.Path != "/v2/echo" {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			name: "HTTP API payload 1.0: named stage stripped", payload: mustJSON(t, payload10),
			check: func(t *testing.T, r result) {
				if e := r.echo(t); e.Path != "/echo" || e.Method != "POST" {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			name: "REST: binary response", payload: mustJSON(t, restEvent("GET", "prod", "/bin", "/prod/bin", "", false)),
			check: func(t *testing.T, r result) {
				if !r.b64 || !bytes.Equal(r.body, binaryBytes) {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			// Checklist 78.
			name: "ALB single-value: headers, statusDescription, raw query kept", payload: mustJSON(t, albEvent("POST", "/echo", false, base64.StdEncoding.EncodeToString(binaryBytes), true)),
			check: func(t *testing.T, r result) {
				e := r.echo(t)
				if e.Query != "q=a%20b" || e.Header["X-Rep"] != "a" || !bytes.Equal(e.Body, binaryBytes) || e.Host != "alb.example.com" {
					t.Errorf("echo %+v", e)
				}
				if r.description != "200 OK" || r.headers == nil || r.multi != nil {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "ALB multi-value: multiValueHeaders in and out", payload: mustJSON(t, albEvent("GET", "/cookie", true, "", false)),
			check: func(t *testing.T, r result) {
				if r.description != "204 No Content" || r.headers != nil || len(r.multi["Set-Cookie"]) != 2 || len(r.multi["X-Multi"]) != 2 {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "ALB multi-value query", payload: mustJSON(t, albEvent("GET", "/echo", true, "", false)),
			check: func(t *testing.T, r result) {
				if e := r.echo(t); e.Query != "q=a%20b&q=c" || e.Header["X-Rep"] != "a|b" {
					t.Errorf("echo %+v", e)
				}
			},
		},
		{
			name: "ALB unusual status", payload: mustJSON(t, albEvent("GET", "/status/418", false, "", false)),
			check: func(t *testing.T, r result) {
				if r.status != 418 || r.description != "418 I'm a teapot" {
					t.Errorf("got %+v", r)
				}
			},
		},
		{
			name: "oversize response", payload: mustJSON(t, urlEvent("GET", "/big", "n=7000000&type=text/plain", "", false)),
			check: func(t *testing.T, r result) {
				if r.status != 500 || !strings.HasPrefix(r.errorText(t), "response exceeds the Lambda payload limit") {
					t.Errorf("got %d %s", r.status, r.body)
				}
			},
		},
		{
			// The raw body fits, but base64 pushes the event over the limit.
			name: "oversize after base64", payload: mustJSON(t, urlEvent("GET", "/big", "n=900&type=application/octet-stream", "", false)), opts: Options{MaxResponseBytes: 1000},
			check: func(t *testing.T, r result) {
				if r.status != 500 || !strings.HasPrefix(r.errorText(t), "response exceeds the Lambda payload limit") {
					t.Errorf("got %d %s", r.status, r.body)
				}
			},
		},
		{
			name: "within a small limit", payload: mustJSON(t, urlEvent("GET", "/big", "n=500&type=text/plain", "", false)), opts: Options{MaxResponseBytes: 1000},
			check: func(t *testing.T, r result) {
				if r.status != 200 || len(r.body) != 500 {
					t.Errorf("got %d %d bytes", r.status, len(r.body))
				}
			},
		},
		{
			name: "handler panic becomes 500", payload: mustJSON(t, httpAPIEvent("GET", "$default", "/panic", "", "", false)),
			check: func(t *testing.T, r result) {
				if r.status != 500 || !strings.Contains(r.errorText(t), "boom") {
					t.Errorf("got %d %s", r.status, r.body)
				}
			},
		},
		{
			name: "streaming handler through the buffered path", payload: mustJSON(t, urlEvent("GET", "/sse", "", "", false)),
			check: func(t *testing.T, r result) {
				if r.status != 200 || string(r.body) != "data: {\"n\":0}\n\ndata: {\"n\":1}\n\n" || r.b64 {
					t.Errorf("got %+v", r)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := newTestHandler(echoHandler(), tc.opts).Invoke(context.Background(), tc.payload)
			if err != nil {
				t.Fatalf("Invoke returned an error: %v", err)
			}
			tc.check(t, decodeResult(t, res))
		})
	}
}

func TestALBLimit(t *testing.T) {
	ev := albEvent("GET", "/big", false, "", false)
	ev.QueryStringParameters = map[string]string{"n": "1100000", "type": "text/plain"}
	res, _ := newTestHandler(echoHandler(), Options{}).Invoke(context.Background(), mustJSON(t, ev))
	r := decodeResult(t, res)
	if _, ok := res.(events.ALBTargetGroupResponse); !ok || r.status != 500 || r.description != "500 Internal Server Error" ||
		!strings.HasPrefix(r.errorText(t), "response exceeds the Lambda payload limit") {
		t.Fatalf("got %T %d %s", res, r.status, r.body)
	}
	// The same body fits the 6 MB limit of other sources.
	u := urlEvent("GET", "/big", "n=1100000&type=text/plain", "", false)
	res, _ = newTestHandler(echoHandler(), Options{}).Invoke(context.Background(), mustJSON(t, u))
	if r := decodeResult(t, res); r.status != 200 {
		t.Fatalf("function URL got %d", r.status)
	}
}

func TestBadPayload(t *testing.T) {
	cases := []struct {
		name, payload, want string
		typ                 any
	}{
		{"not JSON", `not json`, "payload is not a Lambda HTTP event", events.APIGatewayV2HTTPResponse{}},
		{"array", `[1,2]`, "payload is not a Lambda HTTP event", events.APIGatewayV2HTTPResponse{}},
		{"empty object", `{}`, "unrecognised Lambda event", events.APIGatewayV2HTTPResponse{}},
		{"null", `null`, "unrecognised Lambda event", events.APIGatewayV2HTTPResponse{}},
		{"S3 event", `{"Records":[{"eventSource":"aws:s3"}]}`, "unrecognised Lambda event", events.APIGatewayV2HTTPResponse{}},
		{"2.0 with wrong member type", `{"version":"2.0","headers":5}`, "malformed Lambda event", events.APIGatewayV2HTTPResponse{}},
		{"URL with bad base64", `{"version":"2.0","rawPath":"/echo","body":"%%%","isBase64Encoded":true,"requestContext":{"domainName":"x.lambda-url.us-east-1.on.aws","http":{"method":"POST"}}}`,
			"request body is not valid base64", events.LambdaFunctionURLResponse{}},
		{"REST with bad path escape", `{"httpMethod":"GET","path":"/a%zz"}`, "bad request path", events.APIGatewayProxyResponse{}},
		{"REST with relative path", `{"httpMethod":"GET","path":"echo"}`, "does not start with '/'", events.APIGatewayProxyResponse{}},
		{"REST with bad method", `{"httpMethod":"GE T","path":"/echo"}`, "bad request", events.APIGatewayProxyResponse{}},
		{"ALB with wrong member type", `{"httpMethod":"GET","requestContext":{"elb":{}},"multiValueHeaders":{"a":"b"}}`, "malformed Lambda event", events.ALBTargetGroupResponse{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := newTestHandler(echoHandler(), Options{}).Invoke(context.Background(), json.RawMessage(tc.payload))
			if err != nil {
				t.Fatalf("Invoke returned an error: %v", err)
			}
			if got, want := typeName(res), typeName(tc.typ); got != want {
				t.Errorf("response type %s, want %s", got, want)
			}
			r := decodeResult(t, res)
			if r.status != 400 || !strings.Contains(r.errorText(t), tc.want) || r.headers["Content-Type"] != "application/json" && r.multi["Content-Type"] == nil {
				t.Errorf("got %d %v %s, want 400 containing %q", r.status, r.headers, r.body, tc.want)
			}
		})
	}
}

func typeName(v any) string {
	switch v.(type) {
	case events.LambdaFunctionURLResponse:
		return "url"
	case events.APIGatewayV2HTTPResponse:
		return "v2"
	case events.APIGatewayProxyResponse:
		return "v1"
	case events.ALBTargetGroupResponse:
		return "alb"
	}
	return "other"
}

// Checklist 79: RESPONSE_STREAM replies are the JSON prelude, 8 NUL bytes,
// then the raw body, with the integration content type.
func TestStreamFunctionURL(t *testing.T) {
	a := newTestHandler(echoHandler(), Options{StreamFunctionURL: true})
	cases := []struct {
		path, wantPrelude string
		wantBody          []byte
	}{
		{"/sse", `{"statusCode":200,"headers":{"Content-Type":"text/event-stream; charset=utf-8"}}`, []byte("data: {\"n\":0}\n\ndata: {\"n\":1}\n\n")},
		{"/bin", `{"statusCode":200,"headers":{"Content-Type":"application/octet-stream"}}`, binaryBytes},
		{"/cookie", `{"statusCode":204,"headers":{"X-Multi":"x,y"},"cookies":["a=1; Path=/","b=2; Path=/"]}`, nil},
		{"/status/404", `{"statusCode":404}`, nil},
		{"/panic", `{"statusCode":500,"headers":{"Content-Type":"application/json"}}`, []byte(`{"error":"internal error: handler panic"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			res, err := a.Invoke(context.Background(), mustJSON(t, urlEvent("GET", tc.path, "", "", false)))
			if err != nil {
				t.Fatal(err)
			}
			s, ok := res.(*events.LambdaFunctionURLStreamingResponse)
			if !ok {
				t.Fatalf("got %T", res)
			}
			if ct := s.ContentType(); ct != "application/vnd.awslambda.http-integration-response" {
				t.Errorf("content type %q", ct)
			}
			all, err := io.ReadAll(s)
			if err != nil {
				t.Fatal(err)
			}
			prelude, body, ok := bytes.Cut(all, make([]byte, 8))
			if !ok || string(prelude) != tc.wantPrelude || !bytes.Equal(body, tc.wantBody) {
				t.Errorf("stream %q", all)
			}
		})
	}
	// Other sources stay buffered even with streaming on.
	res, _ := a.Invoke(context.Background(), mustJSON(t, httpAPIEvent("GET", "$default", "/sse", "", "", false)))
	if _, ok := res.(events.APIGatewayV2HTTPResponse); !ok {
		t.Errorf("HTTP API event got %T", res)
	}
}

// FuzzInvoke: any payload yields a response object and no panic.
func FuzzInvoke(f *testing.F) {
	f.Add([]byte(`not json`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":"2.0","headers":5}`))
	f.Add([]byte(mustJSON(f, urlEvent("POST", "/echo", "a=1", base64.StdEncoding.EncodeToString(binaryBytes), true))))
	f.Add([]byte(mustJSON(f, httpAPIEvent("GET", "prod", "/prod/bin", "", "", false))))
	f.Add([]byte(mustJSON(f, restEvent("GET", "prod", "/echo", "/prod/echo", "", false))))
	f.Add([]byte(mustJSON(f, albEvent("GET", "/cookie", true, "", false))))
	f.Add([]byte(mustJSON(f, albEvent("GET", "/echo", false, "%%%", true))))
	a := newTestHandler(echoHandler(), Options{MaxResponseBytes: 4096})
	f.Fuzz(func(t *testing.T, payload []byte) {
		res, err := a.Invoke(context.Background(), payload)
		if err != nil {
			t.Fatalf("Invoke returned an error: %v", err)
		}
		r := decodeResult(t, res)
		if r.status < 100 || r.status > 999 {
			t.Fatalf("status %d", r.status)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("response does not marshal: %v", err)
		}
	})
}
