// A host-memory stand-in for the NVIDIA driver API (libcuda.so), for testing opdump's GPU
// code paths on machines without a GPU. Loaded by tests/mock_driver/mod.rs, which prepends
// the kernel source (HEAD + BODY with host shims), the block/warp emulation `run<K>` and the
// table `KERNELS` of the module's entry points.
//
// What it models, so that orchestration bugs show up as test failures:
// - device memory is host memory, tracked per allocation; every copy and kernel argument
//   range must lie inside one live allocation (else CUDA_ERROR_INVALID_VALUE);
// - streams are lazy FIFOs: an asynchronous copy or launch runs only when something waits
//   for it (stream/event/context synchronisation), so reading a pinned buffer before its
//   event completed sees stale bytes;
// - freeing memory that a pending operation still uses is logged as a HAZARD;
// - cuModuleGetFunction finds only names present both in the loaded image (CUBIN or PTX)
//   and in the kernel table;
// - a launch must use BLOCK_THREADS threads, no dynamic shared memory, and `aligned == 1`
//   only for 16-byte aligned data;
// - opdump_mock_fail(name, code, skip) makes the (skip+1)-th next call of `name` fail.
// Every API call is appended to a log that tests read with opdump_mock_log.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    ERR_INVALID_VALUE = 1,
    ERR_OUT_OF_MEMORY = 2,
    ERR_NOT_INITIALIZED = 3,
    ERR_INVALID_DEVICE = 101,
    ERR_INVALID_IMAGE = 200,
    ERR_INVALID_CONTEXT = 201,
    ERR_INVALID_HANDLE = 400,
    ERR_NOT_FOUND = 500,
    ERR_NOT_READY = 600,
    ERR_MISALIGNED_ADDRESS = 716,
    ERR_LAUNCH_FAILED = 719,
    ERR_NOT_SUPPORTED = 801,
};

namespace {

struct Op {
    std::vector<std::pair<uintptr_t, size_t>> touches;
    std::function<void()> run;
};

struct Stream {
    std::deque<Op> pending;
    uint64_t issued = 0, executed = 0;
};

struct Event {
    Stream* stream = nullptr;
    uint64_t seq = 0;
};

struct Module {
    std::string image;
};

struct Function {
    const KernelEntry* entry;
};

struct Failure {
    std::string name;
    int code;
    int skip;
};

struct State {
    std::mutex mu;
    bool initialised = false;
    int ctx_token = 0;  // the primary context's handle points here
    void* current = nullptr;
    Stream null_stream;
    std::vector<Stream*> streams{&null_stream};
    std::map<uintptr_t, size_t> device, pinned;
    std::vector<std::string> log;
    std::vector<Failure> failures;
};

State& st() {
    static State* s = new State;  // never destroyed: no order-of-destruction issues at exit
    return *s;
}

void note(State& s, std::string line) { s.log.push_back(std::move(line)); }

std::string hex(uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    return b;
}

// Returns the injected error for `name`, or OK.
int injected(State& s, const char* name) {
    for (size_t i = 0; i < s.failures.size(); ++i) {
        Failure& f = s.failures[i];
        if (f.name != name) continue;
        if (f.skip > 0) {
            --f.skip;
            continue;
        }
        int code = f.code;
        s.failures.erase(s.failures.begin() + i);
        note(s, std::string("  injected failure ") + std::to_string(code));
        return code;
    }
    return OK;
}

bool inside(const std::map<uintptr_t, size_t>& m, uintptr_t p, size_t len) {
    auto it = m.upper_bound(p);
    if (it == m.begin()) return false;
    --it;
    return p >= it->first && p - it->first <= it->second && len <= it->second - (p - it->first);
}

Stream* stream_of(State& s, void* h) {
    if (h == nullptr || h == (void*)1 || h == (void*)2) return &s.null_stream;
    for (Stream* x : s.streams)
        if ((void*)x == h) return x;
    return nullptr;
}

void enqueue(Stream* q, Op op) {
    q->pending.push_back(std::move(op));
    q->issued++;
}

void run_until(Stream* q, uint64_t seq) {
    while (q->executed < seq && !q->pending.empty()) {
        Op op = std::move(q->pending.front());
        q->pending.pop_front();
        op.run();
        q->executed++;
    }
}

void drain_all(State& s) {
    for (Stream* q : s.streams) run_until(q, q->issued);
}

bool ranges_overlap(uintptr_t a, size_t al, uintptr_t b, size_t bl) {
    return a < b + bl && b < a + al;
}

void check_free(State& s, const char* what, uintptr_t p, size_t len) {
    for (Stream* q : s.streams)
        for (const Op& op : q->pending)
            for (auto& t : op.touches)
                if (ranges_overlap(p, len, t.first, t.second))
                    note(s, std::string("HAZARD ") + what + " " + hex(p) +
                                " while a pending operation uses it");
}

size_t image_len(const unsigned char* img) {
    if (img[0] == 0x7f && img[1] == 'E' && img[2] == 'L' && img[3] == 'F' && img[4] == 2) {
        uint64_t shoff;
        uint16_t shentsize, shnum;
        memcpy(&shoff, img + 0x28, 8);
        memcpy(&shentsize, img + 0x3a, 2);
        memcpy(&shnum, img + 0x3c, 2);
        return (size_t)(shoff + (uint64_t)shentsize * shnum);
    }
    return strlen((const char*)img);
}

}  // namespace

#define API(NAME)                    \
    State& s = st();                 \
    std::lock_guard<std::mutex> g(s.mu); \
    if (int e = injected(s, NAME)) return e;

extern "C" {

// ---- test controls --------------------------------------------------------------------

// The (skip+1)-th next call of `name` returns `code`.
void opdump_mock_fail(const char* name, int code, int skip) {
    State& s = st();
    std::lock_guard<std::mutex> g(s.mu);
    s.failures.push_back({name, code, skip});
}

// Copies the log (one call a line) into buf; returns its full length. Clears it when
// `clear` is non-zero.
size_t opdump_mock_log(char* buf, size_t cap, int clear) {
    State& s = st();
    std::lock_guard<std::mutex> g(s.mu);
    std::string all;
    for (auto& l : s.log) all += l + "\n";
    if (buf && cap) {
        size_t n = std::min(cap - 1, all.size());
        memcpy(buf, all.data(), n);
        buf[n] = 0;
    }
    if (clear) s.log.clear();
    return all.size();
}

// Live device allocations (bytes), to check that nothing leaks.
size_t opdump_mock_device_bytes(void) {
    State& s = st();
    std::lock_guard<std::mutex> g(s.mu);
    size_t n = 0;
    for (auto& a : s.device) n += a.second;
    return n;
}

// ---- initialisation, devices, contexts ------------------------------------------------

CUresult cuInit(unsigned flags) {
    API("cuInit");
    note(s, "cuInit");
    if (flags != 0) return ERR_INVALID_VALUE;
    s.initialised = true;
    return OK;
}

CUresult cuDriverGetVersion(int* v) {
    API("cuDriverGetVersion");
    *v = 12080;
    return OK;
}

CUresult cuDeviceGetCount(int* n) {
    API("cuDeviceGetCount");
    if (!s.initialised) return ERR_NOT_INITIALIZED;
    *n = 1;
    return OK;
}

CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    API("cuDeviceGet");
    note(s, "cuDeviceGet " + std::to_string(ordinal));
    if (!s.initialised) return ERR_NOT_INITIALIZED;
    if (ordinal != 0) return ERR_INVALID_DEVICE;
    *d = 0;
    return OK;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    API("cuDeviceGetName");
    if (d != 0 || len <= 0) return ERR_INVALID_VALUE;
    snprintf(name, (size_t)len, "opdump mock GPU");
    return OK;
}

CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice d) {
    API("cuDeviceGetAttribute");
    if (d != 0) return ERR_INVALID_DEVICE;
    switch (attr) {
        case 75: *v = 9; break;    // compute capability major
        case 76: *v = 0; break;    // minor
        case 115: *v = 0; break;   // memory pools: no (cuMemAlloc, not cuMemAllocAsync)
        case 16: *v = 132; break;  // multiprocessors
        default: *v = 0;
    }
    return OK;
}

CUresult cuDevicePrimaryCtxRetain(void** ctx, CUdevice d) {
    API("cuDevicePrimaryCtxRetain");
    note(s, "cuDevicePrimaryCtxRetain");
    if (d != 0) return ERR_INVALID_DEVICE;
    *ctx = &s.ctx_token;
    return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    API("cuDevicePrimaryCtxRelease_v2");
    return d == 0 ? OK : ERR_INVALID_DEVICE;
}

CUresult cuCtxSetCurrent(void* ctx) {
    API("cuCtxSetCurrent");
    if (ctx != nullptr && ctx != &s.ctx_token) return ERR_INVALID_CONTEXT;
    s.current = ctx;
    return OK;
}

CUresult cuCtxGetCurrent(void** ctx) {
    API("cuCtxGetCurrent");
    *ctx = s.current;
    return OK;
}

CUresult cuCtxGetDevice(CUdevice* d) {
    API("cuCtxGetDevice");
    *d = 0;
    return OK;
}

CUresult cuCtxSynchronize(void) {
    API("cuCtxSynchronize");
    note(s, "cuCtxSynchronize");
    drain_all(s);
    return OK;
}

// ---- streams and events ---------------------------------------------------------------

CUresult cuStreamCreate(void** h, unsigned flags) {
    API("cuStreamCreate");
    (void)flags;
    Stream* q = new Stream;
    s.streams.push_back(q);
    *h = q;
    return OK;
}

CUresult cuStreamCreateWithPriority(void** h, unsigned flags, int prio) {
    (void)prio;
    return cuStreamCreate(h, flags);
}

CUresult cuStreamDestroy_v2(void* h) {
    API("cuStreamDestroy_v2");
    Stream* q = stream_of(s, h);
    if (!q || q == &s.null_stream) return ERR_INVALID_HANDLE;
    run_until(q, q->issued);  // the driver finishes queued work before destroying
    s.streams.erase(std::find(s.streams.begin(), s.streams.end(), q));
    delete q;
    return OK;
}

CUresult cuStreamSynchronize(void* h) {
    API("cuStreamSynchronize");
    Stream* q = stream_of(s, h);
    if (!q) return ERR_INVALID_HANDLE;
    note(s, "cuStreamSynchronize");
    run_until(q, q->issued);
    return OK;
}

CUresult cuStreamQuery(void* h) {
    API("cuStreamQuery");
    Stream* q = stream_of(s, h);
    if (!q) return ERR_INVALID_HANDLE;
    run_until(q, q->executed + 1);  // progress one operation per query
    return q->executed == q->issued ? OK : ERR_NOT_READY;
}

CUresult cuEventCreate(void** h, unsigned flags) {
    API("cuEventCreate");
    (void)flags;
    *h = new Event;
    return OK;
}

CUresult cuEventDestroy_v2(void* h) {
    API("cuEventDestroy_v2");
    delete (Event*)h;
    return OK;
}

CUresult cuEventRecord(void* h, void* stream) {
    API("cuEventRecord");
    Stream* q = stream_of(s, stream);
    if (!q || !h) return ERR_INVALID_HANDLE;
    Event* e = (Event*)h;
    e->stream = q;
    e->seq = q->issued;
    return OK;
}

CUresult cuEventRecordWithFlags(void* h, void* stream, unsigned flags) {
    (void)flags;
    return cuEventRecord(h, stream);
}

CUresult cuEventSynchronize(void* h) {
    API("cuEventSynchronize");
    Event* e = (Event*)h;
    if (!e) return ERR_INVALID_HANDLE;
    uint64_t before = e->stream ? e->stream->executed : 0;
    if (e->stream) run_until(e->stream, e->seq);
    uint64_t ran = e->stream ? e->stream->executed - before : 0;
    note(s, "cuEventSynchronize ran " + std::to_string(ran));
    return OK;
}

CUresult cuEventQuery(void* h) {
    API("cuEventQuery");
    Event* e = (Event*)h;
    if (!e) return ERR_INVALID_HANDLE;
    if (!e->stream) return OK;
    run_until(e->stream, std::min(e->seq, e->stream->executed + 1));
    return e->stream->executed >= e->seq ? OK : ERR_NOT_READY;
}

CUresult cuStreamWaitEvent(void* stream, void* h, unsigned flags) {
    API("cuStreamWaitEvent");
    (void)flags;
    Event* e = (Event*)h;
    if (!e || !stream_of(s, stream)) return ERR_INVALID_HANDLE;
    // Cross-stream order: the simplest correct model completes the awaited work now.
    if (e->stream) run_until(e->stream, e->seq);
    return OK;
}

// ---- memory ---------------------------------------------------------------------------

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
    API("cuMemAlloc_v2");
    note(s, "cuMemAlloc_v2 " + std::to_string(bytes));
    size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    void* m = aligned_alloc(256, rounded);
    if (!m) return ERR_OUT_OF_MEMORY;
    memset(m, 0xA5, rounded);  // device memory is not zeroed
    s.device[(uintptr_t)m] = bytes;
    *p = (CUdeviceptr)(uintptr_t)m;
    return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    API("cuMemFree_v2");
    note(s, "cuMemFree_v2");
    auto it = s.device.find((uintptr_t)p);
    if (it == s.device.end()) return ERR_INVALID_VALUE;
    check_free(s, "cuMemFree", (uintptr_t)p, it->second);
    drain_all(s);  // the driver waits for work that uses the memory
    free((void*)(uintptr_t)p);
    s.device.erase(it);
    return OK;
}

CUresult cuMemFreeAsync(CUdeviceptr p, void* stream) {
    (void)stream;
    return cuMemFree_v2(p);
}

CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned flags) {
    API("cuMemHostAlloc");
    note(s, "cuMemHostAlloc " + std::to_string(bytes) + " flags " + std::to_string(flags));
    size_t rounded = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
    void* m = aligned_alloc(4096, rounded);
    if (!m) return ERR_OUT_OF_MEMORY;
    memset(m, 0xCD, rounded);
    s.pinned[(uintptr_t)m] = bytes;
    *p = m;
    return OK;
}

CUresult cuMemFreeHost(void* p) {
    API("cuMemFreeHost");
    auto it = s.pinned.find((uintptr_t)p);
    if (it == s.pinned.end()) return ERR_INVALID_VALUE;
    check_free(s, "cuMemFreeHost", (uintptr_t)p, it->second);
    drain_all(s);
    free(p);
    s.pinned.erase(it);
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, void* stream) {
    API("cuMemsetD8Async");
    Stream* q = stream_of(s, stream);
    if (!q) return ERR_INVALID_HANDLE;
    if (!inside(s.device, (uintptr_t)p, n)) return ERR_INVALID_VALUE;
    enqueue(q, {{{(uintptr_t)p, n}}, [p, v, n] { memset((void*)(uintptr_t)p, v, n); }});
    return OK;
}

CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
    API("cuMemsetD8_v2");
    if (!inside(s.device, (uintptr_t)p, n)) return ERR_INVALID_VALUE;
    drain_all(s);
    memset((void*)(uintptr_t)p, v, n);
    return OK;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* stream) {
    API("cuMemcpyHtoDAsync_v2");
    note(s, "cuMemcpyHtoDAsync " + std::to_string(n));
    Stream* q = stream_of(s, stream);
    if (!q) return ERR_INVALID_HANDLE;
    if (!inside(s.device, (uintptr_t)dst, n)) return ERR_INVALID_VALUE;
    if (inside(s.pinned, (uintptr_t)src, n)) {
        enqueue(q, {{{(uintptr_t)dst, n}, {(uintptr_t)src, n}},
                    [dst, src, n] { memcpy((void*)(uintptr_t)dst, src, n); }});
    } else {
        // From pageable memory the driver stages the bytes before returning.
        std::vector<unsigned char> staged((const unsigned char*)src, (const unsigned char*)src + n);
        enqueue(q, {{{(uintptr_t)dst, n}},
                    [dst, staged] { memcpy((void*)(uintptr_t)dst, staged.data(), staged.size()); }});
    }
    return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    API("cuMemcpyHtoD_v2");
    if (!inside(s.device, (uintptr_t)dst, n)) return ERR_INVALID_VALUE;
    drain_all(s);
    memcpy((void*)(uintptr_t)dst, src, n);
    return OK;
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
    API("cuMemcpyDtoHAsync_v2");
    note(s, "cuMemcpyDtoHAsync " + std::to_string(n) +
                (inside(s.pinned, (uintptr_t)dst, n) ? " pinned" : " pageable"));
    Stream* q = stream_of(s, stream);
    if (!q) return ERR_INVALID_HANDLE;
    if (!inside(s.device, (uintptr_t)src, n)) return ERR_INVALID_VALUE;
    enqueue(q, {{{(uintptr_t)src, n}, {(uintptr_t)dst, n}},
                [dst, src, n] { memcpy(dst, (const void*)(uintptr_t)src, n); }});
    return OK;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    API("cuMemcpyDtoH_v2");
    if (!inside(s.device, (uintptr_t)src, n)) return ERR_INVALID_VALUE;
    drain_all(s);
    memcpy(dst, (const void*)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
    API("cuMemcpyDtoDAsync_v2");
    Stream* q = stream_of(s, stream);
    if (!q) return ERR_INVALID_HANDLE;
    if (!inside(s.device, (uintptr_t)src, n) || !inside(s.device, (uintptr_t)dst, n))
        return ERR_INVALID_VALUE;
    enqueue(q, {{{(uintptr_t)src, n}, {(uintptr_t)dst, n}},
                [dst, src, n] { memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n); }});
    return OK;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
    API("cuMemGetInfo_v2");
    *total = (size_t)80 << 30;
    size_t used = 0;
    for (auto& a : s.device) used += a.second;
    *free_bytes = *total - used;
    return OK;
}

// ---- modules and launches -------------------------------------------------------------

CUresult cuModuleLoadData(void** m, const void* image) {
    API("cuModuleLoadData");
    if (!image) return ERR_INVALID_VALUE;
    const unsigned char* img = (const unsigned char*)image;
    size_t len = image_len(img);
    bool elf = img[0] == 0x7f && img[1] == 'E';
    note(s, std::string("cuModuleLoadData ") + (elf ? "cubin" : "ptx"));
    if (!elf && std::string((const char*)img, len).find(".version") == std::string::npos)
        return ERR_INVALID_IMAGE;
    Module* mod = new Module;
    mod->image.assign((const char*)img, len);
    *m = mod;
    return OK;
}

CUresult cuModuleUnload(void* m) {
    API("cuModuleUnload");
    delete (Module*)m;
    return OK;
}

CUresult cuModuleGetFunction(void** f, void* m, const char* name) {
    API("cuModuleGetFunction");
    Module* mod = (Module*)m;
    if (!mod || !name) return ERR_INVALID_VALUE;
    if (mod->image.find(name) == std::string::npos) return ERR_NOT_FOUND;
    for (const KernelEntry& k : KERNELS) {
        if (strcmp(k.name, name) == 0) {
            *f = new Function{&k};
            return OK;
        }
    }
    return ERR_NOT_FOUND;
}

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shmem, void* stream, void** params,
                        void** extra) {
    API("cuLaunchKernel");
    Function* fn = (Function*)f;
    if (!fn || !params || extra) return ERR_INVALID_VALUE;
    Stream* q = stream_of(s, stream);
    if (!q) return ERR_INVALID_HANDLE;
    note(s, std::string("cuLaunchKernel ") + fn->entry->name + " grid " + std::to_string(gx) +
                " block " + std::to_string(bx));
    if (gx == 0 || gy != 1 || gz != 1 || bx != BLOCK_THREADS || by != 1 || bz != 1 || shmem != 0)
        return ERR_INVALID_VALUE;
    // The kernel's parameters: (const raw_t* data, u64 n, int aligned, Partial* out).
    CUdeviceptr data = *(CUdeviceptr*)params[0];
    u64 n = *(u64*)params[1];
    int aligned = *(int*)params[2];
    CUdeviceptr out = *(CUdeviceptr*)params[3];
    size_t in_bytes = (size_t)n * fn->entry->elem_size;
    size_t out_bytes = (size_t)gx * sizeof(Partial);
    if (!inside(s.device, (uintptr_t)data, in_bytes) || !inside(s.device, (uintptr_t)out, out_bytes))
        return ERR_INVALID_VALUE;
    if (data % fn->entry->elem_size != 0 || (aligned && data % 16 != 0) || out % 8 != 0)
        return ERR_MISALIGNED_ADDRESS;
    const KernelEntry* k = fn->entry;
    enqueue(q, {{{(uintptr_t)data, in_bytes}, {(uintptr_t)out, out_bytes}},
                [k, data, n, gx, out] {
                    k->run((const void*)(uintptr_t)data, n, gx, (Partial*)(uintptr_t)out);
                }});
    return OK;
}

// ---- errors ---------------------------------------------------------------------------

CUresult cuGetErrorName(CUresult e, const char** out) {
    switch (e) {
        case OK: *out = "CUDA_SUCCESS"; break;
        case ERR_INVALID_VALUE: *out = "CUDA_ERROR_INVALID_VALUE"; break;
        case ERR_OUT_OF_MEMORY: *out = "CUDA_ERROR_OUT_OF_MEMORY"; break;
        case ERR_INVALID_DEVICE: *out = "CUDA_ERROR_INVALID_DEVICE"; break;
        case ERR_NOT_FOUND: *out = "CUDA_ERROR_NOT_FOUND"; break;
        case ERR_MISALIGNED_ADDRESS: *out = "CUDA_ERROR_MISALIGNED_ADDRESS"; break;
        case ERR_LAUNCH_FAILED: *out = "CUDA_ERROR_LAUNCH_FAILED"; break;
        default: *out = "CUDA_ERROR_UNKNOWN";
    }
    return OK;
}

CUresult cuGetErrorString(CUresult e, const char** out) {
    return cuGetErrorName(e, out);
}

}  // extern "C"
