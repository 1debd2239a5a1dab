/*
 * Datasets of test cases (../shared/spec/experiments.md, "Datasets"): reading an upload
 * in JSON, JSONL or CSV into normalized cases, one at a time, with the refusal messages
 * of the contract. The reader is fed the body in pieces as it arrives and hands each
 * normalized case to a sink at once, so a caller can store cases while the body is still
 * streaming in: JSONL and CSV hold only the current line or row, never the whole body.
 * (A JSON upload is one document, so it is kept until finish; it is bounded by the
 * caller's byte limit.) The SHA-256 of the canonical form of the normalized `cases` array
 * is computed on the way, case by case.
 *
 * A normalized case is `{"id", "vars", "expected", "metadata"}`, always those four keys in
 * that order: absent vars -> {}, expected -> null, metadata -> {}; then `messages` (the
 * conversation so far, [{role: user|assistant, content}], 1..200) and `tool_results` (an
 * object, the mocked tools' answers) only when the case has them (agent-cases.md). A CSV
 * column `messages` or `tool_results` holds JSON text (empty: none). A case without an id gets
 * "c<k>", k its 1-based position; ids are unique, and an explicit id equal to a default one
 * is a duplicate. Refusals name the case: "cases[2]: …" (JSON, 0-based), "line 3: …" (JSONL,
 * physical lines from 1; blank lines are skipped) and "row 7: …" (CSV data rows from 1; the
 * header is not a row).
 *
 * Pure (no I/O); a reader belongs to one thread at a time.
 */
#ifndef EVD_DOMAIN_DATASET_H
#define EVD_DOMAIN_DATASET_H

#include <jansson.h>
#include <stddef.h>

#include "common/err.h"

enum evd_dataset_format {
    EVD_DATASET_JSON,  /* application/json: {"name", "cases": [...]} */
    EVD_DATASET_JSONL, /* application/x-ndjson: one case object a line */
    EVD_DATASET_CSV,   /* text/csv: a header row, then one case a row */
    EVD_DATASET_CASES, /* the elements of a JSON cases array, handed over one at a time
                          (evd_dataset_reader_case), e.g. split off a streaming body */
};

/* Longest dataset name and case id, in bytes. */
#define EVD_DATASET_NAME_MAX 200
#define EVD_DATASET_ID_MAX 256
/* Most messages in a case's conversation. */
#define EVD_DATASET_MESSAGES_MAX 200

/*
 * Receives each normalized case in dataset order: position is 1-based, c is borrowed and
 * valid during the call only. Returns EVD_OK to go on, or a code (with err set) that
 * stops the reader; that code is what feed or finish then returns.
 */
typedef enum evd_code (*evd_dataset_sink)(void *ctx, size_t position, const json_t *c,
                                          struct evd_err *err);

struct evd_dataset_reader;

/*
 * A reader of one upload in format f that passes at most max_cases cases to sink(ctx).
 * NULL on ENOMEM. sink may be NULL (validate and hash only).
 */
struct evd_dataset_reader *evd_dataset_reader_new(enum evd_dataset_format f, size_t max_cases,
                                                  evd_dataset_sink sink, void *ctx);

/* Feeds the next len bytes of the body. EVD_OK, or the refusal (err names the case). */
enum evd_code evd_dataset_reader_feed(struct evd_dataset_reader *r, const void *data, size_t len,
                                      struct evd_err *err);

/*
 * The element at `index` of a JSON cases array (raw, borrowed), named "cases[index]", for
 * a reader of format EVD_DATASET_CASES (which takes no bytes: feed refuses). EVD_OK, or
 * the refusal, as feed.
 */
enum evd_code evd_dataset_reader_case(struct evd_dataset_reader *r, const json_t *raw,
                                      size_t index, struct evd_err *err);

/*
 * Ends the body: reads what is left (a JSON document, a last line without a newline) and
 * checks that there was at least one case ("cases must contain between 1 and <max>
 * cases"). EVD_OK, or the refusal. Feed and finish after a refusal return it again.
 */
enum evd_code evd_dataset_reader_finish(struct evd_dataset_reader *r, struct evd_err *err);

/*
 * Before finish, a JSON reader's body as received so far (borrowed; NULL for the other
 * formats, which hold no more than a line): what an Idempotency-Key compares, in canonical
 * form, for a JSON upload.
 */
const char *evd_dataset_reader_text(const struct evd_dataset_reader *r, size_t *len);

/* After a successful finish: the number of cases and the lowercase hex SHA-256. */
size_t evd_dataset_reader_count(const struct evd_dataset_reader *r);
const char *evd_dataset_reader_sha256(const struct evd_dataset_reader *r);

/*
 * The "name" member of a JSON upload after a successful finish (borrowed from the reader),
 * or NULL for the other formats, which take their name from the query.
 */
const char *evd_dataset_reader_name(const struct evd_dataset_reader *r);

void evd_dataset_reader_free(struct evd_dataset_reader *r);

/*
 * Checks a dataset name (from the JSON body or ?name=): "name must be a non-empty string
 * of at most 200 bytes" (field names the parameter or member, e.g. "name").
 */
enum evd_code evd_dataset_check_name(const char *name, size_t len, struct evd_err *err);

/*
 * Normalizes an inline `cases` array (borrowed; a POST /v1/experiments body) exactly like
 * a JSON upload: every case to sink, the count and the hex SHA-256 into *count and sha.
 */
enum evd_code evd_dataset_normalize_cases(const json_t *cases, size_t max_cases,
                                          evd_dataset_sink sink, void *ctx, size_t *count,
                                          char sha[65], struct evd_err *err);

#endif
