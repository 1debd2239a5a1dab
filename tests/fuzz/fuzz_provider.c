/*
 * Fuzz target: what evald reads from a model provider (harness/). The first input byte
 * picks the wire (byte % 3: OpenAI Responses, Anthropic Messages, Chat Completions); the
 * rest is the HTTP response body. It goes where harness/http.c sends a body:
 *   - as an error body, through evd_hx_error_detail and the scrubbing of that message,
 *     which must leave no copy of the provider's key in it;
 *   - as a 2xx body, parsed like evd_hx_provider_call (a JSON object) and handed to the
 *     wire's parser (evd_hx_parse_reply); a parsed reply is then used as the harness uses
 *     it: its answer text is decoded as text and as JSON output, its tool calls give their
 *     argument text, and the assistant message (with its provider_state) is replayed into
 *     the next request of every wire, followed by one tool result per tool call;
 *   - as a Retry-After header value (evd_hx_parse_retry_after).
 * The wires are not streamed (every request sends "stream": false), so there is no SSE
 * reader to fuzz; docs/fuzzing.md says how to add one when streaming lands.
 */
#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "harness/internal.h"
#include "harness/providers.h"
#include "tests/fuzz/fuzz.h"

/*
 * The providers an output contract is opened for, by wire: [kind][0] a built-in one that
 * enforces the format (openai, anthropic; none is built in for Chat Completions, so its
 * [kind][0] is the file's too), [kind][1] one of a providers file, which may not (a bare
 * answer is then accepted). Every output below is opened for both. Loaded once.
 */
static const struct evd_provider *providers_by_kind[3][2];

static const char *fuzz_env(void *ctx, const char *name)
{
    if (strcmp(name, "OPENAI_API_KEY") == 0)
        return "sk-fuzz-openai-0123456789";
    if (strcmp(name, "ANTHROPIC_API_KEY") == 0)
        return "sk-ant-fuzz-0123456789";
    if (strcmp(name, "EVALD_PROVIDERS_FILE") == 0)
        return ctx;
    return NULL;
}

static void load_providers(void)
{
    static bool loaded;
    static struct evd_providers *registry; /* lives for the process */
    if (loaded)
        return;
    loaded = true;
    char path[] = "/tmp/evald-fuzz-providers-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return;
    static const char file[] =
        "{\"providers\":[{\"name\":\"r\",\"kind\":\"openai-responses\",\"base_url\":"
        "\"http://127.0.0.1:9/v1\",\"models\":[{\"id\":\"m\"}]},{\"name\":\"a\",\"kind\":"
        "\"anthropic-messages\",\"base_url\":\"http://127.0.0.1:9\",\"models\":[{\"id\":\"m\"}]},"
        "{\"name\":\"c\",\"kind\":\"openai-chat\",\"base_url\":\"http://127.0.0.1:9/v1\","
        "\"models\":[{\"id\":\"m\"}]}]}";
    bool written = write(fd, file, sizeof(file) - 1) == (ssize_t)(sizeof(file) - 1);
    close(fd);
    struct evd_err err = {0};
    if (written && evd_providers_load(fuzz_env, path, &registry, &err) == EVD_OK) {
        static const char *const names[3][2] = {{"openai", "r"}, {"anthropic", "a"}, {"c", "c"}};
        for (int k = 0; k < 3; k++)
            for (int e = 0; e < 2; e++) {
                json_t *model = json_pack("{s:s, s:s}", "model", "m", "provider", names[k][e]);
                struct evd_resolved_model rm;
                if (model != NULL && evd_providers_resolve(registry, model, &rm, &err) == EVD_OK)
                    providers_by_kind[k][e] = rm.provider;
                json_decref(model);
            }
    }
    unlink(path);
}

static void replay(json_t *message, json_t *tool_calls)
{
    json_t *messages = json_pack("[{s:s,s:s}]", "role", "user", "content", "hello");
    if (messages == NULL)
        return;
    json_array_append(messages, message);
    size_t i;
    json_t *call;
    json_array_foreach(tool_calls, i, call)
    {
        const char *id = json_string_value(json_object_get(call, "id"));
        const char *name = json_string_value(json_object_get(call, "name"));
        char *args = evd_hx_tool_call_args_text(call);
        free(args);
        json_array_append_new(messages,
                              json_pack("{s:s,s:s,s:s,s:s,s:b}", "role", "tool", "tool_call_id",
                                        id ? id : "", "name", name ? name : "", "content",
                                        "{\"ok\":true}", "is_error", 0));
    }
    json_t *tools = json_pack("[{s:s,s:s,s:{s:s}}]", "name", "lookup", "description",
                              "looks a word up", "parameters", "type", "object");
    for (int k = EVD_KIND_OPENAI_RESPONSES; k <= EVD_KIND_OPENAI_CHAT; k++) {
        struct evd_hx_request r;
        memset(&r, 0, sizeof(r));
        r.model = "fuzz-model";
        r.system = "be brief";
        r.messages = messages;
        r.tools = tools;
        r.max_output_tokens = 256;
        r.thinking_level = "low";
        struct evd_err err = {0};
        json_t *body = evd_hx_build_request((enum evd_provider_kind)k, &r, &err);
        if (body != NULL) {
            char *text = json_dumps(body, JSON_COMPACT);
            free(text);
        }
        json_decref(body);
    }
    json_decref(tools);
    json_decref(messages);
}

static void use_text(enum evd_provider_kind kind, const char *text)
{
    static const char *const outputs[] = {
        "{\"type\":\"text\"}",
        "{\"type\":\"json\"}",
        "{\"type\":\"json\",\"schema\":{\"type\":\"object\",\"required\":[\"answer\"]}}",
    };
    for (size_t i = 0; i < sizeof(outputs) / sizeof(outputs[0]) * 2; i++) {
        json_t *output = json_loads(outputs[i / 2], 0, NULL);
        struct evd_hx_output o;
        struct evd_err err = {0};
        const struct evd_provider *pr = providers_by_kind[kind][i % 2];
        if (output != NULL && pr != NULL &&
            evd_hx_output_open(&o, pr, output, NULL, &err) == EVD_OK) {
            json_t *out = NULL;
            struct evd_so_failure failure;
            memset(&failure, 0, sizeof(failure));
            if (evd_hx_output_decode(&o, text, &out, &failure) == EVD_SO_VALID)
                json_decref(out);
            evd_hx_output_close(&o);
        }
        json_decref(output);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        evd_log_set_level(EVD_LOG_ERROR + 1);
        quiet = 1;
    }
    if (size < 1)
        return 0;
    load_providers();
    enum evd_provider_kind kind = (enum evd_provider_kind)(data[0] % 3u);
    const char *body = (const char *)data + 1;
    size_t len = size - 1;

    /*
     * The provider's key, as a provider might echo it in an error: the last n bytes of the
     * body (n = byte 0 / 3 % 16) when they are 4 or more letters and digits, else a fixed one.
     * After scrubbing, the message must not contain it.
     */
    char secret[16] = "sk-fuzz-secret";
    size_t n = (size_t)(data[0] / 3u % 16u);
    if (n >= 4 && n <= len) {
        bool alnum = true;
        for (size_t i = len - n; i < len; i++)
            alnum = alnum && isalnum((unsigned char)body[i]);
        if (alnum) {
            memcpy(secret, body + len - n, n);
            secret[n] = '\0';
        }
    }
    char detail[256];
    evd_hx_error_detail(body, len, detail, sizeof(detail));
    evd_hx_scrub(detail, secret);
    if (strstr(detail, secret) != NULL)
        abort(); /* the key would reach an error message */

    char *header = malloc(len + 1);
    if (header == NULL)
        return 0;
    memcpy(header, body, len);
    header[len] = '\0';
    evd_hx_parse_retry_after(header, 1700000000000);
    free(header);

    json_error_t jerr;
    json_t *doc = json_loadb(body, len, 0, &jerr);
    if (doc != NULL && json_is_object(doc)) {
        struct evd_hx_reply reply;
        struct evd_err err = {0};
        if (evd_hx_parse_reply(kind, doc, &reply, &err) == EVD_OK) {
            if (reply.text == NULL || reply.message == NULL)
                abort(); /* a successful parse always has both */
            use_text(kind, reply.text);
            replay(reply.message, reply.tool_calls);
            evd_hx_reply_clear(&reply);
        }
    }
    json_decref(doc);
    return 0;
}
