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

/*
 * Follows /v1/<kind>s/{id}/events (kind "experiment" or "evaluation") until a terminal
 * status, which *status gets (size n), drawing the progress on out: runs done of all,
 * those skipped when an experiment stopped early, passed runs and their rate among the runs
 * that ran, runs per second and the time left; redrawn in place when out is a terminal,
 * else a plain line every 5 s and one at the end. Returns as cli_follow; an interrupt
 * (cli_interrupted) ends it early.
 */
enum cli_exit cli_progress_follow(const struct cli_conn *c, FILE *out, const char *kind,
                                  const char *id, char *status, size_t n);

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
 * leading field path ("treatments[1].prompt cannot be empty") the document has, or 0. An
 * inline case's member is looked up inside the case: "cases[0]: messages[1].role …" and
 * "case oslo: tool_results.x …" (the case of that id; only its members answer).
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

/* The verdict table (stdout), per treatment: delta and interval, p, MDE, verdict, costs;
 * under the anytime rule each verdict's CS; an early stop at the end. */
void cli_report_table(FILE *out, const json_t *experiment);
/* A Markdown summary for $GITHUB_STEP_SUMMARY. */
void cli_report_markdown(FILE *out, const json_t *experiment);
/*
 * JUnit XML: one testsuite per treatment, one testcase per case, failed when the
 * treatment fails a case the control passes, skipped when the experiment stopped before
 * running it; a sequential verdict puts its rule, CS and the stop in the suite's
 * properties. cases: the experiment's case rows.
 */
void cli_report_junit(FILE *out, const json_t *experiment, const json_t *cases);
/* GitHub workflow commands: ::error for each worse treatment, ::warning for each case that
 * regressed, ::notice for an early stop. */
void cli_report_github(FILE *out, const json_t *experiment, const json_t *cases);

/* A GitHub ::error annotation of a file's line (line 0: of the file; col 0: no column). */
void cli_github_file_error(FILE *out, const char *file, int line, int col, const char *msg);

/*
 * The stop of an experiment that ended before its last case, into buf: "decided at case 84
 * of 1,000, 2,748 runs saved", "budget reached at case 40 of 1,000, 5,760 runs saved".
 * false (and "") when it did not stop early: no `stopped`, or every case ran.
 */
bool cli_report_stop(char *buf, size_t n, const json_t *experiment);
/* A comparison's judge line into buf (docs/judges.md), "" when it has no judge. */
const char *cli_judge_note(char *buf, size_t n, const json_t *comparison);

/* The exit code a finished experiment earns under the options (a sequential `continue`
 * counts as inconclusive). */
enum cli_exit cli_report_exit(const json_t *experiment, bool require_better,
                              bool fail_on_inconclusive);

/* XML text escaping of s onto out. */
void cli_xml_text(FILE *out, const char *s);

/* ---- plans (plan.c), pure over the answer of POST /v1/experiments/plan ---------------- */

/* The line `experiment run` prints before it starts, into buf: "plan: 6,000 runs, at least
 * 600 calls, cost ≈ $1.20 (max $9.80)", or "…, cost unknown (no price)". */
const char *cli_plan_line(char *buf, size_t n, const json_t *plan);
/*
 * The plan, one figure a line: runs, the fewest calls, the input-token estimate, the
 * output-token maximum, the cost (or that there is no price) and the power (the cases and
 * runs needed, or what is missing). request: the body it was made for (its stopping rule).
 */
void cli_plan_print(FILE *out, const json_t *plan, const json_t *request);

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
/* v with thousands separators ("6,000") into buf. */
const char *cli_count_text(char *buf, size_t n, long long v);
/* An amount of dollars: "$1.20", "$12,345.60", and a fraction of a cent to two significant
 * digits ("$0.0012"). */
const char *cli_usd_text(char *buf, size_t n, double usd);
/* The first max characters of s (UTF-8; NULL: "") into buf, never cut inside one. */
void cli_utf8_cut(char *buf, size_t n, size_t max, const char *s);
/* s escaped for a URL's query into buf. */
const char *cli_url_escape(const char *s, char *buf, size_t n);

#endif
