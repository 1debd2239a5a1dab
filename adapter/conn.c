/*
 * The connection thread: TCP connect and WebSocket upgrade, then one session of
 * reading, writing and pinging until the engine goes away, then reconnection with
 * exponential backoff and jitter. It alone touches the socket; other threads queue
 * frames with evd_iii_send and wake it through the `wake` pipe.
 * On stop it lets the handler threads finish (bounded), sends a Close frame and
 * waits briefly for the engine's Close before closing the socket.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "adapter/internal.h"
#include "common/log.h"
#include "handlers/api.h"

#define READ_CHUNK 65536
#define STOP_DRAIN_MS 5000 /* how long in-flight invocations may finish at stop */
#define CLOSE_WAIT_MS 1000 /* how long to wait for the engine's Close */

void evd_iii_wake(int fd)
{
    ssize_t w = write(fd, "x", 1);
    (void)w; /* a full pipe already wakes the reader */
}

static void drain(int fd)
{
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

/* ---- outbound queue ------------------------------------------------------------- */

int evd_iii_send(struct evd_iii *a, uint64_t generation, json_t *msg, uint64_t *offset,
                 struct evd_err *err)
{
    size_t len = 0;
    char *text = msg ? evd_json_dump(msg, &len) : NULL;
    json_decref(msg);
    if (text == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory encoding a message for the iii engine");
        return -1;
    }
    if (len > EVD_III_MAX_FRAME) {
        free(text);
        evd_err_set(err, EVD_ETOOLARGE, "message for the iii engine is over %u bytes",
                    EVD_III_MAX_FRAME);
        return -1;
    }
    int rc = -1;
    pthread_mutex_lock(&a->mu);
    if (!a->connected || a->generation != generation) {
        evd_err_set(err, EVD_EUNAVAIL, "iii engine is not connected");
    } else {
        size_t before = a->out.len;
        if (evd_ws_frame_append(&a->out, EVD_WS_OP_TEXT, text, len) != 0) {
            evd_err_set(err, EVD_EUNAVAIL, "iii engine connection is congested");
        } else {
            a->out_total += a->out.len - before;
            if (offset)
                *offset = a->out_total;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&a->mu);
    free(text);
    if (rc == 0)
        evd_iii_wake(a->wake[1]);
    return rc;
}

/* Queues a control frame on the current session (connection thread only). */
static void send_control(struct evd_iii *a, int opcode, const void *data, size_t len)
{
    pthread_mutex_lock(&a->mu);
    size_t before = a->out.len;
    if (evd_ws_frame_append(&a->out, opcode, data, len) == 0)
        a->out_total += a->out.len - before;
    pthread_mutex_unlock(&a->mu);
}

static void send_close(struct evd_iii *a, int code, const char *reason)
{
    pthread_mutex_lock(&a->mu);
    size_t before = a->out.len;
    if (evd_ws_close_append(&a->out, code, reason) == 0)
        a->out_total += a->out.len - before;
    pthread_mutex_unlock(&a->mu);
}

bool evd_iii_wait_flushed(struct evd_iii *a, uint64_t generation, uint64_t offset,
                          int64_t timeout_ms)
{
    int64_t deadline = evd_mono_ms() + timeout_ms;
    bool ok = false;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        if (!a->connected || a->generation != generation)
            break;
        if (a->out_flushed >= offset) {
            ok = true;
            break;
        }
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t step = left < 100 ? left : 100;
        ts.tv_nsec += (long)(step % 1000) * 1000000L;
        ts.tv_sec += step / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&a->cv, &a->mu, &ts);
    }
    pthread_mutex_unlock(&a->mu);
    return ok;
}

/* Writes what the socket takes now. Returns 0, or -1 when the socket failed. */
static int flush_out(struct evd_iii *a, int fd, bool *pending)
{
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    while (a->out_sent < a->out.len) {
        ssize_t n = send(fd, a->out.data + a->out_sent, a->out.len - a->out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            a->out_sent += (size_t)n;
            a->out_flushed += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        rc = -1;
        break;
    }
    if (a->out_sent == a->out.len) {
        a->out.len = 0;
        a->out_sent = 0;
    } else if (a->out_sent > a->out.len / 2) {
        memmove(a->out.data, a->out.data + a->out_sent, a->out.len - a->out_sent);
        a->out.len -= a->out_sent;
        a->out_sent = 0;
    }
    *pending = a->out.len > 0;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

/* ---- connect and upgrade ---------------------------------------------------------- */

/* Waits for `events` on fd until the deadline or stop; 1 ready, 0 timeout/stop, -1 error. */
static int wait_fd(struct evd_iii *a, int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0 || atomic_load(&a->stopping))
            return 0;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = a->wake[0], .events = POLLIN}};
        int n = poll(p, 2, (int)(left < 200 ? left : 200));
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0 && p[1].revents)
            drain(a->wake[0]); /* frames queued meanwhile stay queued */
        if (n > 0 && p[0].revents)
            return 1;
    }
}

static int tcp_connect(struct evd_iii *a, int64_t deadline, struct evd_err *err)
{
    char port[8];
    snprintf(port, sizeof(port), "%u", a->url.port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(a->url.host, port, &hints, &res);
    if (gai != 0) {
        evd_err_set(err, EVD_EUNAVAIL, "could not resolve %s: %s", a->url.host, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    int last_errno = 0;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            last_errno = errno;
            close(fd);
            fd = -1;
            continue;
        }
        int ready = wait_fd(a, fd, POLLOUT, deadline);
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (ready <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            last_errno = ready == 0 ? ETIMEDOUT : soerr ? soerr : errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        evd_err_set(err, EVD_EUNAVAIL, "could not connect to %s:%u: %s", a->url.host, a->url.port,
                    strerror(last_errno ? last_errno : ECONNREFUSED));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/*
 * Connects and upgrades. On success returns the socket and leaves in *in any bytes
 * the engine sent after its handshake answer.
 */
static int open_socket(struct evd_iii *a, struct evd_buf *in, struct evd_err *err)
{
    int64_t deadline = evd_mono_ms() + a->opts.connect_timeout_ms;
    int fd = tcp_connect(a, deadline, err);
    if (fd < 0)
        return -1;
    char key[25];
    evd_ws_key_new(key);
    struct evd_buf req = {0};
    if (evd_ws_handshake_request(&a->url, key, &req) != 0) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        goto fail;
    }
    size_t sent = 0;
    while (sent < req.len) {
        ssize_t n = send(fd, req.data + sent, req.len - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(a, fd, POLLOUT, deadline) <= 0) {
                evd_err_set(err, EVD_ETIMEOUT, "iii engine upgrade timed out");
                goto fail;
            }
        } else {
            evd_err_set(err, EVD_EUNAVAIL, "could not send the upgrade request: %s",
                        strerror(errno));
            goto fail;
        }
    }
    char head[EVD_WS_MAX_HEAD];
    size_t have = 0;
    for (;;) {
        size_t head_len = 0;
        int r = evd_ws_handshake_check(head, have, key, &head_len, err);
        if (r < 0)
            goto fail;
        if (r > 0) {
            if (have > head_len && evd_buf_append(in, head + head_len, have - head_len) != 0) {
                evd_err_set(err, EVD_ENOMEM, "out of memory");
                goto fail;
            }
            break;
        }
        ssize_t n = recv(fd, head + have, sizeof(head) - have, 0);
        if (n > 0) {
            have += (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(a, fd, POLLIN, deadline) <= 0) {
                evd_err_set(err, EVD_ETIMEOUT, "iii engine upgrade timed out");
                goto fail;
            }
        } else {
            evd_err_set(err, EVD_EUNAVAIL, "iii engine closed the connection during the upgrade");
            goto fail;
        }
    }
    evd_buf_free(&req);
    return fd;
fail:
    evd_buf_free(&req);
    close(fd);
    return -1;
}

/* ---- one session ---------------------------------------------------------------------- */

enum session_end { END_PEER, END_ERROR, END_IDLE, END_STOP };

/* Handles the frames in in[0..len); returns bytes consumed, and sets *end to stop. */
static size_t handle_frames(struct evd_iii *a, uint64_t gen, struct evd_ws_decoder *dec,
                            const uint8_t *in, size_t len, bool close_sent, int *end)
{
    size_t off = 0;
    while (off < len && *end < 0) {
        struct evd_ws_event ev;
        size_t used = 0;
        int close_code = 0;
        struct evd_err err = {0};
        enum evd_ws_result r =
            evd_ws_decode(dec, in + off, len - off, &used, &ev, &close_code, &err);
        if (r == EVD_WS_MORE)
            break;
        off += used;
        if (r == EVD_WS_FRAME)
            continue;
        if (r == EVD_WS_ERROR) {
            evd_log(EVD_LOG_WARN, "iii engine connection failed", "error", err.msg, NULL);
            send_close(a, close_code, "protocol error");
            *end = END_ERROR;
            break;
        }
        switch (ev.opcode) {
        case EVD_WS_OP_TEXT:
        case EVD_WS_OP_BINARY:
            evd_iii_on_message(a, gen, (const char *)ev.data, ev.len);
            break;
        case EVD_WS_OP_PING:
            send_control(a, EVD_WS_OP_PONG, ev.data, ev.len);
            break;
        case EVD_WS_OP_PONG:
            break;
        case EVD_WS_OP_CLOSE:
            if (!close_sent)
                send_close(a,
                           ev.close_code == EVD_WS_CLOSE_NO_STATUS ? EVD_WS_CLOSE_NORMAL
                                                                   : ev.close_code,
                           "");
            else {
                char code[16];
                snprintf(code, sizeof(code), "%d", ev.close_code);
                evd_log(EVD_LOG_DEBUG, "iii engine acknowledged the close", "code", code, NULL);
            }
            *end = END_PEER;
            break;
        default:
            break;
        }
    }
    return off;
}

static int active_jobs(struct evd_iii *a)
{
    pthread_mutex_lock(&a->mu);
    int n = a->active_jobs;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static enum session_end run_session(struct evd_iii *a, int fd, struct evd_buf *in, uint64_t gen)
{
    struct evd_ws_decoder dec;
    evd_ws_decoder_init(&dec, EVD_III_MAX_FRAME, EVD_III_MAX_MESSAGE);
    int64_t now = evd_mono_ms();
    int64_t last_rx = now, next_ping = now + a->opts.ping_interval_ms;
    int64_t stop_at = 0, close_deadline = 0;
    bool close_sent = false, pending = true;
    int end = -1;
    uint8_t *chunk = malloc(READ_CHUNK);
    if (chunk == NULL)
        end = END_ERROR;

    /* Bytes that came with the handshake answer. */
    if (end < 0 && in->len > 0) {
        size_t used = handle_frames(a, gen, &dec, (const uint8_t *)in->data, in->len, false, &end);
        memmove(in->data, in->data + used, in->len - used);
        in->len -= used;
    }
    while (end < 0) {
        now = evd_mono_ms();
        if (atomic_load(&a->stopping) && !close_sent) {
            if (stop_at == 0)
                stop_at = now;
            if (active_jobs(a) == 0 || now - stop_at > STOP_DRAIN_MS) {
                send_close(a, EVD_WS_CLOSE_GOING_AWAY, "evald is shutting down");
                close_sent = true;
                close_deadline = now + CLOSE_WAIT_MS;
            }
        }
        if (close_sent && now > close_deadline) {
            end = END_STOP;
            break;
        }
        if (now - last_rx > a->opts.idle_timeout_ms) {
            evd_log(EVD_LOG_WARN, "iii engine connection idle, reconnecting", NULL);
            end = END_IDLE;
            break;
        }
        if (now >= next_ping && !close_sent) {
            send_control(a, EVD_WS_OP_PING, "evald", 5);
            next_ping = now + a->opts.ping_interval_ms;
        }
        if (flush_out(a, fd, &pending) != 0) {
            evd_log(EVD_LOG_WARN, "iii engine connection failed", "error", strerror(errno), NULL);
            end = END_ERROR;
            break;
        }
        int64_t wait = next_ping - now;
        if (wait > 200)
            wait = 200; /* stop, idle and close deadlines are checked at this pace */
        if (wait < 0)
            wait = 0;
        struct pollfd p[2] = {{.fd = fd, .events = (short)(POLLIN | (pending ? POLLOUT : 0))},
                              {.fd = a->wake[0], .events = POLLIN}};
        int n = poll(p, 2, (int)wait);
        if (n < 0 && errno != EINTR) {
            end = END_ERROR;
            break;
        }
        if (n <= 0)
            continue;
        if (p[1].revents)
            drain(a->wake[0]);
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
            continue;
        ssize_t r = recv(fd, chunk, READ_CHUNK, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0) {
            if (!close_sent)
                evd_log(EVD_LOG_WARN, "iii engine closed the connection", NULL);
            end = close_sent ? END_STOP : END_PEER;
            break;
        }
        last_rx = evd_mono_ms();
        if (evd_buf_append(in, chunk, (size_t)r) != 0) {
            evd_log(EVD_LOG_WARN, "iii engine sent a frame over the size limit", NULL);
            send_close(a, EVD_WS_CLOSE_TOO_BIG, "frame too large");
            end = END_ERROR;
            break;
        }
        size_t used =
            handle_frames(a, gen, &dec, (const uint8_t *)in->data, in->len, close_sent, &end);
        memmove(in->data, in->data + used, in->len - used);
        in->len -= used;
        if (end == END_PEER && close_sent)
            end = END_STOP;
    }
    if (end == END_PEER || end == END_ERROR)
        flush_out(a, fd, &pending); /* the Close we answer with, best-effort */
    free(chunk);
    evd_ws_decoder_free(&dec);
    return (enum session_end)end;
}

static int64_t jittered(int64_t ms)
{
    unsigned char r[2] = {0};
    RAND_bytes(r, sizeof(r));
    double u = ((r[0] << 8) | r[1]) / 65535.0;      /* 0..1 */
    return (int64_t)((double)ms * (0.7 + 0.6 * u)); /* ±30 % */
}

void *evd_iii_conn_main(void *arg)
{
    struct evd_iii *a = arg;
    int64_t backoff = a->opts.backoff_initial_ms;
    while (!atomic_load(&a->stopping)) {
        struct evd_err err = {0};
        struct evd_buf in = {.limit = EVD_III_MAX_FRAME + READ_CHUNK + 16};
        int fd = open_socket(a, &in, &err);
        if (fd < 0) {
            evd_buf_free(&in);
            if (atomic_load(&a->stopping))
                break;
            int64_t delay = jittered(backoff);
            char ms[24];
            snprintf(ms, sizeof(ms), "%lld", (long long)delay);
            evd_log(EVD_LOG_WARN, "could not reach the iii engine, retrying", "error", err.msg,
                    "retry_ms", ms, NULL);
            struct pollfd p = {.fd = a->wake[0], .events = POLLIN};
            int64_t until = evd_mono_ms() + delay;
            while (!atomic_load(&a->stopping) && evd_mono_ms() < until) {
                if (poll(&p, 1, (int)(until - evd_mono_ms())) > 0)
                    drain(a->wake[0]);
            }
            backoff = backoff * 2 > a->opts.backoff_max_ms ? a->opts.backoff_max_ms : backoff * 2;
            continue;
        }
        backoff = a->opts.backoff_initial_ms;
        pthread_mutex_lock(&a->mu);
        uint64_t gen = ++a->generation;
        a->connected = true;
        a->connected_at_mono = evd_mono_ms();
        a->out.len = 0;
        a->out_sent = 0;
        a->out_total = 0;
        a->out_flushed = 0;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        evd_log(EVD_LOG_INFO, "connected to the iii engine", "url", a->opts.url, NULL);

        evd_iii_on_open(a, gen);
        evd_iii_wake(a->dwake[1]);
        enum session_end end = run_session(a, fd, &in, gen);
        close(fd);
        evd_buf_free(&in);

        pthread_mutex_lock(&a->mu);
        a->connected = false;
        a->out.len = 0;
        a->out_sent = 0;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        evd_iii_on_close(a, gen);
        evd_iii_wake(a->dwake[1]);
        if (end != END_STOP)
            evd_log(EVD_LOG_INFO, "disconnected from the iii engine", NULL);
    }
    return NULL;
}
