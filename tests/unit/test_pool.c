/*
 * The handler pool (server/pool.h): jobs run in order, an urgent one before every job not
 * yet started (after the urgent ones queued before it), every job runs once, and a stop
 * runs what is still queued.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "server/pool.h"
#include "tests/support/testutil.h"

/* A job that records its tag in the order jobs ran. */
struct tagged {
    struct evd_pool_job job;
    int tag;
};

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int order[64];
static int norder;

static void record(struct evd_pool_job *job)
{
    struct tagged *t = (struct tagged *)job;
    pthread_mutex_lock(&order_mu);
    order[norder++] = t->tag;
    pthread_mutex_unlock(&order_mu);
}

/* A job that holds the only thread until released. */
static atomic_bool release, holding;
static void hold(struct evd_pool_job *job)
{
    (void)job;
    atomic_store(&holding, true);
    while (!atomic_load(&release))
        usleep(1000);
}

START_TEST(urgent_jobs_go_before_the_queued_ones_in_their_own_order)
{
    struct evd_err err = {0};
    struct evd_pool *p = evd_pool_start(1, NULL, &err);
    ck_assert_ptr_nonnull(p);
    norder = 0;
    atomic_store(&release, false);
    atomic_store(&holding, false);
    struct evd_pool_job blocker = {.run = hold};
    evd_pool_submit(p, &blocker, false);
    while (!atomic_load(&holding))
        usleep(1000);
    /* Queued behind the blocker: 1 2 (normal), 10 (urgent), 3 (normal), 11 (urgent). */
    struct tagged jobs[5] = {{{record, NULL}, 1}, {{record, NULL}, 2}, {{record, NULL}, 10},
                             {{record, NULL}, 3}, {{record, NULL}, 11}};
    bool urgent[5] = {false, false, true, false, true};
    for (int i = 0; i < 5; i++)
        evd_pool_submit(p, &jobs[i].job, urgent[i]);
    size_t queued = 0, running = 0;
    evd_pool_stats(p, &queued, &running);
    ck_assert_uint_eq(queued, 5);
    ck_assert_uint_eq(running, 1);
    atomic_store(&release, true);
    evd_pool_stop(p); /* runs what is queued, then joins */
    int want[] = {10, 11, 1, 2, 3};
    ck_assert_int_eq(norder, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(order[i], want[i]);
}
END_TEST

static atomic_int ran;
static void count(struct evd_pool_job *job)
{
    atomic_fetch_add(&ran, 1);
    free(job);
}

struct submitter {
    struct evd_pool *p;
    int n;
};

static void *submit_many(void *arg)
{
    struct submitter *s = arg;
    for (int i = 0; i < s->n; i++) {
        struct evd_pool_job *j = calloc(1, sizeof(*j));
        ck_assert_ptr_nonnull(j);
        j->run = count;
        evd_pool_submit(s->p, j, i % 7 == 0);
    }
    return NULL;
}

/* Four threads submit 5,000 jobs each to eight threads: each runs once (the job frees
 * itself, so a job run twice is a double free under the sanitizers). */
START_TEST(every_job_runs_once)
{
    struct evd_err err = {0};
    struct evd_pool *p = evd_pool_start(8, NULL, &err);
    ck_assert_ptr_nonnull(p);
    atomic_store(&ran, 0);
    struct submitter s = {p, 5000};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, submit_many, &s), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    evd_pool_stop(p);
    ck_assert_int_eq(atomic_load(&ran), 20000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, urgent_jobs_go_before_the_queued_ones_in_their_own_order);
    tcase_add_test(tc, every_job_runs_once);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
