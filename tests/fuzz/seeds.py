#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ (run from anywhere; rewrites
them). Seeds are valid inputs taken from the README, docs/ and the unit tests, plus a few
near misses, each framed as its target expects (docs/fuzzing.md)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def j(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


# ---- request: first byte = decoder (fuzz_request.c), then the body -----------------------
START = {
    "dimension": "prompt",
    "model": {"model": "stub-model", "provider": "openai"},
    "control": {"label": "reply", "prompt": "Reply with exactly OK."},
    "treatment": {"label": "return", "prompt": "Return exactly the text OK."},
    "evaluator": {"function_id": "eval::assert::normalized_text", "arguments": {"expected": "OK"}},
    "runs": 3,
}
START_FULL = {
    "dimension": "system_prompt",
    "execution_order": "balanced_treatment_first",
    "runs": 2,
    "concurrency": 4,
    "model": {"model": "claude-sonnet-4-5", "provider": "anthropic", "thinking_level": "low",
              "system_prompt_strategy": "override", "provider_options": {"anthropic": {"top_k": 5}}},
    "control": {"label": "terse", "prompt": "Say OK.", "system_prompt": "Answer in one word."},
    "treatment": {"label": "chatty", "prompt": "Say OK.", "system_prompt": "Explain first."},
    "evaluator": {"function_id": "eval::assert::exact", "arguments": {"expected": {"answer": "OK"}}},
    "limits": {"execution": {"invocation_timeout_seconds": 30, "scenario_timeout_seconds": 120,
                             "max_turns": 4, "max_output_tokens_per_call": 512,
                             "max_total_tokens": 10000, "max_cost_usd": 0.5},
               "evaluation": {"max_function_call_errors": 1, "max_error_spans": 2}},
    "functions": {"allow": ["weather.*"], "deny": ["weather.secret"], "expose": "native"},
    "output": {"type": "json", "schema": {"type": "object", "properties": {"answer": {"type": "string"}},
                                          "required": ["answer"], "additionalProperties": False}},
    "metadata": {"ticket": "T-1", "tags": ["a", "b"]},
}
START_REVIEW = dict(START)
START_REVIEW["evaluator"] = {
    "function_id": "eval::assert::agent_review",
    "arguments": {
        "model": "gpt-4.1-mini", "instructions": "Check that the answer is OK.",
        "green_schema": {"type": "object", "properties": {"note": {"type": "string"}},
                         "additionalProperties": False},
        "red_schema": {"type": "object", "properties": {"reason": {"type": "string"}},
                       "required": ["reason"], "additionalProperties": False},
        "functions": {"allow": ["lookup"], "expose": "agent_trigger"},
        "thinking_level": "minimal", "max_tokens": 4000, "max_tool_calls": 3,
    },
}
NORMALIZED = {
    "dimension": "prompt", "execution_order": "balanced_control_first", "runs": 3,
    "model": {"model": "gpt-test", "provider": "openai", "system_prompt_strategy": "enrich"},
    "control": {"label": "baseline", "prompt": "Reply with OK.", "system_prompt": "Be exact."},
    "treatment": {"label": "candidate", "prompt": "Return exactly OK.", "system_prompt": "Be exact."},
    "evaluator": {"function_id": "eval::assert::exact", "arguments": {"expected": "OK"}},
    "limits": {"execution": {"invocation_timeout_seconds": 120, "scenario_timeout_seconds": 600,
                             "max_turns": 8, "max_output_tokens_per_call": 4096},
               "evaluation": {}},
    "functions": {"allow": [], "deny": [], "expose": "agent_trigger"},
    "output": {"type": "text"},
    "source_evaluation_id": "eval_abc",
}
METRICS = {
    "root_session_id": "ses_1", "complete": True,
    "totals": {"sessions": 1, "turns": 2, "function_calls": 1, "function_call_errors": 0,
               "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25},
    "by_session": [{"session_id": "ses_1", "depth": 0, "turns": 2, "function_calls": 1,
                    "function_call_errors": 0}],
    "traces": {"trace_count": 1, "span_count": 5, "error_span_count": 0, "duration_ms": 1500,
               "by_session": []},
}
EVAL_INPUT = {"evaluation_id": "eval_1", "run_id": "run_1", "session_id": "ses_1",
              "role": "control", "output": "OK", "metrics": METRICS,
              "arguments": {"expected": "ok"}}
SESSION = {"title": "terse", "model": {"model": "stub-model", "provider": "openai"},
           "system_prompt": "Answer in one word.", "prompt": "Reply with exactly OK.",
           "functions": {"allow": ["weather.current"]}, "output": {"type": "text"},
           "limits": {"max_turns": 3, "max_cost_usd": 1.5}, "metadata": {"k": "v"}}
TOOL = {"description": "Current temperature in a city, in degrees Celsius.",
        "request_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"], "additionalProperties": False},
        "url": "http://127.0.0.1:9000/weather", "timeout_ms": 5000}
SUB = {"url": "https://hooks.example.com/evald", "secret": "0123456789abcdef-secret",
       "evaluation_id": "eval_abc"}

requests = [
    (0, "start", START), (0, "start_full", START_FULL), (0, "start_review", START_REVIEW),
    (0, "start_bad_runs", dict(START, runs=0)),
    (1, "normalized", NORMALIZED),
    (2, "list", {"limit": 10}), (2, "list_null", {"limit": None}),
    (3, "evaluation_id", {"evaluation_id": "eval_abc"}),
    (4, "rerun", {"evaluation_id": "eval_abc", "reverse_order": True}),
    (5, "step", {"evaluation_id": "eval_abc", "step": 2}),
    (6, "wake", {"session_id": "ses_1", "terminal": True}),
    (7, "sweep", {"scheduled_at": 1700000000, "scheduled_time": "2026-01-01T00:00:00Z"}),
    (8, "evaluator_input", EVAL_INPUT),
    (8, "evaluator_input_json", dict(EVAL_INPUT, role="treatment", output={"a": [1, 2.5, None]},
                                     arguments={"expected": {"a": [1, 2.5, None]}})),
    (9, "session", SESSION), (9, "session_min", {"model": {"model": "gpt-4.1-mini"}}),
    (10, "message", {"content": "And now in French?"}),
    (11, "tool", TOOL),
    (12, "subscription", SUB),
    (12, "subscription_local", dict(SUB, url="http://127.0.0.1:8099/hook", evaluation_id=None)),
    (13, "review_args", START_REVIEW["evaluator"]["arguments"]),
    (14, "evaluator_answer", {"passed": True, "score": 0.75, "reason": "close", "details": {"d": 1}}),
    (15, "pieces", {"model": START_FULL["model"], "functions": START_FULL["functions"],
                    "output": START_FULL["output"]}),
]
for byte, name, body in requests:
    write("request", name, bytes([byte]) + j(body).encode())

# ---- jsonschema: the schema, then the instance text --------------------------------------
golden = os.path.join(HERE, "..", "unit", "jsonschema_golden")
for fn in sorted(os.listdir(golden)):
    if not fn.endswith(".json"):
        continue
    with open(os.path.join(golden, fn)) as f:
        doc = json.load(f)
    schema = doc.get("owner") or doc.get("schema")
    if schema is None:
        continue
    answers = [c.get("answer", c.get("value", c)) for c in doc.get("cases", [])][:2]
    instance = answers[0] if answers else {}
    write("jsonschema", fn[:-5], j(schema) + " " + (instance if isinstance(instance, str) else j(instance)))
schemas = [
    ("refs", {"definitions": {"pos": {"type": "integer", "minimum": 1}},
              "type": "array", "items": {"$ref": "#/definitions/pos"}, "maxItems": 3}, [1, 2, 3]),
    ("recursive", {"$id": "http://example.com/tree", "type": "object",
                   "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
     {"kids": [{"kids": []}]}),
    ("strings", {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$",
                 "format": "email"}, "ab@c.d"),
    ("formats", {"type": "object", "properties": {
        "d": {"format": "date-time"}, "u": {"format": "uri"}, "i": {"format": "ipv6"},
        "h": {"format": "hostname"}, "r": {"format": "regex"}, "j": {"format": "json-pointer"}}},
     {"d": "2026-01-01T00:00:00Z", "u": "http://a/b", "i": "::1", "h": "a.b", "r": "a+",
      "j": "/a/0"}),
    ("numbers", {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": 10, "minimum": -1}, 2.5),
    ("combinators", {"anyOf": [{"type": "null"}, {"allOf": [{"type": "integer"}, {"not": {"const": 3}}]}],
                     "oneOf": [{"enum": [1, 2, None]}, {"minimum": 5}]}, 2),
    ("objects", {"type": "object", "minProperties": 1, "maxProperties": 3,
                 "propertyNames": {"pattern": "^[a-z]"}, "patternProperties": {"^x": {"type": "boolean"}},
                 "additionalProperties": {"type": "string"},
                 "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
                 "if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {"maxProperties": 2}},
     {"a": "1", "b": "2", "xy": True}),
    ("arrays", {"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                "additionalItems": False, "contains": {"const": "k"}, "uniqueItems": True},
     ["k", 1]),
    ("bool_true", True, {"anything": 1}),
    ("bool_false", False, None),
    ("not_json_answer", {"type": "object"}, "Sure! Here is the JSON: {\"a\":1}"),
]
for name, schema, inst in schemas:
    write("jsonschema", name, j(schema) + " " + j(inst))
write("jsonschema", "verdict_envelope",
      j({"type": "object", "properties": {"note": {"type": "string"}}, "additionalProperties": False})
      + " " + j({"verdict": "GREEN", "result": {"note": "fine"}}))

# ---- provider: first byte = wire (0 Responses, 1 Messages, 2 Chat), then the body --------
responses = {
    "id": "resp_1", "object": "response", "created_at": 1735689600, "status": "completed",
    "error": None, "incomplete_details": None, "model": "gpt-4.1-mini",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
        {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
         "content": [{"type": "output_text", "text": "{\"answer\":\"OK\"}", "annotations": [],
                      "logprobs": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup",
         "arguments": "{\"word\":\"ok\"}", "status": "completed"}],
    "parallel_tool_calls": True,
    "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 2}, "output_tokens": 7,
              "output_tokens_details": {"reasoning_tokens": 3}, "total_tokens": 19},
    "previous_response_id": None, "tool_choice": "auto", "text": {"format": {"type": "text"}},
    "tools": [], "metadata": {}}
responses_refusal = dict(responses, status="incomplete",
                         incomplete_details={"reason": "max_output_tokens"},
                         output=[{"type": "message", "id": "msg_2", "status": "incomplete",
                                  "role": "assistant",
                                  "content": [{"type": "refusal", "refusal": "I cannot."}]}])
messages = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "OK"},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"word": "ok"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "cache_creation_input_tokens": 1, "cache_read_input_tokens": 2,
              "cache_creation": {"ephemeral_5m_input_tokens": 1, "ephemeral_1h_input_tokens": 0},
              "output_tokens": 4, "service_tier": "standard"}}
messages_text = dict(messages, stop_reason="end_turn", content=[{"type": "text", "text": "OK"}])
chat = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1735689600, "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK", "refusal": None,
                                         "tool_calls": [{"id": "call_1", "type": "function",
                                                         "function": {"name": "lookup",
                                                                      "arguments": "{\"word\":\"ok\"}"}}]},
                 "logprobs": None, "finish_reason": "tool_calls"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
              "prompt_tokens_details": {"cached_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0}},
    "system_fingerprint": None}
chat_text = dict(chat, choices=[{"index": 0, "message": {"role": "assistant", "content": "OK"},
                                 "finish_reason": "stop"}])
errors = [
    {"error": {"message": "Rate limit reached for sk-proj-****abcd", "type": "requests",
               "code": "rate_limit_exceeded"}},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    {"detail": "Not Found"},
]
for name, kind, body in [("responses", 0, responses), ("responses_refusal", 0, responses_refusal),
                         ("messages", 1, messages), ("messages_text", 1, messages_text),
                         ("chat", 2, chat), ("chat_text", 2, chat_text)]:
    write("provider", name, bytes([kind]) + j(body).encode())
for i, body in enumerate(errors):
    write("provider", "error_%d" % i, bytes([i]) + j(body).encode())
write("provider", "retry_after_seconds", b"\x00 2.5\r\n")
write("provider", "retry_after_date", b"\x01 Wed, 21 Oct 2026 07:28:00 GMT\r\n")
write("provider", "html", b"\x02<html><body>502 Bad Gateway</body></html>")

# ---- ws: first byte = mode/chunk (fuzz_ws.c) ----------------------------------------------
def frame(op, payload, fin=True, length_form=None):
    b0 = (0x80 if fin else 0) | op
    n = len(payload)
    if length_form == 126 or (length_form is None and 126 <= n < 65536):
        head = bytes([b0, 126]) + struct.pack(">H", n)
    elif length_form == 127 or (length_form is None and n >= 65536):
        head = bytes([b0, 127]) + struct.pack(">Q", n)
    else:
        head = bytes([b0, n])
    return head + payload


msg = j({"type": "invokefunction", "invocation_id": "inv_1", "function_id": "eval::status",
         "data": {"evaluation_id": "eval_abc"}}).encode()
write("ws", "text", bytes([0]) + frame(1, msg))
write("ws", "fragmented", bytes([3 * 4]) + frame(1, msg[:10], fin=False) + frame(9, b"ping")
      + frame(0, msg[10:20], fin=False) + frame(0, msg[20:]))
write("ws", "control", bytes([3 * 15]) + frame(9, b"") + frame(10, b"pong") + frame(2, b"\x00\x01")
      + frame(8, struct.pack(">H", 1000) + b"bye"))
write("ws", "len16", bytes([3 * 7]) + frame(1, b"x" * 200, length_form=126))
write("ws", "len64", bytes([3 * 2]) + frame(2, b"y" * 40, length_form=127))
write("ws", "masked_bad", bytes([0]) + bytes([0x81, 0x84]) + b"abcd" + b"\x00\x00\x00\x00")
write("ws", "too_big", bytes([0]) + frame(1, b"z" * 300))
head = ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n").encode()
write("ws", "handshake", bytes([1]) + head + frame(1, msg) + frame(8, b""))
write("ws", "handshake_refused", bytes([1]) + b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
write("ws", "handshake_extension", bytes([1]) + head[:-2]
      + b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n")
write("ws", "url", bytes([2]) + b"ws://127.0.0.1:49134/ws?x=1")
write("ws", "url_ipv6", bytes([2]) + b"ws://[::1]:8080")

# ---- iii: one engine message (fuzz_iii.c) --------------------------------------------------
iii = [
    ("invoke", {"type": "invokefunction", "invocation_id": "inv_9", "function_id": "eval::status",
                "data": {"evaluation_id": "eval_abc"}, "traceparent": "00-ab-cd-01", "baggage": "k=v"}),
    ("invoke_foreign", {"type": "invokefunction", "invocation_id": "inv_8", "function_id": "other::fn",
                        "data": {}}),
    ("invoke_no_id", {"type": "invokefunction", "function_id": "eval::start", "data": START}),
    ("result", {"type": "invocationresult", "invocation_id": "inv_1", "function_id": "sink::fn",
                "result": {"ok": True}}),
    ("result_error", {"type": "invocationresult", "invocation_id": "inv_1",
                      "error": {"code": "invocation_failed", "message": "boom"}}),
    ("register", {"type": "registertrigger", "id": "b-1", "trigger_type": "eval::completed",
                  "function_id": "sink::fn", "config": {"evaluation_id": "eval_abc"},
                  "metadata": {"k": 1}, "namespace": "default"}),
    ("register_other", {"type": "registertrigger", "id": "b-2", "trigger_type": "cron",
                        "function_id": "sink::fn", "config": None}),
    ("unregister", {"type": "unregistertrigger", "id": "b-1", "trigger_type": "eval::completed"}),
    ("registered", {"type": "workerregistered", "worker_id": "w-1", "reattach_token": "tok"}),
    ("ping", {"type": "ping"}),
    ("rejected", {"type": "registrationrejected", "code": "duplicate", "function_id": "eval::start",
                  "owner_worker_id": "w-2"}),
    ("trigger_result", {"type": "triggerregistrationresult", "id": "b-1",
                        "error": {"code": "x", "message": "y"}}),
    ("error", {"type": "error", "error": {"code": "bad", "message": "bad frame"}}),
]
for name, m in iii:
    write("iii", name, j(m))

# ---- experiment: byte 0 even = a start request, odd = the sequential statistics
# (fuzz_experiment.c) -------------------------------------------------------------------------
EXPERIMENT = {
    "name": "fuzz", "dimension": "prompt",
    "model": {"model": "gpt-4.1-mini", "provider": "openai"},
    "control": {"label": "a", "prompt": "Q: {{question}}", "system_prompt": None},
    "treatments": [{"label": "b", "prompt": "Answer briefly. Q: {{question}}"},
                   {"prompt": "Think. {{question}} ({{topic}})"}],
    "dataset_id": "ds_00000000000000000000000000000000",
    "evaluator": {"function_id": "eval::assert::normalized_text",
                  "arguments": {"expected": "{{expected}}"}},
    "repeats": 3, "concurrency": 8,
    "analysis": {"alpha": 0.05, "min_effect": 0.05, "cluster_by": "topic"},
    "stopping": {"rule": "anytime", "min_cases": 10, "seed": 42},
    "budget": {"max_calls": 2000, "max_tokens": 5000000, "max_cost_usd": 12.5},
    "plan": {"effect": 0.2, "sd": 0.5, "pilot_experiment_id": "exp_00000000000000000000000000000000"},
}
write("experiment", "start_full", bytes([0]) + j(EXPERIMENT).encode())
write("experiment", "start_inline", bytes([0]) + j({
    "dimension": "system_prompt", "model": {"model": "claude-sonnet-4-5"},
    "control": {"prompt": "{{question}}", "system_prompt": "be terse"},
    "treatments": [{"prompt": "{{question}}", "system_prompt": "be kind"}],
    "cases": [{"vars": {"question": "x"}}],
    "evaluator": {"function_id": "eval::assert::exact", "arguments": {"expected": "x"}},
    "stopping": {"rule": "fixed"}, "budget": None}).encode())
write("experiment", "start_refused", bytes([0]) + j(dict(
    EXPERIMENT, stopping={"rule": "anytime", "min_cases": 1.5, "seed": -3})).encode())
# Differences as byte % 7 (0 → −1, 3 → 0, 6 → +1) after α'' and min_cases.
write("experiment", "cs_decisive", bytes([1, 40, 10]) + bytes([6] * 60))
write("experiment", "cs_equal", bytes([3, 3, 2]) + bytes([3] * 80))
write("experiment", "cs_mixed", bytes([1, 200, 5]) + bytes((k * 37 + 11) % 256 for k in range(400)))
