/*
 * Fuzz target: the dataset readers (domain/dataset.c) behind POST /v1/datasets. The first
 * input byte picks the format (byte % 3: JSON, JSONL, CSV) and how the body is split
 * (byte / 3: pieces of 1 to 85 bytes); the rest is the upload. The body is read twice,
 * whole and in pieces, and both reads must agree: the same outcome and message, the same
 * cases handed to the sink, the same SHA-256 (which must also equal the canonical hash of
 * the cases). Each case handed out must be normalized: an object of exactly id (a
 * non-empty string), vars (an object without "expected"), expected and metadata (an object).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "domain/canonical.h"
#include "domain/dataset.h"
#include "tests/fuzz/fuzz.h"

#define MAX_CASES 64

static enum evd_code collect(void *ctx, size_t position, const json_t *c, struct evd_err *err)
{
    (void)err;
    json_t *cases = ctx;
    if (position != json_array_size(cases) + 1)
        abort();
    const json_t *id = json_object_get(c, "id"), *vars = json_object_get(c, "vars");
    if (json_object_size(c) != 4 || !json_is_string(id) || json_string_length(id) == 0 ||
        !json_is_object(vars) || json_object_get(vars, "expected") != NULL ||
        json_object_get(c, "expected") == NULL || !json_is_object(json_object_get(c, "metadata")))
        abort();
    json_array_append_new(cases, json_deep_copy(c));
    return EVD_OK;
}

struct outcome {
    enum evd_code rc;
    struct evd_err err;
    json_t *cases;
    char sha[65];
};

static void read_body(enum evd_dataset_format f, const uint8_t *data, size_t size, size_t piece,
                      struct outcome *o)
{
    memset(o, 0, sizeof(*o));
    o->cases = json_array();
    struct evd_dataset_reader *r = evd_dataset_reader_new(f, MAX_CASES, collect, o->cases);
    if (r == NULL || o->cases == NULL)
        abort();
    size_t off = 0;
    o->rc = EVD_OK;
    while (off < size && o->rc == EVD_OK) {
        size_t n = piece == 0 || size - off < piece ? size - off : piece;
        o->rc = evd_dataset_reader_feed(r, data + off, n, &o->err);
        off += n;
    }
    if (o->rc == EVD_OK)
        o->rc = evd_dataset_reader_finish(r, &o->err);
    if (o->rc == EVD_OK) {
        memcpy(o->sha, evd_dataset_reader_sha256(r), 65);
        if (evd_dataset_reader_count(r) != json_array_size(o->cases))
            abort();
    }
    evd_dataset_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum evd_dataset_format f = (enum evd_dataset_format)(data[0] % 3u);
    size_t piece = 1 + data[0] / 3u;
    struct outcome whole, split;
    read_body(f, data + 1, size - 1, 0, &whole);
    read_body(f, data + 1, size - 1, piece, &split);
    if (whole.rc != split.rc || strcmp(whole.err.msg, split.err.msg) != 0 ||
        !json_equal(whole.cases, split.cases))
        abort();
    if (whole.rc == EVD_OK) {
        char direct[65];
        if (strcmp(whole.sha, split.sha) != 0 || evd_canonical_sha256(whole.cases, direct) != 0 ||
            strcmp(direct, whole.sha) != 0 || json_array_size(whole.cases) == 0)
            abort();
    } else if (whole.err.msg[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    json_decref(whole.cases);
    json_decref(split.cases);
    return 0;
}
