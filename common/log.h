/*
 * Structured logging: one JSON object per line on stderr, written with a single
 * write(2) so lines from different threads never interleave. Keys are stable:
 * ts (RFC 3339 UTC, ms), level, msg, then the caller's fields. Never pass a secret
 * or a request/response body. Thread-safe.
 */
#ifndef EVD_COMMON_LOG_H
#define EVD_COMMON_LOG_H

enum evd_log_level { EVD_LOG_DEBUG, EVD_LOG_INFO, EVD_LOG_WARN, EVD_LOG_ERROR };

/* Minimum level written; default INFO. Set once before threads start. */
void evd_log_set_level(enum evd_log_level level);

/* Parses "debug|info|warn|error"; returns -1 when unknown. */
int evd_log_level_parse(const char *s);

/*
 * Writes one line. `fields` is a NULL-terminated list of key, value string pairs;
 * a value of NULL skips the pair. Values whose key ends in "_ms" or is "status" and
 * that look numeric are written as JSON numbers.
 */
void evd_log(enum evd_log_level level, const char *msg, ...) __attribute__((sentinel));

#endif
