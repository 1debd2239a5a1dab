/*
 * Unit tests for common/log.c: every line parses as JSON whatever the input (bytes that
 * are not UTF-8, control characters, huge values, many fields), long values are cut with
 * the marker rather than the line, library messages come out as lines too, and lines of
 * concurrent writers arrive whole through a pipe. stderr is redirected for each test.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "tests/support/testutil.h"

/* ---- capturing stderr into a temporary file ---- */

static int saved_fd = -1;
static FILE *captured;

static void capture_begin(void)
{
    fflush(stderr);
    captured = tmpfile();
    ck_assert_ptr_nonnull(captured);
    saved_fd = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_fd, 0);
    ck_assert_int_ge(dup2(fileno(captured), STDERR_FILENO), 0);
}

/* Restores stderr and returns what was written (malloc'd, NUL-terminated), *len bytes. */
static char *capture_end(size_t *len)
{
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    long n = ftell(captured);
    ck_assert_int_ge(n, 0);
    rewind(captured);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, captured), (size_t)n);
    buf[n] = '\0';
    fclose(captured);
    *len = (size_t)n;
    return buf;
}

/* Parses text[0..len) as JSON lines: fails the test with the line number of any line
 * that is not one JSON object; returns the lines as a new array. */
static json_t *parse_lines(const char *text, size_t len)
{
    json_t *lines = json_array();
    size_t at = 0, lineno = 0;
    ck_assert_msg(len == 0 || text[len - 1] == '\n', "the output does not end with a newline");
    while (at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = (size_t)(nl - (text + at));
        lineno++;
        json_error_t jerr;
        json_t *j = json_loadb(text + at, n, 0, &jerr);
        ck_assert_msg(j != NULL && json_is_object(j), "line %zu is not a JSON object: %s: %.200s",
                      lineno, jerr.text, text + at);
        ck_assert_msg(n + 1 <= EVD_LOG_LINE_MAX, "line %zu is %zu bytes", lineno, n + 1);
        json_array_append_new(lines, j);
        at += n + 1;
    }
    return lines;
}

/* Captures what `fn` logs and returns its only line (new reference). */
static json_t *one_line(void (*fn)(void))
{
    capture_begin();
    fn();
    size_t len;
    char *text = capture_end(&len);
    json_t *lines = parse_lines(text, len);
    free(text);
    ck_assert_uint_eq(json_array_size(lines), 1);
    json_t *l = json_incref(json_array_get(lines, 0));
    json_decref(lines);
    return l;
}

static const char *str(const json_t *line, const char *key)
{
    const char *s = json_string_value(json_object_get(line, key));
    ck_assert_msg(s != NULL, "no string \"%s\"", key);
    return s;
}

/* ---- cases ---- */

static void log_invalid_utf8(void)
{
    evd_log(EVD_LOG_INFO, "request \xff", "path", "/v1/sessions/\xff\xfe", "route",
            "ok \xe2\x82\xac", "cut", "ab\xe2\x82", "surrogate", "\xed\xa0\x80", NULL);
}

START_TEST(invalid_utf8_becomes_replacement_characters)
{
    json_t *l = one_line(log_invalid_utf8);
    ck_assert_str_eq(str(l, "msg"), "request \xef\xbf\xbd");
    ck_assert_str_eq(str(l, "path"), "/v1/sessions/\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(str(l, "route"), "ok \xe2\x82\xac"); /* valid UTF-8 stays as it is */
    ck_assert_str_eq(str(l, "cut"), "ab\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(str(l, "surrogate"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(str(l, "level"), "info");
    json_decref(l);
}
END_TEST

static void log_controls(void)
{
    evd_log(EVD_LOG_WARN, "line\nbreak", "error", "tab\there \"quoted\" back\\slash \x01\x1f\x7f",
            "crlf", "a\r\nb", NULL);
}

START_TEST(control_characters_are_escaped)
{
    json_t *l = one_line(log_controls);
    ck_assert_str_eq(str(l, "msg"), "line\nbreak");
    ck_assert_str_eq(str(l, "error"), "tab\there \"quoted\" back\\slash \x01\x1f\x7f");
    ck_assert_str_eq(str(l, "crlf"), "a\r\nb");
    json_decref(l);
}
END_TEST

static char *big_value; /* 100 KiB, set up by the test */

static void log_big(void)
{
    evd_log(EVD_LOG_ERROR, "big", "error", big_value, "req_id", "req_after", NULL);
}

START_TEST(a_100_kib_field_is_shortened_not_the_line)
{
    size_t n = 100 * 1024;
    big_value = malloc(n + 1);
    /* a multi-byte character and an escape in the pattern, so the cut lands anywhere */
    for (size_t i = 0; i < n; i += 4)
        memcpy(big_value + i, i % 8 ? "\xe2\x82\xac\"" : "ab\nc", 4);
    big_value[n] = '\0';
    json_t *l = one_line(log_big);
    const char *v = str(l, "error");
    ck_assert_uint_le(strlen(v), EVD_LOG_FIELD_MAX);
    ck_assert_uint_gt(strlen(v), EVD_LOG_FIELD_MAX / 2);
    char marker[64];
    snprintf(marker, sizeof(marker), EVD_LOG_TRUNCATED ", %zu bytes in all]", n);
    ck_assert_msg(strstr(v, marker) != NULL && strcmp(v + strlen(v) - strlen(marker), marker) == 0,
                  "no marker at the end of the value: ...%s", v + strlen(v) - 40);
    ck_assert(strncmp(v, big_value, 8) == 0);        /* the start is kept */
    ck_assert_str_eq(str(l, "req_id"), "req_after"); /* fields after it are still there */
    json_decref(l);
    free(big_value);
}
END_TEST

static void log_many_big(void)
{
    evd_log(EVD_LOG_INFO, big_value, "a", big_value, "b", big_value, "c", big_value, "d", big_value,
            "e", big_value, "f", big_value, "g", big_value, "h", big_value, "i", big_value, "j",
            big_value, "k", big_value, "status", "200", NULL);
}

START_TEST(many_long_fields_keep_the_line_whole)
{
    size_t n = 100 * 1024;
    big_value = malloc(n + 1);
    memset(big_value, '\x01', n); /* six bytes each once escaped */
    big_value[n] = '\0';
    capture_begin();
    log_many_big();
    size_t len;
    char *text = capture_end(&len);
    json_t *lines = parse_lines(text, len); /* fails on a line that does not parse */
    ck_assert_uint_eq(json_array_size(lines), 1);
    ck_assert_uint_le(len, EVD_LOG_LINE_MAX);
    json_t *l = json_array_get(lines, 0);
    ck_assert_ptr_nonnull(json_object_get(l, "a"));
    ck_assert_ptr_nonnull(strstr(str(l, "msg"), EVD_LOG_TRUNCATED));
    json_decref(lines);
    free(text);
    free(big_value);
}
END_TEST

static void log_numbers(void)
{
    evd_log(EVD_LOG_INFO, "n", "status", "200", "dur_ms", "1.5", "attempt", "1.2.3", "worker", "-",
            "wait_ms", "01", "other_ms", "1e3", "id", "42", NULL);
}

START_TEST(only_json_numbers_are_written_as_numbers)
{
    json_t *l = one_line(log_numbers);
    ck_assert_int_eq(json_integer_value(json_object_get(l, "status")), 200);
    ck_assert(json_is_real(json_object_get(l, "dur_ms")));
    ck_assert(json_is_real(json_object_get(l, "other_ms")));
    ck_assert_str_eq(str(l, "attempt"), "1.2.3");
    ck_assert_str_eq(str(l, "worker"), "-");
    ck_assert_str_eq(str(l, "wait_ms"), "01");
    ck_assert_str_eq(str(l, "id"), "42"); /* not a numeric key */
    json_decref(l);
}
END_TEST

static void external(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void external(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    evd_log_external((void *)"libmicrohttpd", fmt, ap);
    va_end(ap);
}

static void log_external(void)
{
    external("New connection socket descriptor (%d) is not less than FD_SETSIZE (%d).\n", 1024,
             1024);
}

START_TEST(library_messages_become_lines)
{
    json_t *l = one_line(log_external);
    ck_assert_str_eq(str(l, "msg"),
                     "New connection socket descriptor (1024) is not less than FD_SETSIZE (1024).");
    ck_assert_str_eq(str(l, "source"), "libmicrohttpd");
    ck_assert_str_eq(str(l, "level"), "warn");
    json_decref(l);
}
END_TEST

static void log_pq(void)
{
    evd_log_pq_notice(NULL, "WARNING:  there is no transaction in progress\n");
}

static void log_pq_notice(void)
{
    evd_log_pq_notice(NULL, "NOTICE:  relation \"x\" already exists, skipping\n");
}

START_TEST(libpq_notices_become_lines)
{
    json_t *l = one_line(log_pq);
    ck_assert_str_eq(str(l, "msg"), "WARNING:  there is no transaction in progress");
    ck_assert_str_eq(str(l, "source"), "libpq");
    ck_assert_str_eq(str(l, "level"), "warn");
    json_decref(l);
    l = one_line(log_pq_notice);
    ck_assert_str_eq(str(l, "level"), "info");
    ck_assert_str_eq(str(l, "msg"), "NOTICE:  relation \"x\" already exists, skipping");
    json_decref(l);
}
END_TEST

/* ---- concurrent writers through a pipe ---- */

#define WRITERS 8
#define LINES_EACH 200

static char *wide_value; /* larger than PIPE_BUF once written */

static void *writer(void *arg)
{
    char who[16];
    snprintf(who, sizeof(who), "%d", (int)(intptr_t)arg);
    for (int i = 0; i < LINES_EACH; i++) {
        char seq[16];
        snprintf(seq, sizeof(seq), "%d", i);
        evd_log(EVD_LOG_INFO, "concurrent", "writer", who, "seq", seq, "a", wide_value, "b",
                wide_value, "c", wide_value, "d", wide_value, NULL);
    }
    return NULL;
}

struct drain {
    int fd;
    struct evd_buf out;
};

static void *drainer(void *arg)
{
    struct drain *d = arg;
    char buf[8192];
    for (;;) {
        ssize_t n = read(d->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (evd_buf_append(&d->out, buf, (size_t)n) != 0)
            break;
        usleep(50); /* a slow reader fills the pipe, so writers block mid-line */
    }
    return NULL;
}

START_TEST(concurrent_writers_each_line_whole)
{
    wide_value = malloc(EVD_LOG_FIELD_MAX);
    memset(wide_value, 'w', EVD_LOG_FIELD_MAX - 2); /* the most that is kept whole */
    wide_value[EVD_LOG_FIELD_MAX - 2] = '\0';
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(p[1], STDERR_FILENO);
    close(p[1]);
    struct drain d = {.fd = p[0]};
    pthread_t rd, w[WRITERS];
    pthread_create(&rd, NULL, drainer, &d);
    for (intptr_t i = 0; i < WRITERS; i++)
        pthread_create(&w[i], NULL, writer, (void *)i);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(w[i], NULL);
    dup2(saved, STDERR_FILENO); /* closes the last write end: the drainer sees EOF */
    close(saved);
    pthread_join(rd, NULL);
    close(p[0]);
    json_t *lines = parse_lines(d.out.data ? d.out.data : "", d.out.len);
    ck_assert_uint_eq(json_array_size(lines), WRITERS * LINES_EACH);
    int next[WRITERS] = {0};
    size_t idx;
    json_t *l;
    json_array_foreach(lines, idx, l)
    {
        int who = atoi(str(l, "writer"));
        ck_assert(who >= 0 && who < WRITERS);
        ck_assert_int_eq(atoi(str(l, "seq")), next[who]); /* each writer's lines in order */
        next[who]++;
        ck_assert_str_eq(str(l, "d"), wide_value);
    }
    json_decref(lines);
    evd_buf_free(&d.out);
    free(wide_value);
}
END_TEST

START_TEST(utf8_sequences_are_classified)
{
    static const struct {
        const char *s;
        size_t len; /* what evd_utf8_seq answers */
    } seqs[] = {
        {"a", 1},
        {"\xc3\xa9", 2},
        {"\xe2\x82\xac", 3},
        {"\xf0\x9f\x98\x80", 4},
        {"\xf4\x8f\xbf\xbf", 4},
        {"\x80", 0},
        {"\xc0\xaf", 0},
        {"\xc1\xbf", 0},
        {"\xe0\x9f\xbf", 0},
        {"\xed\xa0\x80", 0},
        {"\xed\x9f\xbf", 3},
        {"\xf0\x8f\xbf\xbf", 0},
        {"\xf4\x90\x80\x80", 0},
        {"\xf5\x80\x80\x80", 0},
        {"\xe2\x82", 0},
        {"\xe2\x28\xa1", 0},
    };
    for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++)
        ck_assert_msg(evd_utf8_seq((const unsigned char *)seqs[i].s, strlen(seqs[i].s)) ==
                          seqs[i].len,
                      "sequence %zu", i);
    ck_assert(evd_utf8_valid("a\0b", 3));
    ck_assert(!evd_utf8_valid("ab\xff", 3));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, invalid_utf8_becomes_replacement_characters);
    tcase_add_test(tc, control_characters_are_escaped);
    tcase_add_test(tc, a_100_kib_field_is_shortened_not_the_line);
    tcase_add_test(tc, many_long_fields_keep_the_line_whole);
    tcase_add_test(tc, only_json_numbers_are_written_as_numbers);
    tcase_add_test(tc, library_messages_become_lines);
    tcase_add_test(tc, libpq_notices_become_lines);
    tcase_add_test(tc, concurrent_writers_each_line_whole);
    tcase_add_test(tc, utf8_sequences_are_classified);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
