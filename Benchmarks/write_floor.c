/* The disk's write floors for cache entries (issue #34), in C so that the floor
 * is the disk's and the kernel's, not an interpreter's. Built and run by
 * write_floor.py; see its docstring for the modes.
 *
 * usage: write_floor MODE DIR ENTRIES THREADS SYNC_THREADS BATCH ENTRY_BYTES
 * prints: entries per second
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *mode, *placement;
static int threads, sync_threads, batch, entry_bytes;
static char *data;

struct item { int fd; char key[512]; };
static struct item *items;
static int first, last;
static atomic_int next_index;

static void die(const char *what) { perror(what); exit(1); }

static void fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) die(path);
    close(fd);
}

static void key_path(char *out, int i) { snprintf(out, 512, "%s/key-%08d", placement, i); }

/* unsynced and per-entry: mkdir, temporary file, write, rename (with syncs for per-entry) */
static void write_named(int i, int sync) {
    char key[512], tmp[600], target[600];
    key_path(key, i);
    if (mkdir(key, 0755) != 0) die(key);
    if (sync) fsync_path(placement);
    snprintf(tmp, sizeof tmp, "%s/.tmp", key);
    snprintf(target, sizeof target, "%s/entry.json", key);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || write(fd, data, entry_bytes) != entry_bytes) die(tmp);
    if (sync && fsync(fd) != 0) die("fsync");
    close(fd);
    if (rename(tmp, target) != 0) die(target);
    if (sync) fsync_path(key);
}

/* the group modes' staging: mkdir, O_TMPFILE, write; the descriptor kept */
static void stage(int i) {
    struct item *it = &items[i - first];
    key_path(it->key, i);
    if (mkdir(it->key, 0755) != 0) die(it->key);
    it->fd = open(it->key, O_TMPFILE | O_WRONLY, 0644);
    if (it->fd < 0 || write(it->fd, data, entry_bytes) != entry_bytes) die("O_TMPFILE");
}

static void name(struct item *it) {
    char from[64], target[600];
    snprintf(from, sizeof from, "/proc/self/fd/%d", it->fd);
    snprintf(target, sizeof target, "%s/entry.json", it->key);
    if (linkat(AT_FDCWD, from, AT_FDCWD, target, AT_SYMLINK_FOLLOW) != 0) die(target);
    close(it->fd);
}

static void *writer(void *arg) {
    (void)arg;
    for (;;) {
        int i = atomic_fetch_add(&next_index, 1);
        if (i >= last) return NULL;
        if (!strcmp(mode, "unsynced")) write_named(i, 0);
        else if (!strcmp(mode, "per-entry")) write_named(i, 1);
        else stage(i);
    }
}

static int phase; /* 0 = fsync and name files, 1 = fsync directories, 2 = name files */
static void *syncer(void *arg) {
    (void)arg;
    for (;;) {
        int i = atomic_fetch_add(&next_index, 1);
        if (i >= last) return NULL;
        struct item *it = &items[i - first];
        if (phase == 0) {
            if (fsync(it->fd) != 0) die("fsync");
            name(it);
        } else if (phase == 1) {
            fsync_path(it->key);
        } else {
            name(it);
        }
    }
}

static void run_pool(int n, void *(*body)(void *), int from) {
    pthread_t pool[256];
    atomic_store(&next_index, from);
    for (int t = 0; t < n; t++) pthread_create(&pool[t], NULL, body, NULL);
    for (int t = 0; t < n; t++) pthread_join(pool[t], NULL);
}

static void syncfs_path(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || syncfs(fd) != 0) die("syncfs");
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 8) { fprintf(stderr, "usage: write_floor MODE DIR ENTRIES THREADS SYNC_THREADS BATCH ENTRY_BYTES\n"); return 2; }
    mode = argv[1];
    placement = argv[2];
    int entries = atoi(argv[3]);
    threads = atoi(argv[4]);
    sync_threads = atoi(argv[5]);
    batch = atoi(argv[6]);
    entry_bytes = atoi(argv[7]);
    data = malloc(entry_bytes);
    for (int i = 0; i < entry_bytes; i++) data[i] = (char)rand();
    items = calloc(batch, sizeof *items);
    int grouped = !strncmp(mode, "group-", 6);
    syncfs_path(placement);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (first = 0; first < entries; first += grouped ? batch : entries) {
        last = grouped && first + batch < entries ? first + batch : entries;
        run_pool(threads, writer, first);
        if (!strcmp(mode, "group-syncfs")) {
            /* fpctl's commit where syncfs is honoured: bytes, names, names */
            syncfs_path(placement);
            phase = 2;
            run_pool(sync_threads, syncer, first);
            syncfs_path(placement);
        } else if (!strcmp(mode, "group-fsync")) {
            phase = 0;
            run_pool(sync_threads, syncer, first);
            phase = 1;
            run_pool(sync_threads, syncer, first);
            fsync_path(placement);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double elapsed = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%.1f\n", entries / elapsed);
    return 0;
}
