// Package openai serves the OpenAI-compatible routes (/v1/models,
// /v1/embeddings, /v1/rerank; the chat and completion routes live here too)
// and Hugging Face Text Embeddings Inference's (/embed, /rerank,
// /tokenize) on the HTTP API's router, over the same models and the same
// inference pipeline as the v2 routes (platforms/infer): each call is one
// or more core requests, counted in the metrics and traced as /infer's.
//
// What a model serves is read from its folder by repo/textmodel, once per
// loaded version. Requests are tokenized on the handler's goroutine with
// the folder's tokenizer.json (repo/tokenizer); a request's rows go to the
// model as one core request along the batch dimension (several when they
// outnumber max_batch_size), padded to the longest row of that request,
// and the model's dynamic batcher batches across requests.
//
// Errors: the /v1 routes answer OpenAI's {"error": {message, type, param,
// code}} (openai/openai-python maps the status to its typed errors), the
// TEI routes TEI's {"error", "error_type"}
// (huggingface/text-embeddings-inference router/src/http/types.rs).
// With API keys (--openai-api-key, --openai-api-key-file) both families
// need "Authorization: Bearer <key>"; the v2 routes keep their own rules
// (--http-restricted-api, which also applies to these routes: inference
// for the encoder routes, metadata for /v1/models).
//
// See docs/openai.md.
package openai
