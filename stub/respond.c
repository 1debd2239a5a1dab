/*
 * The stub's ways to answer (internal.h): JSON, a body cut in half, a header too large to
 * read, and a wait that ends when the client goes. Called from the connection's own thread
 * (server.c); they take no lock.
 */
#include "stub/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Queues `body` (stolen) as JSON; returns MHD's answer. */
enum MHD_Result stub_send_json(struct MHD_Connection *c, int status, json_t *body,
                               const char *const *headers)
{
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text == NULL)
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
    if (text == NULL)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(strlen(text), text, free);
    if (r == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i += 2)
        MHD_add_response_header(r, headers[i], headers[i + 1]);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

struct trunc {
    char *data;
    size_t len, send;
};

static ssize_t trunc_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct trunc *t = cls;
    if (pos >= t->send)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = t->send - (size_t)pos;
    if (n > max)
        n = max;
    memcpy(buf, t->data + pos, n);
    return (ssize_t)n;
}

static void trunc_free(void *cls)
{
    struct trunc *t = cls;
    free(t->data);
    free(t);
}

/*
 * Sends the first half of `body` (stolen) with status 200. `cut`: declare the full
 * Content-Length, then close the connection after the half (a transport error for the
 * client); otherwise a complete response whose JSON simply ends in the middle.
 */
enum MHD_Result stub_send_half(struct MHD_Connection *c, json_t *body, bool cut)
{
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (text == NULL)
        return MHD_NO;
    size_t len = strlen(text);
    if (!cut) {
        text[len / 2] = '\0';
        struct MHD_Response *r =
            MHD_create_response_from_buffer_with_free_callback(len / 2, text, free);
        if (r == NULL) {
            free(text);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "application/json");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    struct trunc *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        free(text);
        return MHD_NO;
    }
    t->data = text;
    t->len = len;
    t->send = len / 2;
    struct MHD_Response *r =
        MHD_create_response_from_callback(t->len, 4096, trunc_read, t, trunc_free);
    if (r == NULL) {
        trunc_free(t);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/*
 * The normal 200 answer with one extra header whose value is `pad` bytes long, written
 * straight to the client socket: libmicrohttpd cannot send a header larger than its
 * connection buffer. The caller then closes the connection (MHD_NO). Gives up when the
 * client stops reading (a client that refuses the header closes its end).
 */
enum MHD_Result stub_send_big_header(struct stub_server *s, struct MHD_Connection *c,
                                     json_t *body, int64_t pad)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    char *msg = NULL;
    size_t len = 0;
    FILE *f = text != NULL && ci != NULL ? open_memstream(&msg, &len) : NULL;
    if (f == NULL) {
        free(text);
        return MHD_NO;
    }
    fprintf(f,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
            "Connection: close\r\nX-Stub-Padding: ",
            strlen(text));
    for (int64_t i = 0; i < pad; i++)
        fputc('a', f);
    fprintf(f, "\r\n\r\n%s", text);
    free(text);
    if (fclose(f) != 0) {
        free(msg);
        return MHD_NO;
    }
    int fd = ci->connect_fd;
    size_t off = 0;
    int64_t deadline = evd_mono_ms() + 10000;
    while (off < len && !atomic_load(&s->stopping) && evd_mono_ms() < deadline) {
        ssize_t n = send(fd, msg + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break; /* the client went away */
        struct pollfd p[2] = {{.fd = fd, .events = POLLOUT},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        poll(p, 2, WAIT_SLICE_MS);
    }
    free(msg);
    return MHD_NO;
}

/*
 * Waits `ms` milliseconds (forever when negative) while watching the client socket.
 * Returns false as soon as the client has gone or the server is stopping.
 */
bool stub_wait_client(struct stub_server *s, struct MHD_Connection *c, int64_t ms)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci != NULL ? ci->connect_fd : -1;
    int64_t deadline = ms >= 0 ? evd_mono_ms() + ms : INT64_MAX;
    for (;;) {
        if (atomic_load(&s->stopping))
            return false;
        int64_t left = deadline - evd_mono_ms();
        if (left <= 0)
            return true;
        int slice = left > WAIT_SLICE_MS ? WAIT_SLICE_MS : (int)left;
        if (fd < 0) {
            struct pollfd stop = {.fd = s->stop_pipe[0], .events = POLLIN};
            poll(&stop, 1, slice);
            continue;
        }
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        int n = poll(p, 2, slice);
        if (n <= 0)
            continue;
        if (p[1].revents != 0)
            return false;
        if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL))
            return false;
        if (!(p[0].revents & POLLIN))
            continue;
        char b;
        ssize_t got = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return false;
        /* Pipelined bytes of a next request: nothing to read yet, keep waiting. */
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}
