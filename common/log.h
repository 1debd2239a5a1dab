/*
 * Structured logging: one JSON object per line on stderr, written whole (one mutex
 * around the write, so lines from different threads never interleave). Keys are stable:
 * ts (RFC 3339 UTC, ms), level, msg, then the caller's fields. Every line parses as
 * JSON whatever the input: bytes that are not UTF-8 become U+FFFD, control characters
 * are escaped, and a value longer than EVD_LOG_FIELD_MAX is cut on a character boundary
 * and ends with the EVD_LOG_TRUNCATED marker (the line is never cut). Never pass a
 * secret or a request/response body. Thread-safe.
 */
#ifndef EVD_COMMON_LOG_H
#define EVD_COMMON_LOG_H

#include <stdarg.h>

enum evd_log_level { EVD_LOG_DEBUG, EVD_LOG_INFO, EVD_LOG_WARN, EVD_LOG_ERROR };

/* Bounds: a whole line, one value (msg included) as written, one key as written. */
#define EVD_LOG_LINE_MAX 16384
#define EVD_LOG_FIELD_MAX 2048
#define EVD_LOG_KEY_MAX 64
/* A shortened value ends with this, then ", <n> bytes in all]". */
#define EVD_LOG_TRUNCATED "\xe2\x80\xa6[truncated"

/* Minimum level written; default INFO. Set once before threads start. */
void evd_log_set_level(enum evd_log_level level);

/* Parses "debug|info|warn|error"; returns -1 when unknown. */
int evd_log_level_parse(const char *s);

/*
 * Writes one line. `fields` is a NULL-terminated list of key, value string pairs;
 * a value of NULL skips the pair. Values whose key ends in "_ms" or is "status",
 * "attempt" or "worker" and that are JSON numbers are written as numbers.
 */
void evd_log(enum evd_log_level level, const char *msg, ...) __attribute__((sentinel));

/*
 * Names the run the calling thread works on: every line it writes until the next call
 * carries "trace_id" and "span_id" (the run attempt's trace and root span, lowercase hex;
 * docs/otel.md). NULL (either) clears them.
 */
void evd_log_set_trace(const char *trace_hex, const char *span_hex);

/*
 * A printf-style message of a library (libmicrohttpd's MHD_OPTION_EXTERNAL_LOGGER) as
 * one warn line {"msg": <text>, "source": <source>}; `source` is a const char * name.
 */
void evd_log_external(void *source, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* A libpq notice (PQsetNoticeProcessor) as one line with "source":"libpq", its level
 * from the severity prefix ("WARNING:" is warn, "NOTICE:" info, ...). `arg` is unused. */
void evd_log_pq_notice(void *arg, const char *message);

#endif
