/*
 * Recording of the HTTP exchanges the C end-to-end suites have with evald, for the
 * contract check (tests/openapi/contract.mjs validates each one against the OpenAPI
 * document). Active only when EVALD_CONTRACT_RECORD names a directory: each process
 * then appends one JSON line per exchange to <dir>/<suite>-<pid>.jsonl, where suite is
 * EVALD_CONTRACT_SUITE (the CTest name). Only exchanges with an evald started by the
 * test helpers are recorded, never those with evald-stub or anything else.
 * Thread-safe (one mutex); a forked child opens its own file.
 */
#ifndef EVD_TESTS_CONTRACT_RECORD_H
#define EVD_TESTS_CONTRACT_RECORD_H

#include <stdbool.h>
#include <stddef.h>

/* Notes that `base` ("http://host:port") is an evald under test. */
void evd_t_contract_note_evald(const char *base);
/* Forgets `base` (its port may be reused by another kind of server). */
void evd_t_contract_forget(const char *base);
/* True when `url` starts with a noted evald base. */
bool evd_t_contract_is_evald(const char *url);

/*
 * Appends one exchange when recording is on and `url` belongs to a noted evald.
 * `req_headers` are "Name: value" strings (NULL-terminated, may be NULL); an
 * Authorization value is never written. `raw_headers` is the response header block as
 * received; `body` holds `len` bytes (binary bodies are recorded by size only).
 * Failures to record are reported on stderr once and otherwise ignored.
 */
void evd_t_contract_record(const char *method, const char *url, const char *const *req_headers,
                           size_t req_body_len, long status, const char *raw_headers,
                           const char *body, size_t len);

#endif
