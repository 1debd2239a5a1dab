/* See contract_record.h. State: the noted bases and the open file, under one mutex. */
#include "tests/support/contract_record.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_BASES 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char bases[MAX_BASES][160];
static int fd = -1;
static pid_t fd_pid;
static unsigned long seq;
static bool warned;

void evd_t_contract_note_evald(const char *base)
{
    if (base == NULL || *base == '\0')
        return;
    pthread_mutex_lock(&lock);
    int free_slot = -1;
    for (int i = 0; i < MAX_BASES; i++) {
        if (strcmp(bases[i], base) == 0) {
            free_slot = -2;
            break;
        }
        if (bases[i][0] == '\0' && free_slot == -1)
            free_slot = i;
    }
    if (free_slot >= 0)
        snprintf(bases[free_slot], sizeof(bases[0]), "%s", base);
    pthread_mutex_unlock(&lock);
}

void evd_t_contract_forget(const char *base)
{
    if (base == NULL || *base == '\0')
        return;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_BASES; i++)
        if (strcmp(bases[i], base) == 0)
            bases[i][0] = '\0';
    pthread_mutex_unlock(&lock);
}

/* Caller holds the lock. A base matches when the URL continues with '/', '?' or ends. */
static bool is_evald_locked(const char *url)
{
    for (int i = 0; i < MAX_BASES; i++) {
        size_t n = strlen(bases[i]);
        if (n > 0 && strncmp(url, bases[i], n) == 0 &&
            (url[n] == '/' || url[n] == '?' || url[n] == '\0'))
            return true;
    }
    return false;
}

bool evd_t_contract_is_evald(const char *url)
{
    pthread_mutex_lock(&lock);
    bool yes = url != NULL && is_evald_locked(url);
    pthread_mutex_unlock(&lock);
    return yes;
}

/* The path and query of a URL ("http://h:p/x?y" → "/x?y"). */
static const char *path_of(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? strchr(p + 3, '/') : NULL;
    return p ? p : "/";
}

/* Caller holds the lock. Opens this process's file on first use (again after a fork). */
static int file_locked(void)
{
    const char *dir = getenv("EVALD_CONTRACT_RECORD");
    if (dir == NULL || *dir == '\0')
        return -1;
    pid_t me = getpid();
    if (fd >= 0 && fd_pid == me)
        return fd;
    if (fd >= 0)
        close(fd); /* the parent's descriptor, inherited through fork */
    fd = -1;
    seq = 0;
    const char *suite = getenv("EVALD_CONTRACT_SUITE");
    char name[96];
    size_t n = 0;
    for (const char *s = suite && *suite ? suite : "c"; *s && n < sizeof(name) - 1; s++)
        name[n++] = (strchr("/\\ :", *s) != NULL) ? '_' : *s;
    name[n] = '\0';
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s-%ld.jsonl", dir, name, (long)me);
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && !warned) {
        fprintf(stderr, "contract_record: cannot open %s: %s\n", path, strerror(errno));
        warned = true;
    }
    fd_pid = me;
    return fd;
}

static json_t *request_headers(const char *const *headers)
{
    json_t *o = json_object();
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        const char *colon = strchr(headers[i], ':');
        if (colon == NULL)
            continue;
        char key[128];
        snprintf(key, sizeof(key), "%.*s", (int)(colon - headers[i]), headers[i]);
        for (char *k = key; *k; k++)
            *k = (char)((*k >= 'A' && *k <= 'Z') ? *k - 'A' + 'a' : *k);
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        /* A credential is noted as present, never written. */
        json_object_set_new(o, key,
                            json_string(strcmp(key, "authorization") == 0 ? "<redacted>" : v));
    }
    return o;
}

void evd_t_contract_record(const char *method, const char *url, const char *const *req_headers,
                           size_t req_body_len, long status, const char *raw_headers,
                           const char *body, size_t len)
{
    if (getenv("EVALD_CONTRACT_RECORD") == NULL || url == NULL)
        return;
    pthread_mutex_lock(&lock);
    if (!is_evald_locked(url) || file_locked() < 0) {
        pthread_mutex_unlock(&lock);
        return;
    }
    json_t *line =
        json_pack("{s:s, s:I, s:I, s:s, s:s, s:o, s:I, s:I, s:s}", "suite",
                  getenv("EVALD_CONTRACT_SUITE") ? getenv("EVALD_CONTRACT_SUITE") : "c", "pid",
                  (json_int_t)getpid(), "seq", (json_int_t)++seq, "method", method, "url",
                  path_of(url), "request_headers", request_headers(req_headers),
                  "request_body_bytes", (json_int_t)req_body_len, "status", (json_int_t)status,
                  "headers", raw_headers ? raw_headers : "");
    json_t *text = body ? json_stringn(body, len) : NULL;
    if (text != NULL)
        json_object_set_new(line, "body", text);
    else
        json_object_set_new(line, "body_bytes", json_integer((json_int_t)len));
    char *out = line ? json_dumps(line, JSON_COMPACT) : NULL;
    json_decref(line);
    if (out != NULL) {
        size_t n = strlen(out);
        out[n] = '\n'; /* replaces the NUL: one write of the whole line */
        ssize_t w = write(fd, out, n + 1);
        if (w != (ssize_t)(n + 1) && !warned) {
            fprintf(stderr, "contract_record: short write: %s\n", strerror(errno));
            warned = true;
        }
    }
    free(out);
    pthread_mutex_unlock(&lock);
}
