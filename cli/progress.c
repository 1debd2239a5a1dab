/*
 * The live view of a run that evald-cli follows (cli_progress_follow in cli.h): one line
 * redrawn in place on a terminal, a plain line every 5 s and at the end elsewhere. Reads
 * the progress of the events of GET /v1/<kind>s/{id}/events. Single-threaded; the state
 * of a view lives on the stack of its call.
 */
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

struct follow {
    FILE *out;
    bool tty;
    double started, last_plain, last_draw;
    json_int_t total, terminal, passed, skipped;
    bool have;
    char status[32];
};

static void draw(struct follow *f, bool final)
{
    if (!f->have)
        return;
    double el = cli_now_s() - f->started;
    double rate = el > 0 ? (double)f->terminal / el : 0;
    char eta[32] = "?";
    if (f->terminal >= f->total)
        snprintf(eta, sizeof(eta), "0 s");
    else if (rate > 0)
        snprintf(eta, sizeof(eta), "%.0f s", (double)(f->total - f->terminal) / rate);
    /* Skipped runs (an experiment that stopped early) are terminal but never ran: the rate
     * is of the runs that did. */
    json_int_t ran = f->terminal - f->skipped;
    double pct = ran > 0 ? 100.0 * (double)f->passed / (double)ran : 0;
    char skipped[48] = "";
    if (f->skipped > 0)
        snprintf(skipped, sizeof(skipped), " (%lld skipped)", (long long)f->skipped);
    if (f->tty) {
        fprintf(f->out,
                "\r\033[K\033[1mruns %lld/%lld\033[0m%s  passed %lld (%.1f%%)  %.1f runs/s  ETA %s",
                (long long)f->terminal, (long long)f->total, skipped, (long long)f->passed, pct,
                rate, eta);
        if (final)
            fputc('\n', f->out);
    } else {
        fprintf(f->out, "runs %lld/%lld%s, passed %lld (%.1f%%), %.1f runs/s, ETA %s\n",
                (long long)f->terminal, (long long)f->total, skipped, (long long)f->passed, pct,
                rate, eta);
    }
    fflush(f->out);
}

static void take_progress(struct follow *f, const json_t *data)
{
    const json_t *p = json_object_get(data, "progress");
    if (!json_is_object(p))
        p = data;
    if (json_is_integer(json_object_get(p, "total_runs"))) {
        f->total = json_integer_value(json_object_get(p, "total_runs"));
        f->terminal = json_integer_value(json_object_get(p, "terminal_runs"));
        f->passed = json_integer_value(json_object_get(p, "passed_runs"));
        f->skipped = json_integer_value(json_object_get(p, "skipped_runs"));
        f->have = true;
    }
}

static bool terminal_status(const char *s)
{
    return strcmp(s, "completed") == 0 || strcmp(s, "cancelled") == 0 || strcmp(s, "failed") == 0;
}

static int on_event(void *ctx, const char *name, const json_t *data)
{
    struct follow *f = ctx;
    take_progress(f, data);
    const char *status = json_string_value(json_object_get(data, "status"));
    if (strcmp(name, "status") == 0 && status != NULL)
        snprintf(f->status, sizeof(f->status), "%s", status);
    double t = cli_now_s();
    if (f->tty && t - f->last_draw >= 0.1) {
        draw(f, false);
        f->last_draw = t;
    }
    return f->status[0] != '\0' && terminal_status(f->status);
}

static int on_tick(void *ctx)
{
    struct follow *f = ctx;
    double t = cli_now_s();
    if (!f->tty && t - f->last_plain >= 5.0) {
        draw(f, false);
        f->last_plain = t;
    }
    return 0;
}

enum cli_exit cli_progress_follow(const struct cli_conn *c, FILE *out, const char *kind,
                                  const char *id, char *status, size_t n)
{
    struct follow f = {.out = out, .tty = isatty(fileno(out)) == 1};
    f.started = f.last_plain = cli_now_s();
    char path[256];
    snprintf(path, sizeof(path), "/v1/%ss/%s/events", kind, id);
    enum cli_exit rc = CLI_OK;
    /* A stream can end without the terminal status (a restart of evald): follow again. */
    for (int tries = 0; tries < 100 && !cli_interrupted; tries++) {
        rc = cli_follow(c, path, on_event, on_tick, &f);
        if (rc != CLI_OK || (f.status[0] != '\0' && terminal_status(f.status)))
            break;
        sleep(1);
    }
    if (rc == CLI_OK && !cli_interrupted)
        draw(&f, true);
    else if (f.tty && f.have)
        fputc('\n', out);
    snprintf(status, n, "%s", f.status);
    return rc;
}
