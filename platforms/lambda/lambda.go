// Package lambda is the AWS Lambda frontend: it translates Lambda HTTP
// events (Function URL, API Gateway HTTP API payload 2.0, API Gateway REST /
// payload 1.0, Application Load Balancer) into *http.Request values for any
// http.Handler (normally the local KServe v2 server), and the handler's
// response back into the matching response event.
//
// Every server-side failure, including a payload that is not a recognised
// event, is answered with an HTTP response object and never with a Go
// error: a returned error would become a Lambda function error, and the
// client would see a bare 5xx from the platform instead of our JSON.
package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
)

// DefaultMaxResponseBytes is Lambda's synchronous invocation payload limit
// (6 MB), measured on the JSON-encoded response event.
const DefaultMaxResponseBytes = 6 << 20

// ALBMaxResponseBytes is the Application Load Balancer's limit on the
// response JSON (1 MB); it caps MaxResponseBytes for ALB events.
const ALBMaxResponseBytes = 1 << 20

// Options configure the adapter.
type Options struct {
	Logger *slog.Logger
	// MaxResponseBytes bounds the JSON-encoded response event (body after
	// base64 included). Zero means DefaultMaxResponseBytes. ALB responses
	// are further capped at ALBMaxResponseBytes.
	MaxResponseBytes int
	// StreamFunctionURL answers Function URL events with a streaming
	// response (*events.LambdaFunctionURLStreamingResponse). Set it only when
	// the function URL's InvokeMode is RESPONSE_STREAM: the event does not
	// say which mode the URL uses, and a BUFFERED URL cannot read the
	// streaming format. API Gateway and ALB events are always buffered.
	StreamFunctionURL bool
}

// Handler adapts Lambda HTTP events onto an http.Handler.
type Handler struct {
	h    http.Handler
	opts Options
	log  *slog.Logger
}

// NewHandler returns the adapter for h.
func NewHandler(h http.Handler, opts Options) *Handler {
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{h: refuseSharedMemory(h), opts: opts, log: opts.Logger}
}

// shmMutation matches the shared-memory extension's register and
// unregister routes (triton-inference-server/server src/http_server.cc).
var shmMutation = regexp.MustCompile(`^/v2/(?:system|cuda)sharedmemory(?:/region/[^/]+)?/(?:register|unregister)$`)

// refuseSharedMemory answers register and unregister of client shared
// memory with 403 and no body: a function's callers never share its host,
// so there is no memory of theirs to map. This is how Triton's Vertex AI
// server refuses them through a redirect (src/vertex_ai_server.cc);
// status stays readable. Both the decoded and the raw path are matched,
// since the router routes on the raw one.
func refuseSharedMemory(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if shmMutation.MatchString(r.URL.Path) || shmMutation.MatchString(r.URL.EscapedPath()) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Start runs the Lambda Runtime API loop with h; it never returns.
//
// Call it only when the AWS_LAMBDA_RUNTIME_API environment variable is set
// (the Lambda runtime sets it): without it aws-lambda-go's Start logs a
// fatal error and exits the process.
func Start(h http.Handler, opts Options) {
	awslambda.Start(NewHandler(h, opts).Invoke)
}

// eventKind is the detected event source.
type eventKind int

const (
	kindUnknown eventKind = iota
	kindFunctionURL
	kindHTTPAPI // API Gateway HTTP API, payload 2.0
	kindREST    // API Gateway REST API, or HTTP API with payload 1.0
	kindALB
)

// probe holds the members that decide the event type (inferd's detection
// order: see detect).
type probe struct {
	Version        string          `json:"version"`
	HTTPMethod     json.RawMessage `json:"httpMethod"`
	RequestContext struct {
		ELB        json.RawMessage `json:"elb"`
		DomainName string          `json:"domainName"`
	} `json:"requestContext"`
}

func detect(payload []byte) (eventKind, error) {
	var p probe
	if err := json.Unmarshal(payload, &p); err != nil {
		return kindUnknown, fmt.Errorf("payload is not a Lambda HTTP event: %v", err)
	}
	switch {
	case present(p.RequestContext.ELB):
		return kindALB, nil
	case p.Version == "2.0":
		// Function URL and HTTP API events share payload 2.0; only the
		// URL's domain (<url-id>.lambda-url.<region>.on.aws) tells them apart.
		if strings.Contains(p.RequestContext.DomainName, ".lambda-url.") {
			return kindFunctionURL, nil
		}
		return kindHTTPAPI, nil
	case present(p.HTTPMethod):
		return kindREST, nil
	}
	return kindUnknown, fmt.Errorf("unrecognised Lambda event: expected a Function URL, API Gateway or ALB HTTP event")
}

func present(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// request is the source-independent part of an event.
type request struct {
	method, path, rawQuery string
	host, remoteAddr       string
	header                 http.Header
	body                   string
	base64                 bool
}

// Invoke handles one Lambda event. The result is always a response event
// of the type matching the request (a payload 2.0 response when the event
// type cannot be detected) and the error is always nil.
func (a *Handler) Invoke(ctx context.Context, payload json.RawMessage) (result any, _ error) {
	kind, err := detect(payload)
	if err != nil {
		a.log.Error("lambda: rejecting event", "err", err)
		return a.errorResponse(kindUnknown, false, http.StatusBadRequest, err.Error()), nil
	}
	var (
		req   request
		multi bool // the request used multi-value headers (REST/ALB)
	)
	switch kind {
	case kindFunctionURL:
		var ev events.LambdaFunctionURLRequest
		if err = json.Unmarshal(payload, &ev); err == nil {
			req = fromV2(ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.HTTP.Path, "$default", ev.RawQueryString,
				ev.RequestContext.DomainName, ev.RequestContext.HTTP.SourceIP, ev.Headers, ev.Cookies, ev.Body, ev.IsBase64Encoded)
		}
	case kindHTTPAPI:
		var ev events.APIGatewayV2HTTPRequest
		if err = json.Unmarshal(payload, &ev); err == nil {
			req = fromV2(ev.RequestContext.HTTP.Method, ev.RawPath, ev.RequestContext.HTTP.Path, ev.RequestContext.Stage, ev.RawQueryString,
				ev.RequestContext.DomainName, ev.RequestContext.HTTP.SourceIP, ev.Headers, ev.Cookies, ev.Body, ev.IsBase64Encoded)
		}
	case kindREST:
		var ev events.APIGatewayProxyRequest
		if err = json.Unmarshal(payload, &ev); err == nil {
			multi = len(ev.MultiValueHeaders) > 0
			req = request{
				method:     ev.HTTPMethod,
				path:       restPath(ev.Path, ev.RequestContext.Path, ev.RequestContext.Stage),
				rawQuery:   decodedQuery(ev.QueryStringParameters, ev.MultiValueQueryStringParameters),
				host:       ev.RequestContext.DomainName,
				remoteAddr: ev.RequestContext.Identity.SourceIP,
				header:     headers(ev.Headers, ev.MultiValueHeaders),
				body:       ev.Body,
				base64:     ev.IsBase64Encoded,
			}
		}
	case kindALB:
		var ev events.ALBTargetGroupRequest
		if err = json.Unmarshal(payload, &ev); err == nil {
			multi = len(ev.MultiValueHeaders) > 0
			req = request{
				method:   ev.HTTPMethod,
				path:     ev.Path,
				rawQuery: rawQuery(ev.QueryStringParameters, ev.MultiValueQueryStringParameters),
				header:   headers(ev.Headers, ev.MultiValueHeaders),
				body:     ev.Body,
				base64:   ev.IsBase64Encoded,
			}
		}
	}
	if err != nil {
		a.log.Error("lambda: malformed event", "err", err)
		return a.errorResponse(kind, multi, http.StatusBadRequest, "malformed Lambda event: "+err.Error()), nil
	}
	hr, err := req.build(ctx)
	if err != nil {
		a.log.Error("lambda: cannot translate event", "err", err)
		return a.errorResponse(kind, multi, http.StatusBadRequest, err.Error()), nil
	}
	if kind == kindFunctionURL && a.opts.StreamFunctionURL {
		return a.stream(hr), nil
	}
	w := &bufferedWriter{header: http.Header{}, limit: a.limit(kind)}
	if err := a.serve(w, hr); err != nil {
		return a.errorResponse(kind, multi, http.StatusInternalServerError, "internal error: "+err.Error()), nil
	}
	if w.overflow {
		return a.tooLarge(kind, multi, w.total), nil
	}
	res := a.respond(kind, multi, w)
	if n := encodedLen(res); n > w.limit {
		return a.tooLarge(kind, multi, n), nil
	}
	return res, nil
}

// serve runs the handler, turning a panic into an error so that the
// invocation still answers with an HTTP response.
func (a *Handler) serve(w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				err = fmt.Errorf("handler aborted")
			} else {
				err = fmt.Errorf("handler panic: %v", p)
			}
			a.log.Error("lambda: handler failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}()
	a.h.ServeHTTP(w, r)
	return nil
}

func (a *Handler) limit(kind eventKind) int {
	if kind == kindALB && a.opts.MaxResponseBytes > ALBMaxResponseBytes {
		return ALBMaxResponseBytes
	}
	return a.opts.MaxResponseBytes
}

func (a *Handler) tooLarge(kind eventKind, multi bool, n int) any {
	lim := a.limit(kind)
	msg := fmt.Sprintf("response exceeds the Lambda payload limit (%d bytes > %d bytes after encoding)", n, lim)
	if n <= lim { // the body alone overflowed; its exact encoded size is unknown
		msg = fmt.Sprintf("response exceeds the Lambda payload limit (more than %d bytes after encoding)", lim)
	}
	a.log.Error("lambda: "+msg, "kind", kind)
	return a.errorResponse(kind, multi, http.StatusInternalServerError, msg)
}

// fromV2 reads the payload 2.0 members shared by Function URL and HTTP API
// events.
func fromV2(method, rawPath, ctxPath, stage, rawQuery, domain, sourceIP string, hdr map[string]string, cookies []string, body string, b64 bool) request {
	p := rawPath
	if p == "" {
		p = ctxPath
	}
	// A named stage is the first segment of rawPath; $default has none.
	if stage != "" && stage != "$default" {
		p = stripStage(p, stage)
	}
	h := headers(hdr, nil)
	if len(cookies) > 0 {
		// 2.0 moves the Cookie header into the cookies array.
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	return request{method: method, path: p, rawQuery: rawQuery, host: domain, remoteAddr: sourceIP, header: h, body: body, base64: b64}
}

func stripStage(p, stage string) string {
	prefix := "/" + stage
	switch {
	case p == prefix:
		return "/"
	case strings.HasPrefix(p, prefix+"/"):
		return p[len(prefix):]
	}
	return p
}

// restPath picks the routed path of a payload 1.0 event. REST APIs deliver
// `path` without the stage (requestContext.path has it), so it is used as
// is; HTTP APIs sending payload 1.0 put a named stage into both, which is
// the only case the stage is stripped. Comparing the two keeps a stage
// called e.g. "v2" from eating the first segment of /v2/... paths.
func restPath(p, ctxPath, stage string) string {
	if stage != "" && stage != "$default" && ctxPath == p {
		return stripStage(p, stage)
	}
	return p
}

// headers merges single- and multi-value header maps into canonical form.
// Multi-value maps win: API Gateway REST sends both and only the
// multi-value form keeps repeated headers apart.
func headers(single map[string]string, multi map[string][]string) http.Header {
	h := make(http.Header, len(single)+len(multi))
	if len(multi) > 0 {
		for k, vs := range multi {
			ck := http.CanonicalHeaderKey(k)
			h[ck] = append(h[ck], vs...)
		}
		return h
	}
	for k, v := range single {
		ck := http.CanonicalHeaderKey(k)
		h[ck] = append(h[ck], v)
	}
	return h
}

// decodedQuery encodes API Gateway REST query parameters, which arrive
// percent-decoded.
func decodedQuery(single map[string]string, multi map[string][]string) string {
	v := url.Values{}
	if len(multi) > 0 {
		for k, vs := range multi {
			v[k] = append(v[k], vs...)
		}
	} else {
		for k, s := range single {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// rawQuery joins ALB query parameters, which arrive exactly as the client
// sent them (still percent-encoded), without encoding them again.
func rawQuery(single map[string]string, multi map[string][]string) string {
	var parts []string
	if len(multi) > 0 {
		for k, vs := range multi {
			for _, s := range vs {
				parts = append(parts, k+"="+s)
			}
		}
	} else {
		for k, s := range single {
			parts = append(parts, k+"="+s)
		}
	}
	sort.Strings(parts) // map order is random; keep the URL deterministic
	return strings.Join(parts, "&")
}

// build makes the *http.Request the handler sees.
func (r request) build(ctx context.Context) (*http.Request, error) {
	body := []byte(r.body)
	if r.base64 {
		var err error
		if body, err = base64.StdEncoding.DecodeString(r.body); err != nil {
			return nil, fmt.Errorf("request body is not valid base64: %v", err)
		}
	}
	p := r.path
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("request path %q does not start with '/'", p)
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return nil, fmt.Errorf("bad request path %q: %v", p, err)
	}
	host := r.header.Get("Host")
	if host == "" {
		host = r.host
	}
	u := &url.URL{Scheme: "https", Host: host, Path: dec, RawQuery: r.rawQuery}
	if dec != p {
		u.RawPath = p
	}
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(ctx, method, "/", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bad request: %v", err)
	}
	hr.URL = u
	hr.Host = host
	hr.RequestURI = u.RequestURI()
	hr.RemoteAddr = r.remoteAddr
	hr.Header = r.header
	hr.Header.Del("Transfer-Encoding") // the body is complete: its length is known
	// The v2 handlers read the body length from Content-Length, so it must
	// be the decoded size, not whatever the client sent before base64.
	hr.ContentLength = int64(len(body))
	hr.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return hr, nil
}

// bufferedWriter is the in-memory http.ResponseWriter of buffered events.
// It stops storing the body once it is over limit: the encoded event can
// only be larger, so the response is rejected anyway.
type bufferedWriter struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	limit    int
	total    int
	overflow bool
}

func (w *bufferedWriter) Header() http.Header { return w.header }

func (w *bufferedWriter) WriteHeader(code int) {
	checkStatus(code)
	if code < 200 {
		return // informational: Lambda can only send the final response
	}
	if w.status == 0 {
		w.status = code
	}
}

func (w *bufferedWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.total += len(p)
	if w.overflow || w.total > w.limit {
		w.overflow = true
		w.body.Reset()
		return len(p), nil
	}
	return w.body.Write(p)
}

// Flush lets streaming handlers run; everything is sent at the end anyway.
func (w *bufferedWriter) Flush() { w.WriteHeader(http.StatusOK) }

// respond builds the response event for kind from w.
func (a *Handler) respond(kind eventKind, multi bool, w *bufferedWriter) any {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	body, b64 := encodeBody(w.header.Get("Content-Type"), w.body.Bytes())
	switch kind {
	case kindFunctionURL:
		h, cookies := flatten(w.header, true)
		return events.LambdaFunctionURLResponse{StatusCode: status, Headers: h, Body: body, IsBase64Encoded: b64, Cookies: cookies}
	case kindREST:
		res := events.APIGatewayProxyResponse{StatusCode: status, Body: body, IsBase64Encoded: b64}
		if multi {
			res.MultiValueHeaders = multiHeaders(w.header)
		} else {
			res.Headers, _ = flatten(w.header, false)
		}
		return res
	case kindALB:
		res := events.ALBTargetGroupResponse{StatusCode: status, StatusDescription: statusDescription(status), Body: body, IsBase64Encoded: b64}
		if multi {
			res.MultiValueHeaders = multiHeaders(w.header)
		} else {
			res.Headers, _ = flatten(w.header, false)
		}
		return res
	default: // HTTP API payload 2.0, and undetectable events
		h, cookies := flatten(w.header, true)
		return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: h, Body: body, IsBase64Encoded: b64, Cookies: cookies}
	}
}

// errorResponse answers with a v2 error body ({"error": msg}) in kind's
// response type.
func (a *Handler) errorResponse(kind eventKind, multi bool, status int, msg string) any {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w := &bufferedWriter{header: http.Header{"Content-Type": {"application/json"}}, status: status}
	w.body.Write(b)
	return a.respond(kind, multi, w)
}

// checkStatus panics on codes net/http's own ResponseWriter panics on, so
// handlers behave the same here; serve turns the panic into a 500.
func checkStatus(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
}

func statusDescription(code int) string {
	return strings.TrimSpace(strconv.Itoa(code) + " " + http.StatusText(code))
}

// encodeBody returns body as a plain string when it is JSON or text and
// valid UTF-8, else base64 (binary tensors must survive the JSON event).
func encodeBody(contentType string, body []byte) (string, bool) {
	if len(body) == 0 {
		return "", false
	}
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if (mt == "application/json" || strings.HasPrefix(mt, "text/")) && utf8.Valid(body) {
		return string(body), false
	}
	return base64.StdEncoding.EncodeToString(body), true
}

// flatten joins repeated headers with ","; with cookies, Set-Cookie goes
// to the separate cookies list (payload 2.0), since joined cookies break.
func flatten(h http.Header, cookies bool) (map[string]string, []string) {
	out := make(map[string]string, len(h))
	var jar []string
	for k, vs := range h {
		if cookies && k == "Set-Cookie" {
			jar = append(jar, vs...)
			continue
		}
		out[k] = strings.Join(vs, ",")
	}
	return out, jar
}

func multiHeaders(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// encodedLen is the size of v as aws-lambda-go sends it (HTML escaping
// off, no trailing newline).
func encodedLen(v any) int {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0
	}
	return b.Len() - 1
}
