/*
 * Fuzz target: the WebSocket client codec of the iii adapter (adapter/ws.c), on what a
 * server sends. The first input byte picks the mode and the reading pattern:
 *   byte % 3 == 0  a frame stream: the rest is fed to evd_ws_decode the way
 *                  adapter/conn.c feeds it, arriving in chunks of 1..16 bytes (byte / 3 %
 *                  16 + 1), with small frame and message bounds so that the limits are
 *                  reached too;
 *   byte % 3 == 1  the upgrade answer: evd_ws_handshake_check on a growing prefix of the
 *                  rest (as it arrives), then the frames after an accepted head;
 *   byte % 3 == 2  evd_ws_url_parse of the rest as the III_URL setting.
 * Checked on the way: the decoder never consumes more than it was given, consumes
 * nothing when it asks for more, and never returns a message over its bound.
 */
#include <stdlib.h>
#include <string.h>

#include "adapter/ws.h"
#include "common/log.h"
#include "tests/fuzz/fuzz.h"

/* The key whose Accept a valid answer in the corpus carries. */
#define FUZZ_WS_KEY "dGhlIHNhbXBsZSBub25jZQ=="

static void frames(const uint8_t *in, size_t len, size_t chunk, size_t max_frame,
                   size_t max_message)
{
    struct evd_ws_decoder d;
    evd_ws_decoder_init(&d, max_frame, max_message);
    /* Bytes received but not consumed, as conn.c keeps them between reads. */
    uint8_t *pending = malloc(len ? len : 1);
    size_t have = 0, fed = 0;
    bool done = pending == NULL;
    while (!done && fed < len) {
        size_t n = len - fed < chunk ? len - fed : chunk;
        memcpy(pending + have, in + fed, n);
        have += n;
        fed += n;
        size_t off = 0;
        while (off < have) {
            struct evd_ws_event ev;
            size_t used = 0;
            int close_code = 0;
            struct evd_err err = {0};
            enum evd_ws_result r =
                evd_ws_decode(&d, pending + off, have - off, &used, &ev, &close_code, &err);
            if (used > have - off)
                abort();
            if (r == EVD_WS_MORE) {
                if (used != 0)
                    abort();
                break;
            }
            if (r == EVD_WS_ERROR) {
                if (err.msg[0] == '\0' || close_code < 1000 || close_code > 4999)
                    abort(); /* an error names itself and gives a close code to send */
                done = true;
                break;
            }
            if (used == 0)
                abort(); /* a frame or event consumes bytes: no endless loop */
            off += used;
            if (r == EVD_WS_EVENT) {
                if (ev.len > max_message || (ev.len > 0 && ev.data == NULL))
                    abort();
                /* Touch every byte so that ASan checks the borrowed span. */
                volatile uint8_t sum = 0;
                for (size_t i = 0; i < ev.len; i++)
                    sum ^= ev.data[i];
                (void)sum;
                if (ev.opcode == EVD_WS_OP_CLOSE) {
                    done = true;
                    break;
                }
            }
        }
        memmove(pending, pending + off, have - off);
        have -= off;
    }
    free(pending);
    evd_ws_decoder_free(&d);
}

static void handshake(const uint8_t *in, size_t len)
{
    char *head = malloc(len ? len : 1);
    if (head == NULL)
        return;
    memcpy(head, in, len);
    /* As conn.c receives it: check after every arrival, here after every 7 bytes. */
    for (size_t have = 0;; have = have + 7 < len ? have + 7 : len) {
        size_t head_len = 0;
        struct evd_err err = {0};
        int r = evd_ws_handshake_check(head, have, FUZZ_WS_KEY, &head_len, &err);
        if (r < 0)
            break;
        if (r > 0) {
            if (head_len > have)
                abort();
            frames(in + head_len, len - head_len, 64, 1 << 16, 1 << 18);
            break;
        }
        if (have == len)
            break;
    }
    free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        evd_log_set_level(EVD_LOG_ERROR + 1);
        quiet = 1;
    }
    if (size < 1)
        return 0;
    unsigned mode = data[0] % 3u;
    size_t chunk = (size_t)(data[0] / 3u % 16u) + 1;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    if (mode == 0) {
        frames(in, len, chunk, 256, 1024);
    } else if (mode == 1) {
        handshake(in, len);
    } else {
        char *url = malloc(len + 1);
        if (url == NULL)
            return 0;
        memcpy(url, in, len);
        url[len] = '\0';
        struct evd_ws_url u;
        struct evd_err err = {0};
        if (evd_ws_url_parse(url, &u, &err) == EVD_OK) {
            struct evd_buf req = {0};
            if (evd_ws_handshake_request(&u, FUZZ_WS_KEY, &req) != 0)
                abort();
            evd_buf_free(&req);
        }
        free(url);
    }
    return 0;
}
