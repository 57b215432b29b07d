/*
 * insn_count: a QEMU TCG plugin that counts the guest instructions the
 * vCPUs execute, in total and by guest address range, and answers the
 * counts on a Unix socket, so that a benchmark can read them before and
 * after a run of requests (issue 20: instructions per request, the one
 * figure TCG cannot inflate).
 *
 * Ebbflow's own code, built by ebb-cbuild (qemu_plugin.rs) against the
 * plugin API header of QEMU's Debian source package (QEMU-NOTES: Debian's
 * QEMU 7.2 loads plugins but ships no header).
 *
 * Arguments (-plugin insn_count.so,sock=PATH[,ranges=FILE]):
 *   sock=PATH    the Unix socket to listen on; each connection gets the
 *                counts, one "NAME COUNT" line each, "total" first, then
 *                the names in the order they first appear in the ranges
 *                file, then "other", and is closed.
 *   ranges=FILE  lines "NAME START END" (hex, END exclusive): an
 *                instruction whose address falls in a range counts under
 *                its NAME, else under "other". A name may have many
 *                ranges (a layer of a program is all its functions), and
 *                ranges must not overlap; names print in the order they
 *                first appear.
 *
 * Counting is exact for one vCPU: every instruction gets an inline add
 * (qemu_plugin_register_vcpu_insn_exec_inline) to its range's counter, so
 * a translation block left early (an interrupt, a fault) counts only what
 * ran. With several vCPUs under multi-threaded TCG the adds race; use
 * one vCPU or -accel tcg,thread=single. The socket thread reads the
 * counters without a lock: an aligned 64-bit load is atomic on x86-64,
 * and a read during a run is a moment's value, which is what a mark is.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_NAMES 64
#define MAX_RANGES (1 << 20)
#define NAME_MAX_LEN 64

struct range {
    uint64_t start;
    uint64_t end;
    size_t name;
};

static struct range *ranges;
static size_t range_count;
static char names[MAX_NAMES][NAME_MAX_LEN];
static size_t name_count;
/* One counter per name, then "other"; each on its own cache line. */
static struct {
    uint64_t value;
    char pad[56];
} counters[MAX_NAMES + 1] __attribute__((aligned(64)));
static char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int listener = -1;

/* The counter of the instruction at `vaddr`: a binary search of the
 * sorted ranges, at translation time only. */
static uint64_t *counter_of(uint64_t vaddr)
{
    size_t low = 0, high = range_count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (vaddr < ranges[mid].start) {
            high = mid;
        } else if (vaddr >= ranges[mid].end) {
            low = mid + 1;
        } else {
            return &counters[ranges[mid].name].value;
        }
    }
    return &counters[name_count].value;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_inline(
            insn, QEMU_PLUGIN_INLINE_ADD_U64,
            counter_of(qemu_plugin_insn_vaddr(insn)), 1);
    }
}

/* Writes all of `text` to `fd`, or gives up on an error (MSG_NOSIGNAL:
 * a client that left must not stop QEMU with SIGPIPE). */
static void write_all(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, text, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return;
        }
        text += n;
        len -= (size_t)n;
    }
}

static void *serve(void *unused)
{
    (void)unused;
    for (;;) {
        int client = accept(listener, NULL, NULL);
        if (client < 0) {
            if (errno != EINTR && errno != ECONNABORTED) {
                /* Out of descriptors or memory, for now: say so and keep
                 * serving, since a benchmark waits on this socket. */
                fprintf(stderr, "insn_count: accept: %s\n", strerror(errno));
                usleep(100000);
            }
            continue;
        }
        /* Each line is a name (under NAME_MAX_LEN), a space, at most 20
         * digits and a newline: the buffer holds every line. */
        char text[(MAX_NAMES + 2) * (NAME_MAX_LEN + 24)];
        _Static_assert(sizeof "total" < NAME_MAX_LEN && sizeof "other" < NAME_MAX_LEN,
                       "the fixed names fit a name's room");
        size_t at = 0;
        uint64_t total = 0;
        uint64_t values[MAX_NAMES + 1];
        for (size_t i = 0; i <= name_count; i++) {
            values[i] = __atomic_load_n(&counters[i].value, __ATOMIC_RELAXED);
            total += values[i];
        }
        at += (size_t)snprintf(text + at, sizeof text - at, "total %" PRIu64 "\n", total);
        for (size_t i = 0; i < name_count; i++) {
            at += (size_t)snprintf(text + at, sizeof text - at, "%s %" PRIu64 "\n",
                                   names[i], values[i]);
        }
        at += (size_t)snprintf(text + at, sizeof text - at, "other %" PRIu64 "\n",
                               values[name_count]);
        write_all(client, text, at);
        close(client);
    }
    return NULL;
}

static int by_start(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The index of `name`, added if new; -1 past MAX_NAMES. */
static int name_index(const char *name)
{
    for (size_t i = 0; i < name_count; i++) {
        if (strcmp(names[i], name) == 0) {
            return (int)i;
        }
    }
    if (name_count == MAX_NAMES) {
        return -1;
    }
    snprintf(names[name_count], NAME_MAX_LEN, "%s", name);
    return (int)name_count++;
}

/* Reads "NAME START END" lines; a message on stderr and -1 if one is bad. */
static int read_ranges(const char *path)
{
    if (ranges) {
        fprintf(stderr, "insn_count: ranges= given twice\n");
        return -1;
    }
    ranges = calloc(MAX_RANGES, sizeof *ranges);
    if (!ranges) {
        fprintf(stderr, "insn_count: no memory for the ranges\n");
        return -1;
    }
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "insn_count: cannot open ranges=%s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[256];
    int line_no = 0;
    while (fgets(line, sizeof line, file)) {
        line_no++;
        char name[NAME_MAX_LEN];
        uint64_t start, end;
        if (line[0] == '\n' || line[0] == '#') {
            continue;
        }
        int name_end = 0;
        if (strchr(line, '\n') == NULL && !feof(file)) {
            fprintf(stderr, "insn_count: %s:%d: a line longer than %zu bytes\n", path, line_no,
                    sizeof line - 1);
            fclose(file);
            return -1;
        }
        if (sscanf(line, "%63s%n %" SCNx64 " %" SCNx64, name, &name_end, &start, &end) != 3
            || (line[name_end] != ' ' && line[name_end] != '\t') || end <= start
            || strcmp(name, "total") == 0 || strcmp(name, "other") == 0) {
            fprintf(stderr, "insn_count: %s:%d: expected NAME START END (hex, START < END, "
                            "NAME under %d characters, not total or other)\n", path, line_no,
                    NAME_MAX_LEN);
            fclose(file);
            return -1;
        }
        int index = range_count == MAX_RANGES ? -1 : name_index(name);
        if (index < 0) {
            fprintf(stderr, "insn_count: %s: more than %d ranges or %d names\n", path,
                    MAX_RANGES, MAX_NAMES);
            fclose(file);
            return -1;
        }
        ranges[range_count].start = start;
        ranges[range_count].end = end;
        ranges[range_count].name = (size_t)index;
        range_count++;
    }
    fclose(file);
    qsort(ranges, range_count, sizeof *ranges, by_start);
    for (size_t i = 1; i < range_count; i++) {
        if (ranges[i].start < ranges[i - 1].end) {
            fprintf(stderr, "insn_count: %s: ranges %" PRIx64 "-%" PRIx64 " and %" PRIx64
                            "-%" PRIx64 " overlap\n", path, ranges[i - 1].start,
                    ranges[i - 1].end, ranges[i].start, ranges[i].end);
            return -1;
        }
    }
    return 0;
}

static void on_exit_cb(qemu_plugin_id_t id, void *unused)
{
    (void)id;
    (void)unused;
    if (socket_path[0]) {
        unlink(socket_path);
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    (void)info;
    const char *sock = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "sock=", 5) == 0) {
            sock = argv[i] + 5;
        } else if (strncmp(argv[i], "ranges=", 7) == 0) {
            if (read_ranges(argv[i] + 7) != 0) {
                return -1;
            }
        } else {
            fprintf(stderr, "insn_count: unknown argument '%s' (sock=PATH, ranges=FILE)\n",
                    argv[i]);
            return -1;
        }
    }
    if (!sock || strlen(sock) >= sizeof socket_path) {
        fprintf(stderr, "insn_count: sock=PATH is needed (at most %zu bytes)\n",
                sizeof socket_path - 1);
        return -1;
    }
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    snprintf(address.sun_path, sizeof address.sun_path, "%s", sock);
    /* A socket left by a QEMU that was killed (no exit callback ran): if
     * nothing answers on it, it is stale and goes. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        if (connect(probe, (struct sockaddr *)&address, sizeof address) != 0
            && errno == ECONNREFUSED) {
            unlink(sock);
        }
        close(probe);
    }
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0
        || listen(listener, 8) != 0) {
        fprintf(stderr, "insn_count: cannot listen on %s: %s\n", sock, strerror(errno));
        return -1;
    }
    snprintf(socket_path, sizeof socket_path, "%s", sock);
    pthread_t thread;
    if (pthread_create(&thread, NULL, serve, NULL) != 0) {
        fprintf(stderr, "insn_count: cannot start the socket thread\n");
        return -1;
    }
    pthread_detach(thread);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
