// Drives inferd's OpenAI routes with OpenAI's official Node client (the npm
// package openai) and prints what the client made of each answer as one
// JSON object; cmd/inferd/openai_sdk_test.go asserts on it. The script
// judges nothing itself, so that a wrong answer shows in the Go test.
//
// INFERD_BASE is the server's /v1 URL; INFERD_KEYED_BASE and INFERD_KEY a
// second server started with --openai-api-key=INFERD_KEY.
import OpenAI from "openai";
import { VERSION } from "openai/version";

const sent = [];
// Records each request body, so the test sees what the client asked for
// (the embeddings default encoding_format among them).
const recording = async (url, init) => {
  sent.push({ url: String(url), body: init && typeof init.body === "string" ? JSON.parse(init.body) : null });
  return fetch(url, init);
};
const client = new OpenAI({ baseURL: process.env.INFERD_BASE, apiKey: "unused", maxRetries: 0, fetch: recording });

// failure runs call and describes the error the client raised.
async function failure(call) {
  try {
    await call();
  } catch (err) {
    const classes = ["BadRequestError", "AuthenticationError", "NotFoundError", "UnprocessableEntityError", "InternalServerError"];
    return {
      class: err.constructor.name,
      is: classes.filter((c) => err instanceof OpenAI[c]),
      api_error: err instanceof OpenAI.APIError,
      status: err.status ?? null,
      type: err.type ?? null,
      code: err.code ?? null,
      param: err.param ?? null,
      message: err.message,
    };
  }
  return null;
}

const out = { sdk_version: VERSION };

const page = await client.models.list();
out.models = page.data.map((m) => ({ id: m.id, object: m.object, owned_by: m.owned_by }));
const m = await client.models.retrieve("embedder");
out.retrieved = { id: m.id, object: m.object, owned_by: m.owned_by };

const input = ["hello world", "the quick brown fox"];
const b64 = await client.embeddings.create({ model: "embedder", input });
out.embeddings_default = {
  sent_format: sent.at(-1).body.encoding_format ?? null,
  model: b64.model,
  usage: b64.usage,
  data: b64.data.map((d) => ({ index: d.index, object: d.object, embedding: Array.from(d.embedding) })),
};
const flt = await client.embeddings.create({ model: "embedder", input, encoding_format: "float" });
out.embeddings_float = {
  sent_format: sent.at(-1).body.encoding_format ?? null,
  data: flt.data.map((d) => ({ index: d.index, embedding: d.embedding })),
};
const short = await client.embeddings.create({ model: "embedder", input: "hello world", dimensions: 4 });
out.embeddings_dimensions = short.data.map((d) => Array.from(d.embedding));

const messages = [{ role: "user", content: "hello there" }];
const chat = await client.chat.completions.create({ model: "chat", messages });
out.chat = {
  id: chat.id,
  object: chat.object,
  role: chat.choices[0].message.role,
  content: chat.choices[0].message.content,
  finish_reason: chat.choices[0].finish_reason,
  usage: chat.usage,
};

const stream = await client.chat.completions.create({
  model: "chat",
  messages,
  stream: true,
  stream_options: { include_usage: true },
});
out.stream = [];
for await (const chunk of stream) {
  const c = chunk.choices[0];
  out.stream.push({
    object: chunk.object,
    choices: chunk.choices.length,
    role: c?.delta?.role ?? null,
    content: c?.delta?.content ?? null,
    finish_reason: c?.finish_reason ?? null,
    usage: chunk.usage ?? null,
  });
}

const comp = await client.completions.create({ model: "chat", prompt: "good morning to you", max_tokens: 3 });
out.completion = { object: comp.object, text: comp.choices[0].text, finish_reason: comp.choices[0].finish_reason, usage: comp.usage };

out.errors = {
  unknown_model: await failure(() => client.embeddings.create({ model: "no-such-model", input: "hi" })),
  unknown_model_retrieve: await failure(() => client.models.retrieve("no-such-model")),
  empty_input: await failure(() => client.embeddings.create({ model: "embedder", input: "" })),
  bad_dimensions: await failure(() => client.embeddings.create({ model: "embedder", input: "hi", dimensions: 4096 })),
  chat_n: await failure(() => client.chat.completions.create({ model: "chat", messages, n: 3 })),
};
if (process.env.INFERD_KEYED_BASE) {
  const keyed = (apiKey) => new OpenAI({ baseURL: process.env.INFERD_KEYED_BASE, apiKey, maxRetries: 0 });
  out.errors.wrong_key = await failure(() => keyed("sk-not-the-key").models.list());
  const ok = await keyed(process.env.INFERD_KEY).models.list();
  out.right_key_models = ok.data.length;
}

process.stdout.write(JSON.stringify(out) + "\n");
