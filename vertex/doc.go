// Package vertex is the Google Vertex AI container frontend. It is a thin
// layer over the KServe v2 API server (platforms/httpapi): a Vertex request
// in the v2 format is rewritten (path, method, headers, body framing) into
// a v2 request and served by the base server in-process, so inference,
// health, restrictions (--http-restricted-api), size limits and the error
// mapping are the base server's own. Vertex's own {"instances": [...]}
// request runs through the same inference pipeline as the base /infer
// route (platforms/infer), decoded from the instances into the core
// request and rendered from the core response by the instances translator
// that SageMaker's records share (platforms/instances), with no v2 body
// between; the {"predictions"} envelope and the error statuses are this
// package's. Handlers return their errors to one renderer, writeError.
//
// Routes, matched against the whole request path (query ignored):
//
//   - AIP_HEALTH_ROUTE: GET /v2/health/ready (200 / 400 / 405 / 503). Until
//     Resolve succeeds it answers 400, so the port can be bound before the
//     models load (Vertex's TCP liveness probe gives up after ~40 s).
//   - AIP_PREDICT_ROUTE without X-Vertex-Ai-Triton-Redirect: POST
//     /v2/models/<default>/infer. The JSON header length comes from
//     Content-Type "application/vnd.vertex-ai-triton.binary+json;json-header-size=<H>";
//     Inference-Header-Content-Length, Content-Encoding and Accept-Encoding
//     are ignored, as in Triton.
//   - AIP_PREDICT_ROUTE with X-Vertex-Ai-Triton-Redirect: <value>: the
//     request must be POST and is rewritten to "/"+<value> with the target's
//     native method; mutating shared-memory and model-control targets are
//     refused (403), anything unknown (the log and trace settings too) is
//     400.
//   - AIP_PREDICT_ROUTE with "Accept: text/event-stream" (a streamRawPredict
//     caller on a dedicated endpoint): POST /v2/models/<default>/generate_stream,
//     answered with server-sent events.
//   - with Options.InvokeRoutes (--vertex-ai-invoke-routes), any other path:
//     the v2 route of that path with the request's own method, headers and
//     body (a POST to a read-only GET route is served as its GET, since
//     Vertex's invoke method is a POST), and /metrics. A Model uploaded
//     with invokeRoutePrefix "/*"
//     gets ".../invoke/<path>" as "/<path>" and has no predict route; routes
//     that change the server (model load/unload, shared-memory
//     register/unregister, POST to the log and trace settings) answer 403
//     with an empty body.
//   - anything else: 400 with an empty body.
//
// Beyond Triton, the predict route also accepts Vertex's standard
// {"instances": [...]} request, so `gcloud ai endpoints predict` works. A
// JSON body whose top-level object has an "instances" member and no
// "inputs" member is translated (platforms/instances):
//
//   - Each instance is either that input's row (only for one-input models)
//     or an object keyed by input name (any model). Every instance uses the
//     same form and the same keys; multi-input models require the object
//     form.
//   - Each input becomes one input tensor whose data is the instances' rows
//     in order, each element converted as in a v2 body's "data". For models
//     with max_batch_size > 0 the shape is [len(instances)] + row shape;
//     models without batching take exactly one instance, whose value is the
//     whole tensor. The row shape is the input's dims when they are all
//     fixed, else the nesting of the JSON arrays.
//   - "parameters" are the request parameters, read as a v2 body's, without
//     "binary_data_output" (the predictions are always JSON).
//   - The outputs map to {"predictions": [...]}: with one output,
//     predictions[i] is that output's row i (nested to the row shape); with
//     several, predictions[i] is {"<output name>": row i, ...}.
//   - Errors keep the {"error": "..."} body; a mapping the model's inputs
//     do not allow is 400.
package vertex
