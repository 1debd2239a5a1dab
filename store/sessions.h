/*
 * All SQL of ad-hoc sessions and their turns, and the one-query read behind a session
 * comparison. Every function takes a connection the caller owns and runs inside whatever
 * transaction the caller opened (none begins or commits).
 *
 * Lock order: a transaction that changes a session's turns or jobs first locks the
 * session row (evd_store_session_get with lock). JSON arguments are borrowed; returned
 * json_t are new references.
 */
#ifndef EVD_STORE_SESSIONS_H
#define EVD_STORE_SESSIONS_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* A session row; release with _clear. */
struct evd_store_session {
    char id[64];
    char status[16];
    char *title;          /* NULL when the session has none */
    json_t *config;       /* {model, system_prompt, functions, output, limits, metadata?} */
    json_t *conversation; /* harness conversation after the last completed turn */
    json_t *metrics;      /* SessionMetricsResponseV1 over finished turns, or NULL */
    int64_t wall_time_ms;
    int turn_count;
    int message_count;
    int64_t created_at, updated_at;
};
void evd_store_session_clear(struct evd_store_session *s);

enum evd_code evd_store_session_insert(PGconn *c, const char *id, const char *title,
                                       const json_t *config, int64_t now, struct evd_err *err);
/* With `lock`, SELECT … FOR UPDATE. EVD_ENOTFOUND "session not found: <id>". */
enum evd_code evd_store_session_get(PGconn *c, const char *id, bool lock,
                                    struct evd_store_session *out, struct evd_err *err);

/*
 * The SessionV1 representation (with last_turn), or NULL with EVD_ENOTFOUND. With
 * `turns`, *turns receives every turn in order as {turn_id, seq, prompt, status,
 * created_at, started_at, completed_at, transcript, progress} (new reference); the
 * transcripts (the heavy part) are read only with `transcripts`, else they are null.
 */
json_t *evd_store_session_view(PGconn *c, const char *id, json_t **turns, bool transcripts,
                               struct evd_err *err);
/* Newest first; `before` is a "<created_at>_<id>" cursor or NULL; *next_cursor malloc'd
 * when more remain. */
json_t *evd_store_session_list(PGconn *c, unsigned limit, const char *before, char **next_cursor,
                               struct evd_err *err);

/* Adds turn `seq` (queued) with its job, makes the session working and counts the user
 * message. */
enum evd_code evd_store_turn_add(PGconn *c, const char *session_id, int seq, const char *turn_id,
                                 const char *prompt, int64_t now, struct evd_err *err);

struct evd_store_turn {
    char turn_id[64];
    char status[16];
    int attempt;
    int64_t started_at; /* 0 = not yet */
    char *prompt;       /* malloc'd */
};
void evd_store_turn_clear(struct evd_store_turn *t);
enum evd_code evd_store_turn_get(PGconn *c, const char *session_id, int seq,
                                 struct evd_store_turn *out, struct evd_err *err);
/* queued → running for `attempt`, from now; clears an old progress snapshot. */
enum evd_code evd_store_turn_start(PGconn *c, const char *session_id, int seq, int attempt,
                                   int64_t now, struct evd_err *err);
/* Keeps a running snapshot if the turn still runs with `attempt`, and notifies. */
enum evd_code evd_store_turn_progress(PGconn *c, const char *session_id, int seq, int attempt,
                                      const json_t *metrics, struct evd_err *err);
/*
 * Writes a finished turn only if it is still running with `attempt` (*written says
 * whether): status, output (NULL = none), failures (array), metrics, transcript.
 */
enum evd_code evd_store_turn_finish(PGconn *c, const char *session_id, int seq, int attempt,
                                    const char *status, const json_t *output,
                                    const json_t *failures, const json_t *metrics,
                                    const json_t *transcript, int64_t now, bool *written,
                                    struct evd_err *err);
/* Records the transcript of a turn cancelled while `attempt` ran, once (*written). */
enum evd_code evd_store_turn_late_transcript(PGconn *c, const char *session_id, int seq,
                                             int attempt, const json_t *transcript, bool *written,
                                             struct evd_err *err);
/*
 * Cancels the session's queued or running turn: status cancelled, the failure appended,
 * its last progress snapshot kept as its metrics. *found false when no turn was open;
 * otherwise *progress (new reference or NULL) and *started_at (0 when it never started).
 */
enum evd_code evd_store_turn_cancel(PGconn *c, const char *session_id, const json_t *failure,
                                    int64_t now, bool *found, json_t **progress,
                                    int64_t *started_at, struct evd_err *err);
/* A running turn goes back to queued (attempt not counted) and its job is released, only
 * while `owner` holds the job's lease and the turn is at `attempt`. */
enum evd_code evd_store_turn_hand_back(PGconn *c, const char *session_id, int seq, int attempt,
                                       int64_t job_id, const char *owner, struct evd_err *err);

/*
 * After a turn ends: the session's status, summed metrics, conversation (NULL keeps the
 * stored one), wall time and message count increments, updated_at.
 */
enum evd_code evd_store_session_after_turn(PGconn *c, const char *id, const char *status,
                                           const json_t *metrics, const json_t *conversation,
                                           int64_t wall_add, int messages_add, int64_t now,
                                           struct evd_err *err);
/* Deletes the session's turn jobs. */
enum evd_code evd_store_session_jobs_delete(PGconn *c, const char *id, struct evd_err *err);
/* Deletes a session (turns cascade) and its jobs; *deleted false when unknown. */
enum evd_code evd_store_session_delete(PGconn *c, const char *id, bool *deleted,
                                       struct evd_err *err);

/*
 * One read of everything a comparison needs for ids[0..n), ad-hoc sessions and
 * evaluation runs alike, in one statement. Returns an array with one object per id that
 * exists (in ids order): {ord, session_id, kind:"session"|"evaluation_run"|"experiment_run", title,
 * session (metadata projection), turn_status, metrics?, progress?, wall_time_ms?}, where
 * stored JSON that does not parse is reported as {"unreadable": "<column>"} members.
 * `now` dates the wall time of what is running. New reference, or NULL with err.
 */
json_t *evd_store_compare_read(PGconn *c, const char *const *ids, size_t n, int64_t now,
                               struct evd_err *err);
/* The evaluation and experiment ids of those of ids[0..n) that are their runs' sessions
 * (what to watch for changes). */
json_t *evd_store_compare_evaluations(PGconn *c, const char *const *ids, size_t n,
                                      struct evd_err *err);

#endif
