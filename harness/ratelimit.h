/*
 * Provider rate limits, per provider and model: the arithmetic of when a call may be sent.
 *
 * Four things hold a call back, and a call waits (it does not fail) until all allow it:
 *   - two token buckets, requests and tokens per minute, that refill continuously at 97 %
 *     of the limit; the request bucket holds two requests, so requests are evenly spaced,
 *     and the token bucket a tenth of a second of its rate (providers enforce their
 *     per-minute limits over shorter periods, so a minute's worth at once is refused).
 *     The limits come from the providers file (`rpm`, `tpm`), else from the provider's headers (OpenAI
 *     `x-ratelimit-limit-*`, Anthropic `anthropic-ratelimit-*-limit`), else there is none.
 *     A call reserves its estimated tokens; its answer gives the difference back;
 *   - a hold: no call before a time the provider named (`retry-after-ms`, `Retry-After`,
 *     or a remaining count of 0 until its reset), stretched by a random 0-50 % so that the
 *     calls that waited do not all return in the same millisecond;
 *   - until the first answer, new calls go out at most 2,000 a second: a provider that
 *     refuses them at once is heard from (and its limits learnt) before thousands are
 *     sent, and one that is merely slow does not hold the calls back a round trip;
 *   - adaptation to 429s (AIMD, at most one cut a second, so one burst of 429s cuts once).
 *     With a limit known, a 429 means other clients draw on it too: this process's share
 *     of the limit is cut to 85 %, and each success gives back a little (at the full rate,
 *     1/20 of the limit a second). With no limit known, the concurrency window (at first
 *     the configured maximum) is cut to 70 % of the calls that were in flight, and each
 *     success adds 1/window (about one more call per round trip).
 * Processes on one database split a limit they share by agreement (evd_rl_part): each
 * reports, a few times a second, how many calls wait at each of its limiters, and paces at
 * its part of the limit, in proportion to what it has waiting (with a floor, so that a
 * process with little to send is not starved), so that the parts add up to the whole and
 * the processes' backlogs drain together. A process whose queue empties gives its part up
 * at its next report. 429s still cut the share (above): they then mean clients beyond
 * these processes (docs/harness.md has the measured behaviour).
 *
 * The core is pure: every function takes the time as an argument, and randomness comes
 * from the state's own generator (seeded by the caller), so tests replay it exactly. A
 * struct evd_rl belongs to one thread at a time; the harness wraps each in a mutex.
 */
#ifndef EVD_HARNESS_RATELIMIT_H
#define EVD_HARNESS_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evd_rl {
    double cfg_rpm, cfg_tpm; /* configured limits; 0 = none configured */
    double rpm, tpm;         /* limits in force; 0 = no limit known */
    double req_bucket, tok_bucket;
    int64_t refilled_ms;
    int64_t hold_until_ms; /* no call before this */
    double start_bucket;  /* the start-up pace, until the first answer */
    bool answered;        /* an answer (of any status) has come */
    double share;         /* of its part of a known limit this process takes, (0, 1]:
                             cut by 429s */
    double part;          /* of a known limit, agreed with the other processes of the
                             database (evd_rl_part), (0, 1]: 1 alone */
    int64_t known_since_ms; /* when a limit was first learnt */
    double window, window_max;
    int inflight;
    double token_scale;   /* tokens a call uses per token estimated from its request (1
                             until an answer's usage says otherwise): evd_rl_estimate */
    bool scale_learnt;
    int64_t last_cut_ms;
    uint64_t rng;
    /* counters, for /metrics and /v1/models */
    uint64_t calls, throttled;
    int waiting;
};

/* What one answer's headers said; a negative value means "not said". */
struct evd_rl_observed {
    double limit_requests, limit_tokens;
    double remaining_requests, remaining_tokens;
    int64_t reset_requests_ms, reset_tokens_ms; /* from now */
    int64_t retry_after_ms;
};

/* A limiter with the configured rpm and tpm (0 = none) and at most max_inflight calls. */
void evd_rl_init(struct evd_rl *rl, double rpm, double tpm, int max_inflight, uint64_t seed,
                 int64_t now_ms);

/*
 * May a call estimated at est_tokens be sent at now_ms? 0: yes, and it is counted in
 * flight with its reservation made; else the milliseconds to wait before asking again.
 */
int64_t evd_rl_acquire(struct evd_rl *rl, int64_t now_ms, double est_tokens);

/*
 * A call that was acquired has ended: its HTTP status (0 when none came), its estimate and
 * the tokens it used (negative: unknown, the estimate stands), and what its headers said
 * (NULL: nothing).
 */
void evd_rl_done(struct evd_rl *rl, int64_t now_ms, long status, double est_tokens,
                 double used_tokens, const struct evd_rl_observed *obs);

/*
 * The tokens to reserve for a call whose request text suggests raw_tokens: raw_tokens
 * scaled by what calls have used per estimated token (evd_rl_learn). A request's size says
 * little of its output or of how the provider counts, so without the scale a tokens-per-
 * minute limit is overrun by as many times as the estimate falls short.
 */
double evd_rl_estimate(const struct evd_rl *rl, double raw_tokens);
/* Learns from a call's usage (used_tokens, negative: unknown) against its raw estimate:
 * the first answer sets the scale, later ones move it a fifth of the way (EWMA). */
void evd_rl_learn(struct evd_rl *rl, double raw_tokens, double used_tokens);

/* Calls allowed in flight now (the window, at least 1). */
int evd_rl_window(const struct evd_rl *rl);

/*
 * This process's part of a limit that the processes of a database share: `mine` calls
 * wait here, others[0..n) at each other process that reported some. A process with calls
 * waiting is weighted by its share of all that waits, at least PART_FLOOR (0.1), and the
 * weights of all of them are scaled to add up to 1, so every process arrives at a part of
 * the same split; one alone takes the whole limit; one with nothing waiting takes the
 * part of a process at the floor (a call that comes before its next report is not held
 * long, and overshoots the limit little).
 */
double evd_rl_part(double mine, const double *others, size_t n);
/* Paces at `part` of the limit from now on (clamped to [0.01, 1]). */
void evd_rl_set_part(struct evd_rl *rl, int64_t now_ms, double part);

/*
 * Reads the rate-limit headers of an answer through lookup(ctx, name) (a header's value or
 * NULL; names are given in lower case) into *obs. now_wall_ms is the wall clock, for the
 * absolute reset times of Anthropic. Retry-after-ms wins over Retry-After.
 */
void evd_rl_parse_headers(const char *(*lookup)(void *ctx, const char *name), void *ctx,
                          int64_t now_wall_ms, struct evd_rl_observed *obs);

/*
 * An OpenAI reset duration ("1s", "6m0s", "59.2ms", "1h2m3.5s", or plain seconds) in
 * milliseconds, or -1 when it is not one.
 */
int64_t evd_rl_parse_duration(const char *s);

#endif
