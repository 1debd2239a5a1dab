/* The FIFO of pointers; see queue.h. Every field is guarded by *q->mu. */
#include "common/queue.h"

#include <stdlib.h>

struct evd_queue_node {
    void *item;
    struct evd_queue_node *next;
};

int evd_queue_init(struct evd_queue *q)
{
    *q = (struct evd_queue){0};
    if (pthread_mutex_init(&q->own_mu, NULL) != 0)
        return -1;
    if (pthread_cond_init(&q->own_cv, NULL) != 0) {
        pthread_mutex_destroy(&q->own_mu);
        return -1;
    }
    q->mu = &q->own_mu;
    q->cv = &q->own_cv;
    q->owns_lock = true;
    return 0;
}

void evd_queue_init_shared(struct evd_queue *q, pthread_mutex_t *mu, pthread_cond_t *cv)
{
    *q = (struct evd_queue){0};
    q->mu = mu;
    q->cv = cv;
}

void evd_queue_destroy(struct evd_queue *q, void (*free_item)(void *item))
{
    if (q == NULL || q->mu == NULL)
        return;
    struct evd_queue_node *n = q->head;
    while (n != NULL) {
        struct evd_queue_node *next = n->next;
        if (free_item != NULL)
            free_item(n->item);
        free(n);
        n = next;
    }
    if (q->owns_lock) {
        pthread_mutex_destroy(&q->own_mu);
        pthread_cond_destroy(&q->own_cv);
    }
    *q = (struct evd_queue){0};
}

bool evd_queue_push(struct evd_queue *q, void *item)
{
    struct evd_queue_node *n = malloc(sizeof(*n));
    if (n == NULL)
        return false;
    n->item = item;
    n->next = NULL;
    pthread_mutex_lock(q->mu);
    bool open = !q->closed;
    if (open) {
        if (q->tail != NULL)
            q->tail->next = n;
        else
            q->head = n;
        q->tail = n;
        q->len++;
        pthread_cond_signal(q->cv);
    }
    pthread_mutex_unlock(q->mu);
    if (!open)
        free(n);
    return open;
}

/* Unlinks the oldest node's item; the caller holds the lock and the queue is not empty. */
static void *take(struct evd_queue *q)
{
    struct evd_queue_node *n = q->head;
    if ((q->head = n->next) == NULL)
        q->tail = NULL;
    q->len--;
    void *item = n->item;
    free(n);
    return item;
}

void *evd_queue_pop_wait(struct evd_queue *q, atomic_bool *stop)
{
    void *item = NULL;
    pthread_mutex_lock(q->mu);
    while (q->head == NULL && !q->closed && (stop == NULL || !atomic_load(stop)))
        pthread_cond_wait(q->cv, q->mu);
    if (q->head != NULL)
        item = take(q);
    pthread_mutex_unlock(q->mu);
    return item;
}

void *evd_queue_try_pop(struct evd_queue *q)
{
    pthread_mutex_lock(q->mu);
    void *item = q->head != NULL ? take(q) : NULL;
    pthread_mutex_unlock(q->mu);
    return item;
}

void evd_queue_close(struct evd_queue *q)
{
    pthread_mutex_lock(q->mu);
    q->closed = true;
    pthread_cond_broadcast(q->cv);
    pthread_mutex_unlock(q->mu);
}

void evd_queue_wake(struct evd_queue *q)
{
    pthread_mutex_lock(q->mu);
    pthread_cond_broadcast(q->cv);
    pthread_mutex_unlock(q->mu);
}

size_t evd_queue_len(struct evd_queue *q)
{
    pthread_mutex_lock(q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(q->mu);
    return n;
}
