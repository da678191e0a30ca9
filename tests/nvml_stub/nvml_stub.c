/*
 * A stand-in libnvidia-ml.so.1 so that the unmodified nvidia-ml-py (`import pynvml`) runs
 * without a GPU. Built by tests/nvml_stub/fixture.py with
 *   gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 nvml_stub.c
 *
 * State lives in a small text file named by $JOULEHOUSE_NVML_STUB_STATE, re-read on every call so
 * a test can change values while a collector runs. One "key value" per line; '#' starts a comment;
 * when a key appears twice the LAST line wins (the Set* calls append, they never rewrite).
 *
 *   device_count 2                     driver_version 550.54.15
 *   error.nvmlInitWithFlags DRIVER_NOT_LOADED        (a call-wide injected error)
 *   gpu0.name NVIDIA H100 80GB HBM3    gpu0.uuid GPU-...
 *   gpu0.power_mw 72000                gpu0.energy_mj_total 123456789
 *   gpu0.temp_c 34  gpu0.mem_temp_c 40 gpu0.sm_clock_mhz 1980  gpu0.mem_clock_mhz 2619
 *   gpu0.max_sm_clock_mhz 1980         gpu0.max_mem_clock_mhz 2619
 *   gpu0.min_sm_clock_mhz 345          (lowest supported SM clock; the supported list is
 *                                       max_sm_clock_mhz down to it in 15 MHz steps)
 *   gpu0.util_gpu_pct 50  gpu0.util_mem_pct 20  gpu0.mem_total_mib 81559  gpu0.mem_used_mib 1024
 *   gpu0.power_limit_mw 700000  gpu0.power_limit_default_mw 700000
 *   gpu0.power_limit_min_mw 200000  gpu0.power_limit_max_mw 700000
 *   gpu0.enforced_power_limit_mw 700000   (optional; else power_limit_mw)
 *   gpu0.clock_event_reasons 0x4       gpu0.pcie_tx_kb_per_s 1000  gpu0.pcie_rx_kb_per_s 2000
 *   gpu0.pstate 0                      gpu0.processes 1234:1024,5678:0   (pid:used MiB)
 *   gpu0.locked_sm_clock_min_mhz 0     gpu0.locked_sm_clock_max_mhz 0
 *   gpu0.nvlink_link_count 18  gpu0.nvlink_speed_mbps 26562   (field values 91 and 90)
 *   gpu0.nvlink_tx_kib_total 0  gpu0.nvlink_rx_kib_total 0     (field values 138/139: KiB since
 *                                       driver load; scopeId UINT_MAX sums the links, a link's
 *                                       own scopeId gets an equal share)
 *   gpu0.error.nvmlDeviceGetPowerUsage GPU_IS_LOST   gpu1.error.* GPU_IS_LOST
 *
 * Units are NVML's: power mW, energy mJ, clocks MHz, temperatures C, PCIe KB/s, memory bytes
 * (given in MiB in the file). A reading whose key is absent answers NVML_ERROR_NOT_SUPPORTED,
 * as a GPU without that sensor does. Both names of the clock event bitmask are exported, as
 * drivers from 535 on have them (a real H200 on driver 580 answered both with the same value:
 * tests/nvml_stub/real_nvml_h200.json). A driver before 535 lacks the newer name: inject
 * `gpuN.error.nvmlDeviceGetCurrentClocksEventReasons FUNCTION_NOT_FOUND` and pynvml raises the
 * NVMLError_FunctionNotFound it raises for a missing symbol.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
    OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NO_PERMISSION = 4,
    NOT_FOUND = 6, INSUFFICIENT_SIZE = 7, GPU_IS_LOST = 15, UNKNOWN = 999
};

static const struct { const char *name; int code; } ERRORS[] = {
    {"SUCCESS", 0}, {"UNINITIALIZED", 1}, {"INVALID_ARGUMENT", 2}, {"NOT_SUPPORTED", 3},
    {"NO_PERMISSION", 4}, {"ALREADY_INITIALIZED", 5}, {"NOT_FOUND", 6}, {"INSUFFICIENT_SIZE", 7},
    {"INSUFFICIENT_POWER", 8}, {"DRIVER_NOT_LOADED", 9}, {"TIMEOUT", 10}, {"IRQ_ISSUE", 11},
    {"LIBRARY_NOT_FOUND", 12}, {"FUNCTION_NOT_FOUND", 13}, {"CORRUPTED_INFOROM", 14},
    {"GPU_IS_LOST", 15}, {"RESET_REQUIRED", 16}, {"OPERATING_SYSTEM", 17},
    {"LIB_RM_VERSION_MISMATCH", 18}, {"IN_USE", 19}, {"MEMORY", 20}, {"NO_DATA", 21},
    {"NOT_READY", 27}, {"GPU_NOT_FOUND", 28}, {"INVALID_STATE", 29}, {"UNKNOWN", 999},
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count = 0;
static char *state = NULL; /* the file's text, re-read by load() */

static void load(void) {
    free(state);
    state = NULL;
    const char *path = getenv("JOULEHOUSE_NVML_STUB_STATE");
    if (!path) return;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t cap = 4096, len = 0;
    state = malloc(cap + 1);
    size_t n;
    while ((n = fread(state + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) { cap *= 2; state = realloc(state, cap + 1); }
    }
    state[len] = 0;
    fclose(f);
}

/* Copy the value of the last line whose key equals `key` into out; 1 if found. */
static int lookup(const char *key, char *out, size_t outlen) {
    int found = 0;
    if (!state) return 0;
    size_t klen = strlen(key);
    const char *line = state;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t llen = end ? (size_t)(end - line) : strlen(line);
        while (llen && (line[llen - 1] == '\r' || line[llen - 1] == ' ')) llen--;
        const char *p = line;
        while (p < line + llen && (*p == ' ' || *p == '\t')) p++;
        if (*p != '#' && (size_t)(line + llen - p) > klen && strncmp(p, key, klen) == 0 &&
            (p[klen] == ' ' || p[klen] == '\t')) {
            const char *v = p + klen;
            while (v < line + llen && (*v == ' ' || *v == '\t')) v++;
            size_t vlen = (size_t)(line + llen - v);
            if (vlen >= outlen) vlen = outlen - 1;
            memcpy(out, v, vlen);
            out[vlen] = 0;
            found = 1;
        }
        if (!end) break;
        line = end + 1;
    }
    return found;
}

static int gpu_lookup(unsigned idx, const char *field, char *out, size_t outlen) {
    char key[160];
    snprintf(key, sizeof key, "gpu%u.%s", idx, field);
    return lookup(key, out, outlen);
}

static int gpu_u64(unsigned idx, const char *field, unsigned long long *v) {
    char buf[64];
    if (!gpu_lookup(idx, field, buf, sizeof buf)) return 0;
    *v = strtoull(buf, NULL, 0);
    return 1;
}

static int error_code(const char *name) {
    if (!strncmp(name, "NVML_ERROR_", 11)) name += 11;
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (!strcmp(ERRORS[i].name, name)) return ERRORS[i].code;
    if (*name >= '0' && *name <= '9') return atoi(name);
    return UNKNOWN;
}

/* An injected error for `fn` on GPU `idx` (idx < 0: call-wide only). */
static int injected(int idx, const char *fn) {
    char key[160], buf[64];
    snprintf(key, sizeof key, "error.%s", fn);
    if (lookup(key, buf, sizeof buf)) return error_code(buf);
    if (idx >= 0) {
        snprintf(key, sizeof key, "gpu%d.error.%s", idx, fn);
        if (lookup(key, buf, sizeof buf)) return error_code(buf);
        snprintf(key, sizeof key, "gpu%d.error.*", idx);
        if (lookup(key, buf, sizeof buf)) return error_code(buf);
    }
    return OK;
}

static unsigned device_count(void) {
    char buf[32];
    return lookup("device_count", buf, sizeof buf) ? (unsigned)strtoul(buf, NULL, 0) : 0;
}

static int append_state(const char *line) {
    const char *path = getenv("JOULEHOUSE_NVML_STUB_STATE");
    if (!path) return UNKNOWN;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) return UNKNOWN;
    size_t n = strlen(line);
    int ok = write(fd, line, n) == (ssize_t)n;
    close(fd);
    return ok ? OK : UNKNOWN;
}

#define HANDLE_BASE 0x1000u
static nvmlDevice_t handle_of(unsigned idx) { return (nvmlDevice_t)(uintptr_t)(HANDLE_BASE + idx); }

/* Every device call starts here: lock, re-read state, check init, decode handle, inject errors. */
#define ENTER_DEVICE(dev, fn)                                                            \
    pthread_mutex_lock(&lock);                                                           \
    load();                                                                              \
    nvmlReturn_t _rc = OK;                                                               \
    unsigned idx = (unsigned)((uintptr_t)(dev) - HANDLE_BASE);                           \
    if (!init_count) { _rc = UNINITIALIZED; goto out; }                                  \
    if ((uintptr_t)(dev) < HANDLE_BASE || idx >= device_count()) { _rc = INVALID_ARGUMENT; goto out; } \
    if ((_rc = injected((int)idx, fn)) != OK) goto out;

#define LEAVE out: pthread_mutex_unlock(&lock); return _rc;

#define GET_U(dev, fn, field, ptr, type)                                                  \
    ENTER_DEVICE(dev, fn)                                                                \
    unsigned long long _v;                                                               \
    if (!(ptr)) { _rc = INVALID_ARGUMENT; goto out; }                                    \
    if (!gpu_u64(idx, field, &_v)) { _rc = NOT_SUPPORTED; goto out; }                    \
    *(ptr) = (type)_v;                                                                   \
    LEAVE

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&lock);
    load();
    nvmlReturn_t rc = injected(-1, "nvmlInitWithFlags");
    if (rc == OK) init_count++;
    pthread_mutex_unlock(&lock);
    return rc;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    nvmlReturn_t rc = init_count ? OK : UNINITIALIZED;
    if (init_count) init_count--;
    pthread_mutex_unlock(&lock);
    return rc;
}

const char *nvmlErrorString(nvmlReturn_t rc) {
    for (size_t i = 0; i < sizeof ERRORS / sizeof ERRORS[0]; i++)
        if (ERRORS[i].code == rc) return ERRORS[i].name;
    return "UNKNOWN";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    pthread_mutex_lock(&lock);
    load();
    nvmlReturn_t rc = OK;
    char buf[96];
    if (!init_count) rc = UNINITIALIZED;
    else if (!lookup("driver_version", buf, sizeof buf)) rc = NOT_SUPPORTED;
    else if (strlen(buf) + 1 > length) rc = INSUFFICIENT_SIZE;
    else strcpy(version, buf);
    pthread_mutex_unlock(&lock);
    return rc;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    pthread_mutex_lock(&lock);
    load();
    nvmlReturn_t rc = init_count ? injected(-1, "nvmlDeviceGetCount_v2") : UNINITIALIZED;
    if (rc == OK) *count = device_count();
    pthread_mutex_unlock(&lock);
    return rc;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    pthread_mutex_lock(&lock);
    load();
    nvmlReturn_t rc = OK;
    if (!init_count) rc = UNINITIALIZED;
    else if (index >= device_count()) rc = INVALID_ARGUMENT;
    else if ((rc = injected((int)index, "nvmlDeviceGetHandleByIndex_v2")) == OK) *device = handle_of(index);
    pthread_mutex_unlock(&lock);
    return rc;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    pthread_mutex_lock(&lock);
    load();
    nvmlReturn_t rc = init_count ? NOT_FOUND : UNINITIALIZED;
    char buf[96];
    for (unsigned i = 0; init_count && uuid && i < device_count(); i++) {
        if (gpu_lookup(i, "uuid", buf, sizeof buf) && !strcmp(buf, uuid)) {
            rc = injected((int)i, "nvmlDeviceGetHandleByUUID");
            if (rc == OK) *device = handle_of(i);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    ENTER_DEVICE(device, "nvmlDeviceGetIndex")
    *index = idx;
    LEAVE
}

static nvmlReturn_t get_string(nvmlDevice_t device, const char *fn, const char *field, char *out,
                               unsigned int length) {
    ENTER_DEVICE(device, fn)
    char buf[128];
    if (!gpu_lookup(idx, field, buf, sizeof buf)) { _rc = NOT_SUPPORTED; goto out; }
    if (strlen(buf) + 1 > length) { _rc = INSUFFICIENT_SIZE; goto out; }
    strcpy(out, buf);
    LEAVE
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    return get_string(d, "nvmlDeviceGetName", "name", name, length);
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    return get_string(d, "nvmlDeviceGetUUID", "uuid", uuid, length);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *power_mw) {
    GET_U(d, "nvmlDeviceGetPowerUsage", "power_mw", power_mw, unsigned int)
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *energy_mj) {
    GET_U(d, "nvmlDeviceGetTotalEnergyConsumption", "energy_mj_total", energy_mj, unsigned long long)
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *limit_mw) {
    GET_U(d, "nvmlDeviceGetPowerManagementLimit", "power_limit_mw", limit_mw, unsigned int)
}
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *limit_mw) {
    GET_U(d, "nvmlDeviceGetPowerManagementDefaultLimit", "power_limit_default_mw", limit_mw, unsigned int)
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *limit_mw) {
    ENTER_DEVICE(d, "nvmlDeviceGetEnforcedPowerLimit")
    unsigned long long v;
    if (!gpu_u64(idx, "enforced_power_limit_mw", &v) && !gpu_u64(idx, "power_limit_mw", &v)) {
        _rc = NOT_SUPPORTED;
        goto out;
    }
    *limit_mw = (unsigned int)v;
    LEAVE
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned int *min_mw,
                                                          unsigned int *max_mw) {
    ENTER_DEVICE(d, "nvmlDeviceGetPowerManagementLimitConstraints")
    unsigned long long lo, hi;
    if (!gpu_u64(idx, "power_limit_min_mw", &lo) || !gpu_u64(idx, "power_limit_max_mw", &hi)) {
        _rc = NOT_SUPPORTED;
        goto out;
    }
    *min_mw = (unsigned int)lo;
    *max_mw = (unsigned int)hi;
    LEAVE
}
nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t d, unsigned int limit_mw) {
    ENTER_DEVICE(d, "nvmlDeviceSetPowerManagementLimit")
    unsigned long long lo, hi;
    if (!gpu_u64(idx, "power_limit_min_mw", &lo) || !gpu_u64(idx, "power_limit_max_mw", &hi)) {
        _rc = NOT_SUPPORTED;
        goto out;
    }
    if (limit_mw < lo || limit_mw > hi) { _rc = INVALID_ARGUMENT; goto out; }
    char line[96];
    snprintf(line, sizeof line, "gpu%u.power_limit_mw %u\n", idx, limit_mw);
    _rc = append_state(line);
    LEAVE
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp_c) {
    ENTER_DEVICE(d, "nvmlDeviceGetTemperature")
    unsigned long long v;
    if (sensor != 0) { _rc = INVALID_ARGUMENT; goto out; }
    if (!gpu_u64(idx, "temp_c", &v)) { _rc = NOT_SUPPORTED; goto out; }
    *temp_c = (unsigned int)v;
    LEAVE
}

/* SM clock reads as min(sm_clock_mhz, locked max) while clocks are locked. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *clock_mhz) {
    ENTER_DEVICE(d, "nvmlDeviceGetClockInfo")
    unsigned long long v, locked = 0;
    const char *field = type == 2 ? "mem_clock_mhz" : (type == 0 || type == 1) ? "sm_clock_mhz" : NULL;
    if (!field) { _rc = INVALID_ARGUMENT; goto out; }
    if (!gpu_u64(idx, field, &v)) { _rc = NOT_SUPPORTED; goto out; }
    if (type != 2 && gpu_u64(idx, "locked_sm_clock_max_mhz", &locked) && locked && v > locked) v = locked;
    *clock_mhz = (unsigned int)v;
    LEAVE
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *clock_mhz) {
    ENTER_DEVICE(d, "nvmlDeviceGetMaxClockInfo")
    unsigned long long v;
    const char *field = type == 2 ? "max_mem_clock_mhz" : (type == 0 || type == 1) ? "max_sm_clock_mhz" : NULL;
    if (!field) { _rc = INVALID_ARGUMENT; goto out; }
    if (!gpu_u64(idx, field, &v)) { _rc = NOT_SUPPORTED; goto out; }
    *clock_mhz = (unsigned int)v;
    LEAVE
}
/* The supported clock lists, NVML's two-call way: count too small (or no array) answers
 * INSUFFICIENT_SIZE with the count needed. One memory clock (max_mem_clock_mhz); SM clocks from
 * max_sm_clock_mhz down to min_sm_clock_mhz in 15 MHz steps, highest first, as the driver lists them. */
static nvmlReturn_t fill_clocks(unsigned int *count, unsigned int *clocks, unsigned int top,
                                unsigned int bottom, unsigned int step) {
    unsigned int n = top >= bottom ? (top - bottom) / step + 1 : 0;
    if (n && (top - bottom) % step) n++; /* the lowest clock is always listed */
    if (*count < n || (n && !clocks)) { *count = n; return INSUFFICIENT_SIZE; }
    for (unsigned int i = 0; i < n; i++) clocks[i] = i + 1 == n ? bottom : top - i * step;
    *count = n;
    return OK;
}
nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *count, unsigned int *clocks_mhz) {
    ENTER_DEVICE(d, "nvmlDeviceGetSupportedMemoryClocks")
    unsigned long long mem;
    if (!gpu_u64(idx, "max_mem_clock_mhz", &mem)) { _rc = NOT_SUPPORTED; goto out; }
    _rc = fill_clocks(count, clocks_mhz, (unsigned int)mem, (unsigned int)mem, 1);
    LEAVE
}
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int mem_mhz, unsigned int *count,
                                                  unsigned int *clocks_mhz) {
    ENTER_DEVICE(d, "nvmlDeviceGetSupportedGraphicsClocks")
    unsigned long long mem, top, bottom;
    if (!gpu_u64(idx, "max_mem_clock_mhz", &mem) || !gpu_u64(idx, "max_sm_clock_mhz", &top)
        || !gpu_u64(idx, "min_sm_clock_mhz", &bottom)) { _rc = NOT_SUPPORTED; goto out; }
    if (mem_mhz != mem) { _rc = NOT_FOUND; goto out; }
    _rc = fill_clocks(count, clocks_mhz, (unsigned int)top, (unsigned int)bottom, 15);
    LEAVE
}
nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int min_mhz, unsigned int max_mhz) {
    ENTER_DEVICE(d, "nvmlDeviceSetGpuLockedClocks")
    unsigned long long top;
    if (min_mhz > max_mhz) { _rc = INVALID_ARGUMENT; goto out; }
    if (gpu_u64(idx, "max_sm_clock_mhz", &top) && max_mhz > top) { _rc = INVALID_ARGUMENT; goto out; }
    char line[160];
    snprintf(line, sizeof line, "gpu%u.locked_sm_clock_min_mhz %u\ngpu%u.locked_sm_clock_max_mhz %u\n",
             idx, min_mhz, idx, max_mhz);
    _rc = append_state(line);
    LEAVE
}
nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d) {
    ENTER_DEVICE(d, "nvmlDeviceResetGpuLockedClocks")
    char line[160];
    snprintf(line, sizeof line, "gpu%u.locked_sm_clock_min_mhz 0\ngpu%u.locked_sm_clock_max_mhz 0\n", idx, idx);
    _rc = append_state(line);
    LEAVE
}

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *util) {
    ENTER_DEVICE(d, "nvmlDeviceGetUtilizationRates")
    unsigned long long g, m;
    if (!gpu_u64(idx, "util_gpu_pct", &g) || !gpu_u64(idx, "util_mem_pct", &m)) { _rc = NOT_SUPPORTED; goto out; }
    util->gpu = (unsigned int)g;
    util->memory = (unsigned int)m;
    LEAVE
}

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *mem) {
    ENTER_DEVICE(d, "nvmlDeviceGetMemoryInfo")
    unsigned long long total, used;
    if (!gpu_u64(idx, "mem_total_mib", &total) || !gpu_u64(idx, "mem_used_mib", &used)) { _rc = NOT_SUPPORTED; goto out; }
    mem->total = total << 20;
    mem->used = used << 20;
    mem->free = mem->total > mem->used ? mem->total - mem->used : 0;
    LEAVE
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned int *kb_per_s) {
    ENTER_DEVICE(d, "nvmlDeviceGetPcieThroughput")
    unsigned long long v;
    const char *field = counter == 0 ? "pcie_tx_kb_per_s" : counter == 1 ? "pcie_rx_kb_per_s" : NULL;
    if (!field) { _rc = INVALID_ARGUMENT; goto out; }
    if (!gpu_u64(idx, field, &v)) { _rc = NOT_SUPPORTED; goto out; }
    *kb_per_s = (unsigned int)v;
    LEAVE
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, int *pstate) {
    GET_U(d, "nvmlDeviceGetPerformanceState", "pstate", pstate, int)
}

/* The bitmask under its name from driver 535 on, and under the older one: see the header comment. */
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons) {
    GET_U(d, "nvmlDeviceGetCurrentClocksEventReasons", "clock_event_reasons", reasons, unsigned long long)
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons) {
    GET_U(d, "nvmlDeviceGetCurrentClocksThrottleReasons", "clock_event_reasons", reasons, unsigned long long)
}

typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    ENTER_DEVICE(d, "nvmlDeviceGetComputeRunningProcesses_v3")
    char buf[1024];
    unsigned n = 0;
    nvmlProcessInfo_t found[64];
    if (gpu_lookup(idx, "processes", buf, sizeof buf)) {
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok && n < 64; tok = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(tok, ':');
            found[n].pid = (unsigned int)strtoul(tok, NULL, 10);
            found[n].usedGpuMemory = colon ? strtoull(colon + 1, NULL, 10) << 20 : 0xFFFFFFFFFFFFFFFFull;
            found[n].gpuInstanceId = found[n].computeInstanceId = 0xFFFFFFFFu;
            n++;
        }
    }
    if (*count < n || (n && !infos)) { *count = n; _rc = INSUFFICIENT_SIZE; goto out; }
    for (unsigned i = 0; i < n; i++) infos[i] = found[i];
    *count = n;
    LEAVE
}

/* Only NVML_FI_DEV_MEMORY_TEMP (82) is known; other fields answer NOT_SUPPORTED per entry. */
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    union { double d; unsigned int ui; unsigned long ul; unsigned long long ull; long long sll; int si; unsigned short us; } value;
} nvmlFieldValue_t;
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    ENTER_DEVICE(d, "nvmlDeviceGetFieldValues")
    struct timeval now;
    gettimeofday(&now, NULL);
    for (int i = 0; i < count; i++) {
        unsigned long long v, links = 0;
        /* the driver stamps each value with when it was read, us since the epoch */
        values[i].timestamp = (long long)now.tv_sec * 1000000LL + now.tv_usec;
        values[i].latencyUsec = 0;
        const char *nvlink_key = values[i].fieldId == 90 ? "nvlink_speed_mbps" :
                                 values[i].fieldId == 91 ? "nvlink_link_count" :
                                 values[i].fieldId == 138 ? "nvlink_tx_kib_total" :
                                 values[i].fieldId == 139 ? "nvlink_rx_kib_total" : NULL;
        if (nvlink_key) {
            gpu_u64(idx, "nvlink_link_count", &links);
            if (!gpu_u64(idx, nvlink_key, &v)) {
                values[i].nvmlReturn = NOT_SUPPORTED;
            } else if (values[i].fieldId >= 138 && values[i].scopeId != 0xFFFFFFFFu && values[i].scopeId >= links) {
                /* throughput counters take a link in scopeId, or UINT_MAX for all links summed */
                values[i].nvmlReturn = INVALID_ARGUMENT;
            } else {
                if (values[i].fieldId >= 138 && values[i].scopeId != 0xFFFFFFFFu) v /= links;
                values[i].valueType = values[i].fieldId >= 138 ? 3 : 1;  /* ULL counters, UINT otherwise */
                if (values[i].valueType == 3) values[i].value.ull = v; else values[i].value.ui = (unsigned int)v;
                values[i].nvmlReturn = OK;
            }
        } else if (values[i].fieldId == 82 && gpu_u64(idx, "mem_temp_c", &v)) {
            /* the driver chooses the union member: unsigned int on today's drivers (type 1);
               the state may name another to check that the reader follows valueType */
            unsigned long long type = 1;
            gpu_u64(idx, "mem_temp_value_type", &type);
            values[i].valueType = (int)type;
            switch (type) {
                case 0: values[i].value.d = (double)v; break;
                case 3: values[i].value.ull = v; break;
                case 5: values[i].value.si = (int)v; break;
                default: values[i].value.ui = (unsigned int)v;
            }
            values[i].nvmlReturn = OK;
        } else {
            values[i].nvmlReturn = NOT_SUPPORTED;
        }
    }
    LEAVE
}
