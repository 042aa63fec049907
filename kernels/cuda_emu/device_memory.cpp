// Device memory (cudaMalloc's) closed to host code. Host and device memory are one here, so host code that
// dereferences a cudaMalloc pointer (a missing cudaMemcpy) would read the bytes, where on a GPU machine it crashes or
// reads garbage. So each allocation has pages of its own (its size rounded up to pages, the bytes past its end
// poisoned for AddressSanitizer, then a guard page), kept PROT_NONE except to device work: while a stream operation
// (a kernel, copy, memset, library routine) or a collective runs (DeviceWork, stream_order.h), the first access to an
// allocation faults and the SIGSEGV handler below opens its pages until that work ends. A fault outside device work
// is host code touching device memory: said with the allocation it hit, then AddressSanitizer's handler (or the
// default action) ends the process with the stack. A freed allocation stays mapped, closed, for the next 1024 frees:
// a use after cudaFree is said as such too.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION (no-ops without AddressSanitizer)

#include "kernels/cuda_emu/emu_internal.h"
#include "kernels/cuda_emu/stream_order.h"

namespace cuda_emu {
namespace {

struct Range {
    size_t bytes = 0;   // what cudaMalloc was asked for
    size_t pages = 0;   // the bytes of its pages, without the guard page after them
    bool open = false;  // readable and writable now (device work touched it)
    bool freed = false;  // cudaFree'd, kept closed for a while
};
// The handler takes g_range_mu: nothing that holds it touches device memory.
std::mutex g_range_mu;
std::map<uintptr_t, Range> g_ranges;  // by start address
std::vector<uintptr_t> g_opened;      // ranges opened by the device work running now
std::deque<uintptr_t> g_quarantine;   // freed ranges, oldest first
constexpr size_t kQuarantine = 1024;
std::atomic<int> g_device_work{0};
struct sigaction g_previous;

size_t page_size() {
    static const size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return p;
}

// The range holding address a (its pages or its guard page), or null; under g_range_mu.
Range* range_of(uintptr_t a, uintptr_t* lo) {
    auto it = g_ranges.upper_bound(a);
    if (it == g_ranges.begin()) return nullptr;
    --it;
    if (a - it->first >= it->second.pages + page_size()) return nullptr;
    *lo = it->first;
    return &it->second;
}

void open_range(uintptr_t lo, Range& r) {  // under g_range_mu, with device work running
    if (r.open || r.freed) return;
    mprotect(reinterpret_cast<void*>(lo), r.pages, PROT_READ | PROT_WRITE);
    r.open = true;
    g_opened.push_back(lo);
}

void say(const char* text) {  // from the signal handler: write(2), no stdio
    ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
}

void on_segv(int sig, siginfo_t* info, void* context) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
    {
        std::lock_guard<std::mutex> lock(g_range_mu);
        uintptr_t lo = 0;
        if (Range* r = range_of(a, &lo)) {
            const bool device = g_device_work > 0;
            if (!r->freed && device && a - lo < r->pages) {  // device work's first access: open it, and it runs again
                open_range(lo, *r);
                return;
            }
            char m[400];
            if (a - lo >= r->pages)  // the guard page (code AddressSanitizer does not see into: OpenBLAS, LAPACK)
                std::snprintf(m, sizeof m, "cuda_emu: an access %zu bytes past the end of a %zu-byte cudaMalloc "
                              "allocation at %p (the stack follows)\n", (size_t)(a - lo) - r->bytes, r->bytes,
                              reinterpret_cast<void*>(lo));
            else
                std::snprintf(m, sizeof m, "cuda_emu: %s touched %sdevice memory: byte %zu of a %zu-byte cudaMalloc "
                              "allocation at %p, %s (the stack follows)\n",
                              device ? "device work" : "host code", r->freed ? "freed " : "", (size_t)(a - lo),
                              r->bytes, reinterpret_cast<void*>(lo),
                              r->freed ? "after its cudaFree"
                                       : "outside any device work: on a GPU machine this crashes or reads garbage "
                                         "(copy it with cudaMemcpy)");
            say(m);
        }
    }
    // not one to open: AddressSanitizer's handler (the report and the stack), or the default action
    if (g_previous.sa_flags & SA_SIGINFO) {
        g_previous.sa_sigaction(sig, info, context);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        g_previous.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL);  // the access faults again and the process ends
    }
}

void install_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &g_previous);
    });
}

}  // namespace

void* device_memory_map(size_t bytes) {
    install_handler();
    const size_t pages = (bytes + page_size() - 1) / page_size() * page_size();
    void* p = mmap(nullptr, pages + page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return nullptr;
    char* c = static_cast<char*>(p);
    mprotect(c + pages, page_size(), PROT_NONE);  // the guard page
    // cudaMalloc does not clear: garbage, never a convenient value. 0x7f bytes read as 3.39e38 in fp32 and bf16 (and
    // 2.1e9 as int32), so a sum into an unzeroed buffer is far off (0xa5's -2.9e-16 was as good as a zero)
    std::memset(c, 0x7f, bytes);
    ASAN_POISON_MEMORY_REGION(c + bytes, pages - bytes);  // an overrun is AddressSanitizer's use-after-poison
    std::lock_guard<std::mutex> lock(g_range_mu);
    const bool open = g_device_work > 0;  // (made inside device work: closed when it ends)
    if (open) g_opened.push_back(reinterpret_cast<uintptr_t>(p));
    else mprotect(p, pages, PROT_NONE);
    g_ranges[reinterpret_cast<uintptr_t>(p)] = Range{bytes, pages, open, false};
    return p;
}

void device_memory_unmap(void* p) {
    std::lock_guard<std::mutex> lock(g_range_mu);
    auto it = g_ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == g_ranges.end()) return;
    Range& r = it->second;
    if (r.open) mprotect(p, r.pages, PROT_NONE), r.open = false;
    madvise(p, r.pages, MADV_DONTNEED);  // its memory back; the addresses stay taken
    r.freed = true;
    g_quarantine.push_back(it->first);
    if (g_quarantine.size() <= kQuarantine) return;
    auto old = g_ranges.find(g_quarantine.front());
    g_quarantine.pop_front();
    char* c = reinterpret_cast<char*>(old->first);
    mprotect(c, old->second.pages, PROT_READ | PROT_WRITE);  // (AddressSanitizer's shadow cleared for a later mapping)
    ASAN_UNPOISON_MEMORY_REGION(c, old->second.pages);
    munmap(c, old->second.pages + page_size());
    g_ranges.erase(old);
}

DeviceWork::DeviceWork(std::initializer_list<const void*> open_now) {
    g_device_work++;
    if (open_now.size() == 0) return;
    std::lock_guard<std::mutex> lock(g_range_mu);
    for (const void* p : open_now) {
        uintptr_t lo = 0;
        if (Range* r = p ? range_of(reinterpret_cast<uintptr_t>(p), &lo) : nullptr) open_range(lo, *r);
    }
}

DeviceWork::~DeviceWork() {
    if (--g_device_work > 0) return;
    std::lock_guard<std::mutex> lock(g_range_mu);
    if (g_device_work > 0) return;  // other work began meanwhile: it closes them
    for (uintptr_t lo : g_opened) {
        auto it = g_ranges.find(lo);
        if (it == g_ranges.end() || !it->second.open) continue;
        mprotect(reinterpret_cast<void*>(lo), it->second.pages, PROT_NONE);
        it->second.open = false;
    }
    g_opened.clear();
}

}  // namespace cuda_emu
