// Package textmodel describes a text model from the files beside its
// config.pbtxt, so that the OpenAI- and TEI-compatible routes
// (platforms/openai) know what a model serves and how to feed it:
//
//   - tokenizer.json, the Hugging Face tokenizer (repo/tokenizer);
//   - config.json: architectures, max_position_embeddings, id2label;
//   - tokenizer_config.json: model_max_length, chat_template, bos_token,
//     eos_token (kept raw for the chat routes, where repo/chattemplate
//     chooses between chat_template and chat_template.jinja);
//   - sentence_bert_config.json: max_seq_length, which Text Embeddings
//     Inference reads first (huggingface/text-embeddings-inference
//     router/src/lib.rs);
//   - 1_Pooling/config.json, sentence-transformers' pooling
//     (huggingface/sentence-transformers
//     sentence_transformers/models/Pooling.py); mean when absent.
//
// Every file is optional, read through repo/modelfile (never outside the
// folder, never more than a bound) and parsed leniently: unknown fields
// are ignored.
//
// The kinds (Describe classifies; see docs/openai.md):
//
//   - EmbeddingTokens: input_ids (+ attention_mask, token_type_ids),
//     INT64 or INT32, one variable (or fixed) dimension per row,
//     max_batch_size > 0, a tokenizer.json, and one FP32 output of token
//     embeddings [-1, H] (the server pools) or a pooled [H] per row;
//     config.json names no *ForSequenceClassification architecture.
//   - EmbeddingText: one BYTES input of dims [1] and one FP32 [H] output
//     per row: a model that tokenizes itself (an ensemble, a model.py).
//   - Reranker: token inputs as above and one logit [1] per row, with a
//     *ForSequenceClassification architecture of one label.
//   - Generator: BYTES text_input and BYTES text_output (Triton's LLM
//     convention), with the optional stream, sampling_parameters and
//     exclude_input_in_output inputs noted.
//   - None: anything else, with the reason.
//
// config.pbtxt parameters override what the files say:
//
//	openai_kind       embedding, reranker, generator or none
//	pooling           mean, cls, max or lasttoken
//	max_length        the most tokens a row may have, special tokens included
//	embedding_output  the output to read when the model has several
//	pad_to_multiple_of  pad a request's rows to a multiple of this many
//	                  tokens (default: tokenizer.json's padding section)
package textmodel
