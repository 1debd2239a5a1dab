/* Provider rate-limit arithmetic; see ratelimit.h. */
#define _GNU_SOURCE /* timegm */
#include "harness/ratelimit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness/internal.h"

/* The token bucket holds a tenth of a second of its rate; the request bucket two requests
 * (one would lose the fraction a waiter oversleeps by), so that requests are evenly
 * spaced: a provider that counts requests over a rolling window sees no burst, also after
 * a hold. */
#define BURST_SECONDS 0.1
#define REQ_BURST 2.0
/* Until the first answer says whether the provider has limits, new calls go out at most
 * this many a second (a burst of STARTUP_BURST): a provider that refuses them at once is
 * heard from before thousands have been sent, and a slow one is not kept waiting a round
 * trip before most of its calls start. */
#define STARTUP_PER_S 2000.0
#define STARTUP_BURST 8.0
/* A 429 with no limit known leaves this share of the calls that were in flight. */
#define DECREASE 0.7
#define HEADROOM 0.97
/* A 429 with a limit known cuts this process's share of it to this much... */
#define SHARE_DECREASE 0.85
/* ...and each success then gives back this share of the limit per call the limit allows in
 * a second: at the full rate, a process regains 1/SHARE_RECOVERY_S of the limit a second. */
#define SHARE_RECOVERY_S 20.0
#define SHARE_MIN 0.02
/* The least weight of a process with calls waiting in the split of a shared limit. */
#define PART_FLOOR 0.1
#define PART_MIN 0.01
/* A 429 cuts at most this often. */
#define CUT_INTERVAL_MS 1000
/* Hold jitter: a hold of d after a 429 lasts d × (1 + U[0, HOLD_JITTER)); a hold until a
 * named reset (remaining 0) only RESET_JITTER more, since the reset is exact. */
#define HOLD_JITTER 0.5
#define RESET_JITTER 0.1
/* Wait at least this long before asking again. */
#define MIN_WAIT_MS 1

static double uniform(struct evd_rl *rl)
{
    /* xorshift64*: small, fast and good enough for jitter */
    uint64_t x = rl->rng ? rl->rng : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rl->rng = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

static double capacity(double per_minute)
{
    double c = per_minute / 60.0 * BURST_SECONDS;
    return c < 1 ? 1 : c;
}

/* Calls go at HEADROOM of a limit (at exactly the limit, a provider that counts over a
 * rolling window refuses a call now and then at the edge of the window), times this
 * process's part of it (agreed with the other processes) and the share of that part it
 * has found it may take (429s from other clients). */
static double pace(const struct evd_rl *rl, double per_minute)
{
    return per_minute * HEADROOM * rl->part * rl->share;
}

static void refill(struct evd_rl *rl, int64_t now)
{
    double dt = (double)(now - rl->refilled_ms);
    if (dt <= 0)
        return;
    rl->refilled_ms = now;
    if (rl->rpm > 0) {
        rl->req_bucket += dt * pace(rl, rl->rpm) / 60000.0;
        if (rl->req_bucket > REQ_BURST)
            rl->req_bucket = REQ_BURST;
    }
    if (rl->tpm > 0) {
        rl->tok_bucket += dt * pace(rl, rl->tpm) / 60000.0;
        if (rl->tok_bucket > capacity(rl->tpm))
            rl->tok_bucket = capacity(rl->tpm);
    }
    if (!rl->answered) {
        rl->start_bucket += dt * STARTUP_PER_S / 1000.0;
        if (rl->start_bucket > STARTUP_BURST)
            rl->start_bucket = STARTUP_BURST;
    }
}

void evd_rl_init(struct evd_rl *rl, double rpm, double tpm, int max_inflight, uint64_t seed,
                 int64_t now_ms)
{
    memset(rl, 0, sizeof(*rl));
    rl->cfg_rpm = rl->rpm = rpm > 0 ? rpm : 0;
    rl->cfg_tpm = rl->tpm = tpm > 0 ? tpm : 0;
    /* The buckets start with one call's worth: the provider's window may hold calls of
     * this account from before (another process, an earlier run). */
    rl->req_bucket = rl->rpm > 0 ? 1 : 0;
    rl->tok_bucket = rl->tpm > 0 ? capacity(rl->tpm) : 0;
    rl->start_bucket = STARTUP_BURST;
    rl->share = 1;
    rl->part = 1;
    rl->token_scale = 1;
    rl->refilled_ms = now_ms;
    rl->window_max = max_inflight > 0 ? max_inflight : 1;
    rl->window = rl->window_max;
    rl->rng = seed | 1;
    rl->last_cut_ms = INT64_MIN / 2;
    rl->known_since_ms = INT64_MIN / 2; /* configured limits are known from the start */
}

double evd_rl_part(double mine, const double *others, size_t n)
{
    double total = mine > 0 ? mine : 0;
    for (size_t i = 0; i < n; i++)
        total += others[i] > 0 ? others[i] : 0;
    if (total <= 0)
        return 1; /* nobody waits: whoever calls first may go at the whole limit */
    double weights = 0;
    for (size_t i = 0; i < n; i++)
        if (others[i] > 0)
            weights += fmax(others[i] / total, PART_FLOOR);
    if (weights <= 0)
        return 1; /* alone with calls waiting */
    double w = mine > 0 ? fmax(mine / total, PART_FLOOR) : PART_FLOOR;
    return w / (w + weights);
}

void evd_rl_set_part(struct evd_rl *rl, int64_t now_ms, double part)
{
    refill(rl, now_ms); /* what accrued so far accrued at the old pace */
    if (!(part >= PART_MIN)) /* NaN too */
        part = PART_MIN;
    rl->part = part > 1 ? 1 : part;
}

int evd_rl_window(const struct evd_rl *rl)
{
    int w = (int)floor(rl->window);
    return w < 1 ? 1 : w;
}

int64_t evd_rl_acquire(struct evd_rl *rl, int64_t now, double est_tokens)
{
    refill(rl, now);
    int64_t wait = 0;
    if (now < rl->hold_until_ms)
        wait = rl->hold_until_ms - now;
    if (rl->inflight >= evd_rl_window(rl)) {
        /* A slot frees when a call ends: ask again soon (the caller is also woken then). */
        if (wait < 50)
            wait = 50;
    }
    if (!rl->answered && rl->rpm <= 0 && rl->start_bucket < 1) {
        int64_t w = (int64_t)ceil((1 - rl->start_bucket) * 1000.0 / STARTUP_PER_S);
        if (w > wait)
            wait = w;
    }
    if (rl->rpm > 0 && rl->req_bucket < 1) {
        int64_t w = (int64_t)ceil((1 - rl->req_bucket) * 60000.0 / pace(rl, rl->rpm));
        if (w > wait)
            wait = w;
    }
    /* A call bigger than the bucket can hold waits for a full bucket, not forever. */
    double need = est_tokens > capacity(rl->tpm) ? capacity(rl->tpm) : est_tokens;
    if (rl->tpm > 0 && need > 0 && rl->tok_bucket < need) {
        int64_t w = (int64_t)ceil((need - rl->tok_bucket) * 60000.0 / pace(rl, rl->tpm));
        if (w > wait)
            wait = w;
    }
    if (wait > 0)
        return wait < MIN_WAIT_MS ? MIN_WAIT_MS : wait;
    if (rl->rpm > 0)
        rl->req_bucket -= 1;
    if (!rl->answered)
        rl->start_bucket -= 1;
    if (rl->tpm > 0 && est_tokens > 0)
        rl->tok_bucket -= est_tokens;
    rl->inflight++;
    rl->calls++;
    return 0;
}

static void hold(struct evd_rl *rl, int64_t now, int64_t ms, double jitter)
{
    if (ms <= 0)
        return;
    int64_t until = now + (int64_t)ceil((double)ms * (1.0 + jitter * uniform(rl)));
    if (until > rl->hold_until_ms)
        rl->hold_until_ms = until;
}

/* Takes in what the headers said about the limits and what is left of them. */
static void learn(struct evd_rl *rl, int64_t now, const struct evd_rl_observed *o)
{
    refill(rl, now);
    if (rl->rpm <= 0 && rl->tpm <= 0 && (o->limit_requests > 0 || o->limit_tokens > 0))
        rl->known_since_ms = now;
    if (rl->cfg_rpm <= 0 && o->limit_requests > 0)
        rl->rpm = o->limit_requests;
    if (rl->cfg_tpm <= 0 && o->limit_tokens > 0 && o->limit_tokens != rl->tpm) {
        rl->tpm = o->limit_tokens;
        if (rl->tok_bucket > capacity(rl->tpm))
            rl->tok_bucket = capacity(rl->tpm);
    }
    /* What the provider has left bounds what the buckets may hand out (other processes
     * and other clients of the same account draw on it too). */
    if (o->remaining_requests >= 0 && rl->rpm > 0 && rl->req_bucket > o->remaining_requests)
        rl->req_bucket = o->remaining_requests;
    if (o->remaining_tokens >= 0 && rl->tpm > 0 && rl->tok_bucket > o->remaining_tokens)
        rl->tok_bucket = o->remaining_tokens;
    if (o->remaining_requests >= 0 && o->remaining_requests < 1 && o->reset_requests_ms > 0)
        hold(rl, now, o->reset_requests_ms, RESET_JITTER);
    if (o->remaining_tokens >= 0 && o->remaining_tokens < 1 && o->reset_tokens_ms > 0)
        hold(rl, now, o->reset_tokens_ms, RESET_JITTER);
}

/* The scale's bounds: a call uses between a hundredth and a hundred times its estimate. */
#define SCALE_MIN 0.01
#define SCALE_MAX 100.0
#define SCALE_WEIGHT 0.2

double evd_rl_estimate(const struct evd_rl *rl, double raw_tokens)
{
    return raw_tokens > 0 ? raw_tokens * rl->token_scale : raw_tokens;
}

void evd_rl_learn(struct evd_rl *rl, double raw_tokens, double used_tokens)
{
    if (!(raw_tokens > 0) || !(used_tokens >= 0))
        return;
    double sample = used_tokens / raw_tokens;
    sample = sample < SCALE_MIN ? SCALE_MIN : sample > SCALE_MAX ? SCALE_MAX : sample;
    rl->token_scale =
        rl->scale_learnt ? rl->token_scale + SCALE_WEIGHT * (sample - rl->token_scale) : sample;
    rl->scale_learnt = true;
}

void evd_rl_done(struct evd_rl *rl, int64_t now, long status, double est_tokens, double used_tokens,
                 const struct evd_rl_observed *obs)
{
    if (rl->inflight > 0)
        rl->inflight--;
    if (rl->tpm > 0 && used_tokens >= 0 && est_tokens > 0) {
        rl->tok_bucket += est_tokens - used_tokens;
        if (rl->tok_bucket > capacity(rl->tpm))
            rl->tok_bucket = capacity(rl->tpm);
    }
    if (obs != NULL)
        learn(rl, now, obs);
    if (status != 0)
        rl->answered = true;
    bool limited = rl->rpm > 0 || rl->tpm > 0;
    if (status == 429) {
        rl->throttled++;
        /* The 429s of calls sent before the limit was known say nothing of other clients. */
        bool paced = limited && now - rl->known_since_ms >= CUT_INTERVAL_MS;
        if (now - rl->last_cut_ms >= CUT_INTERVAL_MS && (paced || !limited)) {
            if (paced) {
                /* Other clients draw on the same limit: take less of it. */
                rl->share = rl->share * SHARE_DECREASE < SHARE_MIN ? SHARE_MIN
                                                                   : rl->share * SHARE_DECREASE;
            } else {
                /* No limit is known: what was in flight was too much. */
                double w = (double)(rl->inflight + 1) * DECREASE;
                if (w < rl->window)
                    rl->window = w < 1 ? 1 : w;
            }
            rl->last_cut_ms = now;
        }
        int64_t wait = obs != NULL && obs->retry_after_ms >= 0 ? obs->retry_after_ms : 1000;
        hold(rl, now, wait, HOLD_JITTER);
    } else if (status >= 200 && status < 300) {
        if (rl->share < 1) {
            /* Calls the limit allows a second: a token limit alone counts a call as about
             * 1,000 tokens. */
            double per_s = (rl->rpm > 0 ? rl->rpm : rl->tpm / 1000.0) / 60.0;
            rl->share += 1.0 / (SHARE_RECOVERY_S * (per_s > 1 ? per_s : 1));
            if (rl->share > 1)
                rl->share = 1;
        }
        rl->window += 1.0 / rl->window;
        if (rl->window > rl->window_max)
            rl->window = rl->window_max;
    }
}

/* ---- headers ----------------------------------------------------------------------------- */

int64_t evd_rl_parse_duration(const char *s)
{
    if (s == NULL)
        return -1;
    while (*s == ' ')
        s++;
    if (*s == '\0')
        return -1;
    double total = 0;
    const char *p = s;
    bool any = false;
    while (*p != '\0' && *p != ' ' && *p != '\r' && *p != '\n') {
        char *end = NULL;
        double v = strtod(p, &end);
        if (end == p || v < 0 || !isfinite(v))
            return -1;
        p = end;
        double unit;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 'h') {
            unit = 3600000;
            p++;
        } else if (*p == 'm') {
            unit = 60000;
            p++;
        } else if (*p == 's') {
            unit = 1000;
            p++;
        } else if (*p == '\0' || *p == ' ' || *p == '\r' || *p == '\n') {
            if (any)
                return -1; /* "1m30" */
            unit = 1000;   /* plain seconds */
        } else {
            return -1;
        }
        total += v * unit;
        any = true;
    }
    return total > 86400000.0 ? -1 : (int64_t)ceil(total);
}

static double number(const char *v)
{
    if (v == NULL)
        return -1;
    char *end = NULL;
    double d = strtod(v, &end);
    while (end != NULL && (*end == ' ' || *end == '\r' || *end == '\n'))
        end++;
    return end == v || end == NULL || *end != '\0' || d < 0 || !isfinite(d) ? -1 : d;
}

/* An RFC 3339 time (Anthropic's reset headers) as milliseconds from now_wall_ms, or -1. */
static int64_t until_rfc3339(const char *v, int64_t now_wall_ms)
{
    if (v == NULL)
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == NULL)
        return -1;
    double frac = 0;
    if (*end == '.') {
        char *e2 = NULL;
        frac = strtod(end, &e2);
        end = e2;
    }
    int64_t offset_s = 0;
    if (*end == 'Z' || *end == 'z') {
        end++;
    } else if (*end == '+' || *end == '-') {
        int hh = 0, mm = 0;
        if (sscanf(end + 1, "%2d:%2d", &hh, &mm) != 2)
            return -1;
        offset_s = (int64_t)(hh * 3600 + mm * 60) * (*end == '+' ? 1 : -1);
        end += 6;
    } else {
        return -1;
    }
    if (*end != '\0')
        return -1;
    int64_t at = ((int64_t)timegm(&tm) - offset_s) * 1000 + (int64_t)(frac * 1000);
    int64_t d = at - now_wall_ms;
    return d < 0 ? 0 : d;
}

void evd_rl_parse_headers(const char *(*lookup)(void *ctx, const char *name), void *ctx,
                          int64_t now_wall_ms, struct evd_rl_observed *o)
{
    o->limit_requests = o->limit_tokens = -1;
    o->remaining_requests = o->remaining_tokens = -1;
    o->reset_requests_ms = o->reset_tokens_ms = -1;
    o->retry_after_ms = -1;
    const char *v;
    /* OpenAI (and Azure OpenAI, most compatible servers) */
    if ((v = lookup(ctx, "x-ratelimit-limit-requests")) != NULL)
        o->limit_requests = number(v);
    if ((v = lookup(ctx, "x-ratelimit-limit-tokens")) != NULL)
        o->limit_tokens = number(v);
    if ((v = lookup(ctx, "x-ratelimit-remaining-requests")) != NULL)
        o->remaining_requests = number(v);
    if ((v = lookup(ctx, "x-ratelimit-remaining-tokens")) != NULL)
        o->remaining_tokens = number(v);
    if ((v = lookup(ctx, "x-ratelimit-reset-requests")) != NULL)
        o->reset_requests_ms = evd_rl_parse_duration(v);
    if ((v = lookup(ctx, "x-ratelimit-reset-tokens")) != NULL)
        o->reset_tokens_ms = evd_rl_parse_duration(v);
    /* Anthropic: tokens are also split by input and output; the combined ones win, the
     * input ones stand in for them (input is what a prompt evaluation spends most). */
    if ((v = lookup(ctx, "anthropic-ratelimit-requests-limit")) != NULL)
        o->limit_requests = number(v);
    if ((v = lookup(ctx, "anthropic-ratelimit-requests-remaining")) != NULL)
        o->remaining_requests = number(v);
    if ((v = lookup(ctx, "anthropic-ratelimit-requests-reset")) != NULL)
        o->reset_requests_ms = until_rfc3339(v, now_wall_ms);
    const char *const tok[][3] = {
        {"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining",
         "anthropic-ratelimit-tokens-reset"},
        {"anthropic-ratelimit-input-tokens-limit", "anthropic-ratelimit-input-tokens-remaining",
         "anthropic-ratelimit-input-tokens-reset"},
    };
    for (size_t i = 0; i < 2; i++) {
        if (o->limit_tokens >= 0)
            break;
        if ((v = lookup(ctx, tok[i][0])) != NULL)
            o->limit_tokens = number(v);
        if ((v = lookup(ctx, tok[i][1])) != NULL)
            o->remaining_tokens = number(v);
        if ((v = lookup(ctx, tok[i][2])) != NULL)
            o->reset_tokens_ms = until_rfc3339(v, now_wall_ms);
    }
    if ((v = lookup(ctx, "retry-after-ms")) != NULL && number(v) >= 0)
        o->retry_after_ms = (int64_t)number(v);
    else if ((v = lookup(ctx, "retry-after")) != NULL)
        o->retry_after_ms = evd_hx_parse_retry_after(v, now_wall_ms);
}
