/*
 * A first-in first-out queue of pointers between threads: producers push, one or more
 * consumers pop, waiting for an item; closing it ends the waits. The queue owns its nodes,
 * never the items: a push that fails (the queue closed, or out of memory) leaves the item
 * the caller's, and what is still queued at evd_queue_destroy goes to its free function.
 *
 * The lock is the queue's own (evd_queue_init) or one the caller already holds its state
 * under (evd_queue_init_shared: its mutex and condition variable, so that whoever
 * broadcasts that condition variable, e.g. at a stop, also wakes the queue's waiters).
 * The queue's lock is a leaf lock: never call its functions holding that mutex.
 */
#ifndef EVD_COMMON_QUEUE_H
#define EVD_COMMON_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct evd_queue_node;

struct evd_queue {
    pthread_mutex_t *mu; /* &own_mu, or the caller's */
    pthread_cond_t *cv;  /* signalled on every push, broadcast at close */
    struct evd_queue_node *head, *tail;
    size_t len;
    bool closed;
    bool owns_lock;
    pthread_mutex_t own_mu;
    pthread_cond_t own_cv;
};

/* A queue with a lock of its own. 0, or -1 when the lock could not be made. */
int evd_queue_init(struct evd_queue *q);
/* A queue guarded by the caller's mutex and condition variable (both must outlive it). */
void evd_queue_init_shared(struct evd_queue *q, pthread_mutex_t *mu, pthread_cond_t *cv);
/* Passes what is still queued to free_item (when not NULL) and releases the queue. No
 * thread may use it any more. NULL-safe. */
void evd_queue_destroy(struct evd_queue *q, void (*free_item)(void *item));

/* Appends `item` (not NULL) and wakes one waiter. false when the queue is closed or out
 * of memory: the item stays the caller's. */
bool evd_queue_push(struct evd_queue *q, void *item);
/* The oldest item, waiting for one while the queue is open and, when `stop` is not NULL,
 * the flag is false; NULL once it is closed (or *stop set) and empty. Whoever sets *stop
 * must then broadcast the queue's condition variable (evd_queue_wake). */
void *evd_queue_pop_wait(struct evd_queue *q, atomic_bool *stop);
/* The oldest item, or NULL at once when the queue is empty. */
void *evd_queue_try_pop(struct evd_queue *q);
/* Refuses further pushes and wakes every waiter; what is queued may still be popped.
 * Idempotent. */
void evd_queue_close(struct evd_queue *q);
/* Wakes every waiter, so that they see a stop flag set. */
void evd_queue_wake(struct evd_queue *q);
/* Items queued now. */
size_t evd_queue_len(struct evd_queue *q);

#endif
