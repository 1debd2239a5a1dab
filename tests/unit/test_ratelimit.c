/*
 * Unit tests for harness/ratelimit.h: the duration and header grammars of both providers,
 * the buckets' pacing, the AIMD window, the jittered hold, and simulations on a virtual
 * clock of one and of two processes against a provider that allows 6,000 requests a
 * minute (100 in any second, 429 with Retry-After beyond) at 500 ms a call: every call
 * gets through, the makespan stays near the limit-bound ideal and few calls draw a 429;
 * two processes that split the limit by agreement (evd_rl_part) as well as one.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness/ratelimit.h"
#include "tests/support/testutil.h"

static const struct {
    const char *text;
    int64_t ms;
} DURATIONS[] = {
    {"1s", 1000}, {"6m0s", 360000}, {"59.2ms", 60}, {"1h2m3.5s", 3723500},
    {"20ms", 20}, {"0.5", 500},     {"3", 3000},    {"2m", 120000},
    {"", -1},     {"abc", -1},      {"1m30", -1},   {"-1s", -1},
    {"5x", -1},
};

START_TEST(durations_parse)
{
    ck_assert_msg(evd_rl_parse_duration(DURATIONS[_i].text) == DURATIONS[_i].ms, "%s -> %lld",
                  DURATIONS[_i].text, (long long)evd_rl_parse_duration(DURATIONS[_i].text));
}
END_TEST

/* A header set: NULL-terminated name/value pairs. */
static const char *lookup(void *ctx, const char *name)
{
    const char *const *kv = ctx;
    for (; kv[0] != NULL; kv += 2)
        if (strcmp(kv[0], name) == 0)
            return kv[1];
    return NULL;
}

START_TEST(openai_headers_are_learned)
{
    const char *h[] = {"x-ratelimit-limit-requests",
                       "6000",
                       "x-ratelimit-limit-tokens",
                       "150000",
                       "x-ratelimit-remaining-requests",
                       "5999",
                       "x-ratelimit-remaining-tokens",
                       "149984",
                       "x-ratelimit-reset-requests",
                       "10ms",
                       "x-ratelimit-reset-tokens",
                       "6m0s",
                       "retry-after",
                       "2",
                       "retry-after-ms",
                       "1500",
                       NULL};
    struct evd_rl_observed o;
    evd_rl_parse_headers(lookup, h, 0, &o);
    ck_assert(o.limit_requests == 6000 && o.limit_tokens == 150000);
    ck_assert(o.remaining_requests == 5999 && o.remaining_tokens == 149984);
    ck_assert_int_eq(o.reset_requests_ms, 10);
    ck_assert_int_eq(o.reset_tokens_ms, 360000);
    ck_assert_int_eq(o.retry_after_ms, 1500); /* retry-after-ms wins */
    const char *h2[] = {"retry-after", "Wed, 21 Oct 2015 07:28:03 GMT", NULL};
    evd_rl_parse_headers(lookup, h2, 1445412480000, &o); /* 07:28:00 */
    ck_assert_int_eq(o.retry_after_ms, 3000);
    ck_assert(o.limit_requests < 0 && o.remaining_tokens < 0 && o.reset_requests_ms < 0);
}
END_TEST

START_TEST(anthropic_headers_are_learned)
{
    /* now = 2026-12-01T10:00:00Z */
    int64_t now = 1796119200000;
    const char *h[] = {"anthropic-ratelimit-requests-limit",
                       "4000",
                       "anthropic-ratelimit-requests-remaining",
                       "0",
                       "anthropic-ratelimit-requests-reset",
                       "2026-12-01T10:00:02.5Z",
                       "anthropic-ratelimit-input-tokens-limit",
                       "400000",
                       "anthropic-ratelimit-input-tokens-remaining",
                       "399000",
                       "anthropic-ratelimit-input-tokens-reset",
                       "2026-12-01T11:00:01+01:00",
                       "retry-after",
                       "7",
                       NULL};
    struct evd_rl_observed o;
    evd_rl_parse_headers(lookup, h, now, &o);
    ck_assert(o.limit_requests == 4000 && o.remaining_requests == 0);
    ck_assert_int_eq(o.reset_requests_ms, 2500);
    ck_assert(o.limit_tokens == 400000 && o.remaining_tokens == 399000);
    ck_assert_int_eq(o.reset_tokens_ms, 1000);
    ck_assert_int_eq(o.retry_after_ms, 7000);

    /* Remaining 0 until a reset holds every call until then (plus jitter). */
    struct evd_rl rl;
    evd_rl_init(&rl, 0, 0, 10, 7, 0);
    ck_assert_int_eq(evd_rl_acquire(&rl, 0, 0), 0);
    evd_rl_done(&rl, 0, 200, 0, -1, &o);
    ck_assert(rl.rpm == 4000 && rl.tpm == 400000); /* learned, nothing was configured */
    int64_t w = evd_rl_acquire(&rl, 0, 0);
    ck_assert_msg(w >= 2500 && w <= 2750, "wait %lld", (long long)w);
}
END_TEST

/* Calls that end at once, as fast as the limiter lets them go, for `ms` virtual
 * milliseconds from `*now` (which moves on): how many went. */
static int paced_calls(struct evd_rl *rl, int64_t *now, int64_t ms)
{
    int sent = 0;
    for (int64_t end = *now + ms; *now < end;) {
        int64_t w = evd_rl_acquire(rl, *now, 0);
        if (w == 0) {
            sent++;
            evd_rl_done(rl, *now, 200, 0, -1, NULL);
        } else {
            *now += w;
        }
    }
    return sent;
}

START_TEST(buckets_pace_at_the_configured_rate)
{
    struct evd_rl rl;
    evd_rl_init(&rl, 6000, 0, 100000, 1, 0);
    /* Calls that end at once, for 10 virtual seconds: one second of burst, then 100/s. */
    int64_t now = 0;
    int sent = paced_calls(&rl, &now, 10000);
    /* Evenly spaced at 97 % of 100/s: 970 in 10 s, plus the one the bucket starts with. */
    ck_assert_msg(sent >= 970 && sent <= 972, "sent %d", sent);

    /* Tokens: under 600,000 tpm the bucket holds 0.1 s (1,000 tokens) and refills at 97 %,
     * 9.7 a millisecond; an 800-token call after another waits for 600 tokens, and an
     * over-estimate is given back when the call ends. */
    evd_rl_init(&rl, 0, 600000, 10, 1, 0);
    ck_assert_int_eq(evd_rl_acquire(&rl, 0, 800), 0); /* bucket 1000 -> 200 */
    int64_t w = evd_rl_acquire(&rl, 0, 800);
    ck_assert_int_eq(w, 62);                  /* ceil(600 / 9.7) */
    evd_rl_done(&rl, 0, 200, 800, 100, NULL); /* 700 back: 900 */
    ck_assert_int_eq(evd_rl_acquire(&rl, 0, 800), 0);
}
END_TEST

START_TEST(calls_start_paced_until_the_first_answer)
{
    struct evd_rl rl;
    evd_rl_init(&rl, 0, 0, 4096, 3, 0);
    ck_assert_int_eq(evd_rl_window(&rl), 4096); /* no limit known: the configured maximum */
    int sent = 0;
    for (int64_t t = 0; t < 100; t++) /* 100 ms before any answer */
        while (evd_rl_acquire(&rl, t, 0) == 0)
            sent++;
    /* 2,000 a second, after a burst of 8: 8 + 2 × 99 */
    ck_assert_int_eq(sent, 8 + 198);
    evd_rl_done(&rl, 100, 200, 0, -1, NULL); /* an answer with no limit in it */
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(evd_rl_acquire(&rl, 100, 0), 0); /* no pace any more */
    /* A configured limit paces from the first call: no start-up pace on top of it. */
    evd_rl_init(&rl, 6000, 0, 4096, 3, 0);
    ck_assert_int_eq(evd_rl_acquire(&rl, 0, 0), 0);
    ck_assert_int_gt(evd_rl_acquire(&rl, 0, 0), 0);
}
END_TEST

START_TEST(with_no_limit_known_a_429_cuts_the_window_to_what_was_in_flight)
{
    struct evd_rl rl;
    evd_rl_init(&rl, 0, 0, 1024, 3, 0);
    evd_rl_done(&rl, 0, 200, 0, -1, NULL); /* answered: the start-up pace is over */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(evd_rl_acquire(&rl, 0, 0), 0);
    struct evd_rl_observed o = {-1, -1, -1, -1, -1, -1, 100};
    evd_rl_done(&rl, 300, 429, 0, -1, &o);
    ck_assert_int_eq(evd_rl_window(&rl), 70); /* (99 in flight + the refused one) × 0.7 */
    evd_rl_done(&rl, 310, 429, 0, -1, &o);    /* the same burst: no second cut */
    ck_assert_int_eq(evd_rl_window(&rl), 70);
    evd_rl_done(&rl, 1300, 429, 0, -1, &o);
    ck_assert_int_eq(evd_rl_window(&rl), 68); /* (97 + 1) × 0.7 = 68.6 */
    ck_assert_int_eq(rl.throttled, 3);
    ck_assert(rl.share == 1); /* no limit to take a share of */
    /* Growth is additive: about one call per window of successes. */
    double w0 = rl.window;
    for (int i = 0; i < 68; i++)
        evd_rl_done(&rl, 2000, 200, 0, -1, NULL);
    ck_assert_msg(rl.window > w0 + 0.9 && rl.window < w0 + 1.1, "%f -> %f", w0, rl.window);
}
END_TEST

START_TEST(with_a_limit_known_a_429_cuts_the_share_and_successes_give_it_back)
{
    struct evd_rl rl;
    evd_rl_init(&rl, 6000, 0, 1024, 3, 0); /* 100 a second */
    struct evd_rl_observed o = {-1, -1, -1, -1, -1, -1, 10};
    ck_assert_int_eq(evd_rl_acquire(&rl, 0, 0), 0);
    evd_rl_done(&rl, 5, 429, 0, -1, &o);
    ck_assert_double_eq_tol(rl.share, 0.85, 1e-12);
    ck_assert_int_eq(evd_rl_window(&rl), 1024); /* the window is left alone */
    evd_rl_done(&rl, 500, 429, 0, -1, &o); /* within the second: no second cut */
    ck_assert_double_eq_tol(rl.share, 0.85, 1e-12);
    evd_rl_done(&rl, 1005, 429, 0, -1, &o);
    ck_assert_double_eq_tol(rl.share, 0.7225, 1e-12);
    /* Paced at 97 % of 72.25 % of 100 a second: 70.08 calls over a second. */
    int sent = 0;
    for (int64_t t = 3000; t < 4000; t++)
        while (evd_rl_acquire(&rl, t, 0) == 0)
            sent++;
    ck_assert_msg(sent >= 69 && sent <= 72, "%d calls in a second", sent);
    /* 100 successes (a second at the full rate) give back 1/20 of the limit. */
    for (int i = 0; i < 100; i++)
        evd_rl_done(&rl, 4000, 200, 0, -1, NULL);
    ck_assert_double_eq_tol(rl.share, 0.7725, 1e-9);
    for (int i = 0; i < 10000; i++)
        evd_rl_done(&rl, 4000, 200, 0, -1, NULL);
    ck_assert(rl.share == 1); /* never above the whole limit */
}
END_TEST

START_TEST(the_token_estimate_learns_from_usage)
{
    struct evd_rl rl;
    evd_rl_init(&rl, 0, 600000, 10, 1, 0);
    ck_assert_double_eq_tol(evd_rl_estimate(&rl, 100), 100, 1e-12); /* nothing learnt yet */
    evd_rl_learn(&rl, 100, -1);                                      /* no usage: nothing */
    evd_rl_learn(&rl, 0, 500);                                       /* no estimate: nothing */
    ck_assert_double_eq_tol(evd_rl_estimate(&rl, 100), 100, 1e-12);
    evd_rl_learn(&rl, 100, 1000); /* the first answer sets the scale: 10 */
    ck_assert_double_eq_tol(evd_rl_estimate(&rl, 100), 1000, 1e-9);
    ck_assert_double_eq_tol(evd_rl_estimate(&rl, 30), 300, 1e-9);
    evd_rl_learn(&rl, 100, 500); /* then a fifth of the way: 10 + 0.2 (5 - 10) = 9 */
    ck_assert_double_eq_tol(evd_rl_estimate(&rl, 100), 900, 1e-9);
    evd_rl_learn(&rl, 1, 1e9); /* a sample past the bound counts as 100: 9 + 0.2 * 91 */
    ck_assert_double_eq_tol(rl.token_scale, 27.2, 1e-9);
    ck_assert_double_eq_tol(evd_rl_estimate(&rl, 0), 0, 1e-12);
}
END_TEST

/*
 * Calls whose requests suggest 100 tokens but which use 1,000, under 600,000 tokens a
 * minute (10,000 a second), `slots` in flight, each answered `latency` ms after it is
 * sent, for 60 s. *total gets the tokens sent, as the provider counts them; the return is
 * the most sent within any one second after the first two.
 */
static double token_run(bool learn, int slots, int64_t latency, double *total)
{
    struct evd_rl rl;
    evd_rl_init(&rl, 0, 600000, slots, 5, 0);
    int64_t ends[256];
    double reserved[256];
    static double per_ms[60000];
    memset(per_ms, 0, sizeof(per_ms));
    for (int i = 0; i < slots; i++)
        ends[i] = -1;
    *total = 0;
    for (int64_t t = 0; t < 60000; t++) {
        for (int i = 0; i < slots; i++) {
            if (ends[i] == t) {
                evd_rl_done(&rl, t, 200, reserved[i], 1000, NULL);
                if (learn)
                    evd_rl_learn(&rl, 100, 1000);
                ends[i] = -1;
            }
            if (ends[i] < 0) {
                double est = evd_rl_estimate(&rl, 100);
                if (evd_rl_acquire(&rl, t, est) == 0) {
                    reserved[i] = est;
                    ends[i] = t + latency;
                    *total += 1000;
                    per_ms[t] += 1000;
                }
            }
        }
    }
    double peak = 0, window = 0;
    for (int64_t t = 0; t < 60000; t++) {
        window += per_ms[t] - (t >= 1000 ? per_ms[t - 1000] : 0);
        if (t >= 3000 && window > peak)
            peak = window;
    }
    return peak;
}

START_TEST(a_token_limit_holds_when_calls_use_more_than_their_estimate)
{
    /* Over a minute the answers' usage keeps the limit, learnt or not: each call's
     * shortfall is taken from the bucket when it ends. */
    double total, blind_total;
    double peak = token_run(true, 64, 500, &total);
    double blind_peak = token_run(false, 64, 500, &blind_total);
    fprintf(stderr,
            "usage 10 x the estimate, 600,000 tpm: %.0f tokens in a minute, busiest second "
            "%.0f (raw estimates: %.0f, %.0f)\n",
            total, peak, blind_total, blind_peak);
    ck_assert_msg(total <= 1.05 * 600000 && total >= 0.85 * 600000,
                  "%.0f tokens in a minute under a limit of 600,000", total);
    ck_assert_msg(blind_total <= 1.05 * 600000, "%.0f tokens without learning", blind_total);
    /* Within a second, the calls in flight carry their shortfall until they end: scaled
     * estimates keep each second near its 10,000 tokens, raw ones let bursts through. */
    ck_assert_msg(peak <= 1.2 * 10000, "%.0f tokens in the busiest second", peak);
    ck_assert_msg(blind_peak > 1.5 * 10000, "%.0f tokens in the busiest second, not learnt",
                  blind_peak);
}
END_TEST

START_TEST(a_shared_limit_is_split_by_what_waits)
{
    /* Hand-worked. Two processes with as much waiting split it in halves. */
    double one[] = {100};
    ck_assert_double_eq_tol(evd_rl_part(100, one, 1), 0.5, 1e-12);
    /* 500 against 10: weights 500/510 = 0.98039 and max(10/510, 0.1) = 0.1, scaled to a
     * sum of 1: 0.98039 / 1.08039 = 0.90744 and 0.1 / 1.08039 = 0.09256. */
    double ten[] = {10}, five_hundred[] = {500};
    double big = evd_rl_part(500, ten, 1), small = evd_rl_part(10, five_hundred, 1);
    ck_assert_double_eq_tol(big, 0.90744, 1e-5);
    ck_assert_double_eq_tol(small, 0.09256, 1e-5);
    ck_assert_double_eq_tol(big + small, 1, 1e-12);
    /* Three processes: 60, 30, 10 of 100 waiting, each above the floor: 0.6, 0.3, 0.1. */
    double a[] = {30, 10}, b[] = {60, 10}, c[] = {60, 30};
    ck_assert_double_eq_tol(evd_rl_part(60, a, 2), 0.6, 1e-12);
    ck_assert_double_eq_tol(evd_rl_part(30, b, 2), 0.3, 1e-12);
    ck_assert_double_eq_tol(evd_rl_part(10, c, 2), 0.1, 1e-12);
    /* Alone, or with others that have nothing waiting: the whole limit. */
    ck_assert_double_eq_tol(evd_rl_part(7, NULL, 0), 1, 1e-12);
    double idle[] = {0, 0};
    ck_assert_double_eq_tol(evd_rl_part(7, idle, 2), 1, 1e-12);
    ck_assert_double_eq_tol(evd_rl_part(0, idle, 2), 1, 1e-12);
    /* Nothing waiting beside one that has: the part of a process at the floor, 0.1 / 1.1. */
    ck_assert_double_eq_tol(evd_rl_part(0, one, 1), 0.1 / 1.1, 1e-12);

    /* The part scales the pace: half of 6,000 a minute is 48.5 calls a second at 97 %. */
    struct evd_rl rl;
    evd_rl_init(&rl, 6000, 0, 100000, 1, 0);
    evd_rl_set_part(&rl, 0, 0.5);
    int64_t now = 0;
    int sent = paced_calls(&rl, &now, 10000);
    ck_assert_msg(sent >= 485 && sent <= 487, "sent %d", sent);
    /* A part out of range is clamped: never 0 (nothing would go), never above 1. */
    evd_rl_set_part(&rl, now, 0);
    ck_assert_double_eq_tol(rl.part, 0.01, 1e-12);
    evd_rl_set_part(&rl, now, 3);
    ck_assert_double_eq_tol(rl.part, 1, 1e-12);
    evd_rl_set_part(&rl, now, NAN);
    ck_assert_double_eq_tol(rl.part, 0.01, 1e-12);
}
END_TEST


START_TEST(holds_are_jittered)
{
    int64_t lo = INT64_MAX, hi = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct evd_rl rl;
        evd_rl_init(&rl, 0, 0, 4, seed, 0);
        ck_assert_int_eq(evd_rl_acquire(&rl, 0, 0), 0);
        struct evd_rl_observed o = {-1, -1, -1, -1, -1, -1, 1000};
        evd_rl_done(&rl, 0, 429, 0, -1, &o);
        int64_t w = evd_rl_acquire(&rl, 0, 0);
        ck_assert(w >= 1000 && w < 1500);
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
    }
    ck_assert_msg(hi - lo > 400, "holds between %lld and %lld ms", (long long)lo, (long long)hi);
}
END_TEST

/*
 * A provider on a virtual clock: at most LIMIT requests in any window of WINDOW_MS (a
 * request over it is answered 429 at once, with a retry-after of the time until the oldest
 * request leaves the window, as evald-stub's limiter says it, or with a coarse Retry-After
 * of 1 s), answers after LATENCY_MS with OpenAI's headers. nproc processes, each with its
 * own limiter (nothing configured, max_inflight calls) and runs/nproc runs that each retry
 * until a 200.
 */
#define LIMIT 100
#define WINDOW_MS 1000
#define LATENCY_MS 500
#define MAX_CALLS 20000

struct sim {
    int64_t sent_at[MAX_CALLS]; /* accepted requests, for the rolling window */
    int naccepted;
    int calls, throttled;
    int64_t makespan;
};

static int accepted_in_window(const struct sim *s, int64_t now)
{
    int n = 0;
    for (int i = s->naccepted - 1; i >= 0 && s->sent_at[i] > now - WINDOW_MS; i--)
        n++;
    return n;
}

/* How the processes of a simulation split their limit: each alone (AIMD only), or by
 * agreement, each reporting what it asks every EXCHANGE_MS (the keeper's period), at
 * staggered moments, and setting its part from the others' last reports. */
#define EXCHANGE_MS 250

static void simulate_split(int nproc, int runs, const double *portion, int max_inflight,
                           bool coarse_retry, bool agreed, struct sim *s)
{
    memset(s, 0, sizeof(*s));
    struct evd_rl rl[4];
    struct call {
        int proc;
        int64_t ends;
        long status;
        double remaining;
        int64_t reset; /* until the oldest request of the window leaves it */
    } flight[4096];
    int nflight = 0, left[4], done = 0, given = 0;
    double reported[4] = {0};
    uint64_t calls_reported[4] = {0};
    for (int p = 0; p < nproc; p++) {
        evd_rl_init(&rl[p], 0, 0, max_inflight, 100 + (uint64_t)p, 0);
        left[p] = p == nproc - 1 ? runs - given : (int)(runs * portion[p]);
        given += left[p];
    }
    for (int64_t now = 0; done < runs && now < 600000; now++) {
        /* reports (as evd_hx_limiter_demands counts: waiting, and sent since the last) */
        for (int p = 0; agreed && p < nproc; p++) {
            if ((now + p * EXCHANGE_MS / nproc) % EXCHANGE_MS != 0)
                continue;
            reported[p] = left[p] + (double)(rl[p].calls - calls_reported[p]);
            calls_reported[p] = rl[p].calls;
            double others[4];
            int k = 0;
            for (int q = 0; q < nproc; q++)
                if (q != p)
                    others[k++] = reported[q];
            evd_rl_set_part(&rl[p], now, evd_rl_part(reported[p], others, (size_t)k));
        }
        /* answers */
        for (int i = 0; i < nflight;) {
            if (flight[i].ends > now) {
                i++;
                continue;
            }
            struct evd_rl_observed o = {6000, -1, flight[i].remaining, -1, flight[i].reset, -1, -1};
            if (flight[i].status == 429)
                o.retry_after_ms = coarse_retry ? 1000 : flight[i].reset;
            evd_rl_done(&rl[flight[i].proc], now, flight[i].status, 0, -1, &o);
            if (flight[i].status == 200)
                done++;
            else
                left[flight[i].proc]++; /* the run asks again */
            flight[i] = flight[--nflight];
        }
        /* sends */
        for (int p = 0; p < nproc; p++) {
            while (left[p] > 0 && nflight < 4096 && evd_rl_acquire(&rl[p], now, 0) == 0) {
                left[p]--;
                s->calls++;
                int in_window = accepted_in_window(s, now);
                struct call c = {p, now + LATENCY_MS, 200, 0, -1};
                if (in_window >= LIMIT) {
                    c.status = 429;
                    c.ends = now + 5;
                    c.reset = s->sent_at[s->naccepted - in_window] + WINDOW_MS - now;
                    s->throttled++;
                } else {
                    ck_assert_int_lt(s->naccepted, MAX_CALLS);
                    s->sent_at[s->naccepted++] = now;
                    /* Remaining in the provider's per-minute terms, at the window's rate. */
                    c.remaining = (double)(LIMIT - in_window - 1) * (60000.0 / WINDOW_MS);
                    int oldest = s->naccepted - 1 - in_window;
                    c.reset = s->sent_at[oldest] + WINDOW_MS - now;
                }
                flight[nflight++] = c;
            }
        }
        s->makespan = now;
    }
    ck_assert_int_eq(done, runs);
}

static void simulate(int nproc, int runs, int max_inflight, bool coarse_retry, struct sim *s)
{
    const double even[] = {0.5, 0.5};
    simulate_split(nproc, runs, even, max_inflight, coarse_retry, false, s);
}

static void report(const char *what, const struct sim *s)
{
    fprintf(stderr, "%s: %d calls, %d answered 429 (%.1f%%), makespan %.1f s (ideal %.1f s)\n",
            what, s->calls, s->throttled, 100.0 * s->throttled / s->calls, s->makespan / 1000.0,
            2048.0 / LIMIT);
}

START_TEST(one_process_reaches_the_limit_with_few_429s)
{
    static struct sim s;
    double ideal = 2048.0 / LIMIT * 1000.0;
    for (int coarse = 0; coarse <= 1; coarse++) {
        simulate(1, 2048, 1024, coarse, &s);
        report(coarse ? "1 process, Retry-After 1 s" : "1 process", &s);
        ck_assert_msg(s.throttled <= s.calls / 20, "%d of %d calls answered 429", s.throttled,
                      s.calls);
        ck_assert_msg(s.makespan <= 1.15 * ideal + LATENCY_MS, "makespan %lld ms",
                      (long long)s.makespan);
    }
}
END_TEST

/*
 * Two processes each learn the whole limit and pace at it, so they overshoot until their
 * shares are cut; every call still gets through and few draw a 429. Each process here has
 * half the runs for good (in evald, processes claim from one queue, so one that is done
 * early takes on more work), so the slower of the two sets the makespan: with the
 * provider's exact retry-after it comes within 1.2 × the ideal (1.13-1.19 × over seeds);
 * with a coarse Retry-After of 1 s, each 429 holds its process for that second, which is
 * where the makespan goes.
 */
START_TEST(two_processes_share_the_limit)
{
    static struct sim s;
    double ideal = 2048.0 / LIMIT * 1000.0;
    for (int coarse = 0; coarse <= 1; coarse++) {
        simulate(2, 2048, 1024, coarse, &s);
        report(coarse ? "2 processes, Retry-After 1 s" : "2 processes", &s);
        ck_assert_msg(s.throttled <= s.calls / 20, "%d of %d calls answered 429", s.throttled,
                      s.calls);
        ck_assert_msg(s.makespan <= (coarse ? 1.7 : 1.2) * ideal + LATENCY_MS,
                      "makespan %lld ms", (long long)s.makespan);
    }
}
END_TEST

/*
 * Two processes that split the limit by agreement (harness/ratelimit.h, evd_rl_part): the
 * parts add up to the limit, so they draw no more 429s than one process does (those of
 * the start, before the limit is known), and a process with more to send gets more of the
 * limit, so that both finish together, however unevenly the runs were split. Without the
 * agreement, the process with more runs finishes alone at its cut share.
 */
START_TEST(two_processes_split_the_limit_by_agreement)
{
    static struct sim s;
    double ideal = 2048.0 / LIMIT * 1000.0;
    const double portions[][2] = {{0.5, 0.5}, {0.7, 0.3}, {0.9, 0.1}};
    for (size_t i = 0; i < sizeof(portions) / sizeof(portions[0]); i++) {
        char what[80];
        simulate_split(2, 2048, portions[i], 1024, false, true, &s);
        snprintf(what, sizeof(what), "2 processes by agreement, %.0f/%.0f",
                 100 * portions[i][0], 100 * portions[i][1]);
        report(what, &s);
        ck_assert_msg(s.throttled <= s.calls / 50, "%d of %d calls answered 429", s.throttled,
                      s.calls);
        ck_assert_msg(s.makespan <= 1.1 * ideal + LATENCY_MS, "makespan %lld ms",
                      (long long)s.makespan);
        double agreed = (double)s.makespan;
        simulate_split(2, 2048, portions[i], 1024, false, false, &s);
        snprintf(what, sizeof(what), "2 processes alone, %.0f/%.0f", 100 * portions[i][0],
                 100 * portions[i][1]);
        report(what, &s);
        ck_assert_msg(agreed <= (double)s.makespan, "agreed %.0f ms, alone %lld ms", agreed,
                      (long long)s.makespan);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("ratelimit");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, durations_parse, 0, sizeof(DURATIONS) / sizeof(DURATIONS[0]));
    tcase_add_test(tc, openai_headers_are_learned);
    tcase_add_test(tc, anthropic_headers_are_learned);
    tcase_add_test(tc, buckets_pace_at_the_configured_rate);
    tcase_add_test(tc, calls_start_paced_until_the_first_answer);
    tcase_add_test(tc, with_no_limit_known_a_429_cuts_the_window_to_what_was_in_flight);
    tcase_add_test(tc, with_a_limit_known_a_429_cuts_the_share_and_successes_give_it_back);
    tcase_add_test(tc, holds_are_jittered);
    tcase_add_test(tc, a_shared_limit_is_split_by_what_waits);
    tcase_add_test(tc, the_token_estimate_learns_from_usage);
    tcase_add_test(tc, a_token_limit_holds_when_calls_use_more_than_their_estimate);
    tcase_add_test(tc, one_process_reaches_the_limit_with_few_429s);
    tcase_add_test(tc, two_processes_share_the_limit);
    tcase_add_test(tc, two_processes_split_the_limit_by_agreement);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
