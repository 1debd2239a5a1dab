/* Unit tests for common/queue.c: order, close, the stop flag, a shared lock, many threads. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/queue.h"
#include "tests/support/testutil.h"

#define ITEM(n) ((void *)(uintptr_t)(n))
#define NUM(p) ((uintptr_t)(p))

START_TEST(items_come_out_in_the_order_they_went_in)
{
    struct evd_queue q;
    ck_assert_int_eq(evd_queue_init(&q), 0);
    ck_assert_ptr_null(evd_queue_try_pop(&q));
    for (uintptr_t i = 1; i <= 100; i++)
        ck_assert(evd_queue_push(&q, ITEM(i)));
    ck_assert_uint_eq(evd_queue_len(&q), 100);
    for (uintptr_t i = 1; i <= 50; i++)
        ck_assert_uint_eq(NUM(evd_queue_try_pop(&q)), i);
    for (uintptr_t i = 51; i <= 100; i++)
        ck_assert_uint_eq(NUM(evd_queue_pop_wait(&q, NULL)), i);
    ck_assert_uint_eq(evd_queue_len(&q), 0);
    ck_assert_ptr_null(evd_queue_try_pop(&q));
    /* emptied, it takes items again from the start */
    ck_assert(evd_queue_push(&q, ITEM(7)));
    ck_assert_uint_eq(NUM(evd_queue_try_pop(&q)), 7);
    evd_queue_destroy(&q, NULL);
}
END_TEST

START_TEST(a_closed_queue_refuses_pushes_and_hands_out_what_it_holds)
{
    struct evd_queue q;
    ck_assert_int_eq(evd_queue_init(&q), 0);
    ck_assert(evd_queue_push(&q, ITEM(1)));
    ck_assert(evd_queue_push(&q, ITEM(2)));
    evd_queue_close(&q);
    evd_queue_close(&q); /* idempotent */
    ck_assert(!evd_queue_push(&q, ITEM(3)));
    ck_assert_uint_eq(NUM(evd_queue_pop_wait(&q, NULL)), 1);
    ck_assert_uint_eq(NUM(evd_queue_pop_wait(&q, NULL)), 2);
    ck_assert_ptr_null(evd_queue_pop_wait(&q, NULL)); /* closed and empty: no wait */
    evd_queue_destroy(&q, NULL);
}
END_TEST

START_TEST(a_set_stop_flag_ends_the_wait_once_empty)
{
    struct evd_queue q;
    atomic_bool stop = true;
    ck_assert_int_eq(evd_queue_init(&q), 0);
    ck_assert(evd_queue_push(&q, ITEM(5)));
    ck_assert_uint_eq(NUM(evd_queue_pop_wait(&q, &stop)), 5); /* queued items first */
    ck_assert_ptr_null(evd_queue_pop_wait(&q, &stop));
    ck_assert(evd_queue_push(&q, ITEM(6))); /* a stop does not close */
    ck_assert_uint_eq(NUM(evd_queue_try_pop(&q)), 6);
    evd_queue_destroy(&q, NULL);
}
END_TEST

static int freed;
static void count_free(void *item)
{
    freed++;
    free(item);
}

START_TEST(destroy_hands_what_is_left_to_the_free_function)
{
    struct evd_queue q;
    ck_assert_int_eq(evd_queue_init(&q), 0);
    freed = 0;
    for (int i = 0; i < 3; i++)
        ck_assert(evd_queue_push(&q, malloc(16)));
    free(evd_queue_try_pop(&q));
    evd_queue_destroy(&q, count_free);
    ck_assert_int_eq(freed, 2);
    evd_queue_destroy(NULL, count_free);
}
END_TEST

struct waiter {
    struct evd_queue *q;
    atomic_bool *stop;
    void *got;
};

static void *wait_one(void *arg)
{
    struct waiter *w = arg;
    w->got = evd_queue_pop_wait(w->q, w->stop);
    return NULL;
}

START_TEST(close_wakes_a_waiting_consumer)
{
    struct evd_queue q;
    ck_assert_int_eq(evd_queue_init(&q), 0);
    struct waiter w = {&q, NULL, ITEM(1)};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_one, &w), 0);
    evd_queue_close(&q); /* before or during its wait: either way it returns */
    pthread_join(t, NULL);
    ck_assert_ptr_null(w.got);
    evd_queue_destroy(&q, NULL);
}
END_TEST

/* The finalizer's case: the owner of a shared lock sets its stop flag and broadcasts its
 * own condition variable, knowing nothing of the queue. */
START_TEST(a_shared_lock_is_woken_by_its_owner)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    atomic_bool stop = false;
    struct evd_queue q;
    evd_queue_init_shared(&q, &mu, &cv);
    ck_assert(evd_queue_push(&q, ITEM(9)));
    struct waiter w = {&q, &stop, NULL};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_one, &w), 0);
    pthread_join(t, NULL);
    ck_assert_uint_eq(NUM(w.got), 9);
    w.got = ITEM(1);
    ck_assert_int_eq(pthread_create(&t, NULL, wait_one, &w), 0);
    atomic_store(&stop, true);
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    ck_assert_ptr_null(w.got);
    evd_queue_destroy(&q, NULL);
    pthread_mutex_destroy(&mu);
    pthread_cond_destroy(&cv);
}
END_TEST

#define PRODUCERS 4
#define PER_PRODUCER 2000

struct producer {
    struct evd_queue *q;
    uintptr_t id;
    int refused; /* checked by the main thread */
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (uintptr_t i = 0; i < PER_PRODUCER; i++)
        p->refused += !evd_queue_push(p->q, ITEM(p->id * PER_PRODUCER + i + 1));
    return NULL;
}

START_TEST(many_producers_lose_nothing_and_keep_their_order)
{
    struct evd_queue q;
    ck_assert_int_eq(evd_queue_init(&q), 0);
    pthread_t t[PRODUCERS];
    struct producer p[PRODUCERS];
    for (uintptr_t i = 0; i < PRODUCERS; i++) {
        p[i] = (struct producer){&q, i, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, produce, &p[i]), 0);
    }
    uintptr_t next[PRODUCERS] = {0};
    for (int n = 0; n < PRODUCERS * PER_PRODUCER; n++) {
        uintptr_t v = NUM(evd_queue_pop_wait(&q, NULL)) - 1;
        uintptr_t who = v / PER_PRODUCER;
        ck_assert_uint_lt(who, PRODUCERS);
        ck_assert_uint_eq(v % PER_PRODUCER, next[who]); /* each producer's items in order */
        next[who]++;
    }
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(p[i].refused, 0);
    }
    ck_assert_ptr_null(evd_queue_try_pop(&q));
    evd_queue_destroy(&q, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, items_come_out_in_the_order_they_went_in);
    tcase_add_test(tc, a_closed_queue_refuses_pushes_and_hands_out_what_it_holds);
    tcase_add_test(tc, a_set_stop_flag_ends_the_wait_once_empty);
    tcase_add_test(tc, destroy_hands_what_is_left_to_the_free_function);
    tcase_add_test(tc, close_wakes_a_waiting_consumer);
    tcase_add_test(tc, a_shared_lock_is_woken_by_its_owner);
    tcase_add_test(tc, many_producers_lose_nothing_and_keep_their_order);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
