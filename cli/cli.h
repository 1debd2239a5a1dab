/*
 * evald-cli: a client of a running evald over its REST API (docs/evald-cli.1). This header
 * is the contract between its files: the exit codes, the HTTP client, the document loader
 * (YAML or JSON with the line of every value), and the output writers.
 * Single-threaded; every json_t returned is a new reference unless said otherwise.
 */
#ifndef EVD_CLI_CLI_H
#define EVD_CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Exit codes CI can branch on. */
enum cli_exit {
    CLI_OK = 0,           /* no treatment worse (and the requirement met) */
    CLI_WORSE = 1,        /* a treatment is worse, or fails --require */
    CLI_USAGE = 2,        /* usage, file or request errors (a 4xx answer) */
    CLI_INCONCLUSIVE = 3, /* a treatment is inconclusive, with --fail-on-inconclusive */
    CLI_TRANSPORT = 4,    /* transport errors and 5xx answers */
};

/* ---- the HTTP client (client.c) ------------------------------------------------------ */

struct cli_conn {
    const char *url;   /* base URL, no trailing slash */
    const char *token; /* bearer token, or NULL */
    long timeout_ms;   /* connect and whole-call timeout of a plain call */
};

/* An answer: status (0 when none came), body parsed when JSON (else NULL), raw body. */
struct cli_answer {
    long status;
    json_t *json;
    char *body;
    size_t len;
};

void cli_answer_free(struct cli_answer *a);

/*
 * One call: method, path (appended to the base URL), an optional body with its content
 * type. Returns CLI_OK with *a filled when an answer came (any status); CLI_TRANSPORT,
 * with a message on stderr naming the call, when none did.
 */
enum cli_exit cli_call(const struct cli_conn *c, const char *method, const char *path,
                       const char *content_type, const char *body, size_t len,
                       struct cli_answer *a);

/*
 * A creating POST made safe to retry: it sends an Idempotency-Key of its own (evald
 * answers a repeat with the first answer and creates nothing) and, with the same key,
 * tries again after a transport error or a 503, up to `attempts` calls in all, 1 s, 2 s,
 * 4 s … apart, as long as the next call can end within three times the connection's
 * timeout of the first (so --timeout still bounds a dead server). Otherwise as cli_call.
 */
/* The calls of a start or an upload (cli_create): 1 + 3 retries, 7 s of waits in all. */
#define CLI_CREATE_ATTEMPTS 4
enum cli_exit cli_create(const struct cli_conn *c, const char *path, const char *content_type,
                         const char *body, size_t len, int attempts, struct cli_answer *a);

/*
 * A call that must succeed: as cli_call, then a 4xx answer prints its detail and returns
 * CLI_USAGE, a 5xx or another unexpected status prints what came back and returns
 * CLI_TRANSPORT. `what` names the call in messages ("start the experiment").
 */
enum cli_exit cli_expect(const struct cli_conn *c, const char *what, const char *method,
                         const char *path, const char *content_type, const char *body, size_t len,
                         struct cli_answer *a);

/*
 * As cli_expect, for an idempotent call: a 503 (evald's "try again", e.g. a transaction
 * that lost a deadlock) is tried again, a second later, up to `attempts` calls in all.
 */
enum cli_exit cli_expect_retry(const struct cli_conn *c, const char *what, const char *method,
                               const char *path, const char *content_type, const char *body,
                               size_t len, int attempts, struct cli_answer *a);

/* The `detail` of a problem answer, or its body, for messages (borrowed from a). */
const char *cli_answer_detail(const struct cli_answer *a);

/*
 * Follows a Server-Sent Events stream: on_event(ctx, name, data) for each event (data
 * parsed as JSON when it is, else NULL; borrowed for the call); returns nonzero to stop.
 * on_tick(ctx) runs about once a second while the stream is open (NULL: none). Returns
 * CLI_OK when the stream ended or was stopped, CLI_TRANSPORT when it could not be read,
 * CLI_USAGE on a 4xx.
 */
typedef int (*cli_event_fn)(void *ctx, const char *name, const json_t *data);
enum cli_exit cli_follow(const struct cli_conn *c, const char *path, cli_event_fn on_event,
                         int (*on_tick)(void *ctx), void *ctx);

/* Set from the SIGINT handler; calls and streams end soon after it is. */
extern volatile int cli_interrupted;

/* ---- documents (doc.c) --------------------------------------------------------------- */

/*
 * A YAML or JSON file as JSON, with the line of every value by its path ("treatments[1].
 * prompt"). The value and the map are new references; NULL with a message in err
 * ("FILE:LINE:COL: …") when the file cannot be read or parsed.
 */
struct cli_doc {
    char *path;    /* the file as named */
    json_t *root;  /* the document */
    json_t *lines; /* {path: line} */
};

bool cli_doc_load(struct cli_doc *d, const char *path, char *err, size_t errsz);
void cli_doc_free(struct cli_doc *d);

/*
 * The line of the value a server message is about: the longest prefix of the message's
 * leading field path ("treatments[1].prompt cannot be empty") the document has, or 0.
 */
int cli_doc_line_of(const struct cli_doc *d, const char *message);

/*
 * The first template (in file order) that uses the variable a server message is about
 * ("case q3: template variable topic is not defined"): its line, with its path written
 * into field (size n); 0 when the message names no variable or no string of the document
 * has a {{name}} placeholder of it.
 */
int cli_doc_template_line(const struct cli_doc *d, const char *message, char *field, size_t n);

/* ---- output writers (report.c), pure over an experiment document --------------------- */

/* The verdict table (stdout), per treatment: delta and interval, p, MDE, verdict, costs. */
void cli_report_table(FILE *out, const json_t *experiment);
/* A Markdown summary for $GITHUB_STEP_SUMMARY. */
void cli_report_markdown(FILE *out, const json_t *experiment);
/*
 * JUnit XML: one testsuite per treatment, one testcase per case, failed when the
 * treatment fails a case the control passes. cases: the experiment's case rows.
 */
void cli_report_junit(FILE *out, const json_t *experiment, const json_t *cases);
/* GitHub workflow commands: ::error for each worse treatment, ::warning for each case that
 * regressed. */
void cli_report_github(FILE *out, const json_t *experiment, const json_t *cases);

/* A GitHub ::error annotation of a file's line (line 0: of the file; col 0: no column). */
void cli_github_file_error(FILE *out, const char *file, int line, int col, const char *msg);

/* The exit code a finished experiment earns under the options. */
enum cli_exit cli_report_exit(const json_t *experiment, bool require_better,
                              bool fail_on_inconclusive);

/* XML text escaping of s onto out. */
void cli_xml_text(FILE *out, const char *s);

/* ---- small helpers of the commands (util.c) ---- */

/* The whole file (NUL-terminated, *len its length; malloc'd), or NULL. */
char *cli_read_file(const char *path, size_t *len);
/* Whether s ends with suffix, ignoring case. */
bool cli_ends_with(const char *s, const char *suffix);
/* Opens PATH for writing ("-" is stdout); NULL with a message. */
FILE *cli_open_out(const char *path);
/* Closes (stdout: flushes) what cli_open_out opened; false with a message. */
bool cli_close_out(FILE *f, const char *path);
/* v as indented JSON on stdout. */
void cli_print_json(const json_t *v);
/* Monotonic seconds. */
double cli_now_s(void);
/* A JSON number as short text, "n/a" otherwise. */
const char *cli_num_text(char *buf, size_t n, const json_t *v);
/* The first max characters of s (UTF-8; NULL: "") into buf, never cut inside one. */
void cli_utf8_cut(char *buf, size_t n, size_t max, const char *s);
/* s escaped for a URL's query into buf. */
const char *cli_url_escape(const char *s, char *buf, size_t n);

#endif
