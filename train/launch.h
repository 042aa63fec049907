// What a main does before its training loop: ranks (one process, or mpirun), flags -> config -> data paths, --help
// and --plan, then the device: the CUDA backend when a GPU is there (or asked for), else the CPU backend, and
// NCCL for GPU ranks. train_main hands the chosen backend to the main's own loop (train_gpt2.cu, train_llama.cu)
// and turns an error on any rank into a message and a non-zero exit of every rank.
#pragma once
#include <omp.h>
#include <sched.h>   // sched_getaffinity
#include <unistd.h>  // gethostname, sleep

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>  // getenv, setenv
#include <algorithm>
#include <map>
#include <memory>
#include <new>  // std::bad_alloc
#include <sstream>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/error.h"
#include "common/files.h"  // file_size_limit_as_error, closed_stdout_as_error
#include "common/strings.h"  // format, join
#include "kernels/cpu_backend.h"
// The CUDA backend is visible only where nvcc compiles (the .cu mains), or where the CPU execution layer does
// (kernels/cuda_emu/); C++ files that include this header see the CPU backend alone.
#if defined(PRAC_HAVE_CUDA) && (defined(__CUDACC__) || defined(PRAC_CUDA_EMU))
#define PRAC_CUDA_BACKEND 1
#include "kernels/cuda_backend.cuh"
#endif
#include "model/config.h"
#include "train/cli.h"
#include "train/comm.h"
#if defined(PRAC_CUDA_BACKEND) && defined(PRAC_HAVE_NCCL)
#include "train/comm_nccl.h"
#endif

// The CUDA build --plan plans by default (--precision): this one's, or bf16's (the default build) where this build
// has no CUDA backend. (The fp32 build's --plan planned the bf16 build's bytes.)
#if defined(PRAC_CUDA_BACKEND) && defined(PRAC_FP32)
inline const char* plan_precision_of_this_build() { return "fp32"; }
#else
inline const char* plan_precision_of_this_build() { return "bf16"; }
#endif

// The GPU a rank chose before MPI_Init (choose_gpu_before_mpi_init): device -1 when it chose none.
struct GpuBeforeMpi {
    int device = -1;
    std::string from;  // the launcher's variable it came from, "NAME=VALUE"
};

// Everything a training run is given, whatever the backend: the flags (completed with the model's defaults),
// the model's config, the PRAC options and the communicator (MPI, or NCCL for GPU ranks).
struct RunSetup {
    TrainOptions opts;
    ModelConfig cfg;
    PracOptions prac;
    Comm* comm = nullptr;
    const char* program = "";
    bool builtin = false;  // the data is the built-in corpus
    GpuBeforeMpi gpu_before_mpi;  // the GPU chosen before MPI_Init, if any
    std::string cpu_threads;      // the CPU backend's: cpu_threads_of_ranks ("" on the CUDA backend)
};

// Directory of the built-in corpus: next to the binary (binaries live at the repository root), else the
// source tree this binary was built from.
std::string builtin_data_dir();
// --plan: the memory plan of this config (and with --gpu-mem, the largest micro-batch that fits), then exit.
int print_plan(const TrainOptions& opts, const ModelConfig& cfg, const PracOptions& prac);

// Flags -> RunSetup. Returns false when the run ends here (--help, --plan: *exit_code is set).
bool make_run_setup(RunSetup& s, Arch arch, const char* program, int argc, char** argv, Comm& comm, int* exit_code);

// The backend a run uses: the CUDA backend for --device cuda, or for auto when a GPU is there (in a build with the
// CUDA backend); else the CPU backend. --device cuda without a usable GPU, or in a build without the CUDA backend,
// is a UserError with a hint.
struct DeviceChoice {
    bool cuda = false;
    int gpus = 0;     // usable GPUs on this node
    std::string why;  // why there are none
};
inline DeviceChoice choose_device(const std::string& device) {
    DeviceChoice d;
    d.gpus = cuda_device_count(&d.why);
#if defined(PRAC_CUDA_BACKEND)
    d.cuda = device == "cuda" || (device == "auto" && d.gpus > 0);
    if (d.cuda && d.gpus == 0) fail("--device cuda: no usable GPU (%s)\n---> HINT: use --device cpu", d.why.c_str());
#else
    if (device == "cuda")
        fail("--device cuda: this build has no CUDA backend (built without nvcc)\n---> HINT: rebuild where nvcc 13 is "
             "installed (make), or use --device cpu");
    if (d.gpus > 0)
        std::printf("notice: %d GPU(s) found, but this build has no CUDA backend: running on the CPU\n", d.gpus);
#endif
    return d;
}

#if defined(PRAC_CUDA_BACKEND)
inline void print_cuda_device(int dev, const std::string& chosen_from = "") {
    std::printf("device: CUDA GPU %d (%s storage%s)\n", dev, PRAC_FLOATX_NAME,
                chosen_from.empty() ? "" : ("; chosen before MPI_Init from " + chosen_from).c_str());
}

// An MPI library may open a CUDA context on the current GPU, GPU 0, for every rank inside MPI_Init (Open MPI 5 with
// its smcuda transport, MPICH): hundreds of MB per rank on GPU 0 that the memory plan does not count, and one more
// context per rank. So a rank whose launcher announced its local rank sets its GPU, local rank % GPUs, before
// MPI_Init (Open MPI's own advice); runs that will touch no GPU (--device cpu, --plan, --help) skip it. Without such
// a variable the GPU is chosen after MPI_Init from MPI's node communicator, as before.
inline GpuBeforeMpi choose_gpu_before_mpi_init(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i], next = i + 1 < argc ? argv[i + 1] : "";
        if (a == "--help" || a == "-h" || a == "--plan" || (a == "--device" && next == "cpu")) return {};
    }
    GpuBeforeMpi g;
    const int local = comm_launcher_local_rank(&g.from), gpus = local < 0 ? 0 : cuda_device_count();
    if (gpus <= 0 || !cuda_set_device(local % gpus)) return {};  // no GPU here: run_on_device says why, after MPI_Init
    g.device = local % gpus;
    return g;
}
#endif

inline std::string host_name() {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    return host;
}

// Every rank must take the same backend: with --device auto, a node whose GPUs are not usable (a driver mismatch, an
// empty CUDA_VISIBLE_DEVICES) would run its ranks on the CPU while the others wait for them in NCCL's set-up: a hang,
// or an MPI error about message sizes. A collective; every rank fails alike, with one message naming the ranks that
// found none and why (rank 0 says it: say_error).
inline void check_ranks_agree_on_device(Comm& comm, const DeviceChoice& d) {
    const std::vector<std::string> all = all_gather_string(comm, d.cuda ? "" : host_name() + ": " + d.why);
    std::string none;
    int on_gpu = 0;
    for (int r = 0; r < comm.size(); r++) {
        if (all[r].empty()) on_gpu++;
        else none += format("\n  rank %d (%s)", r, all[r].c_str());
    }
    if (on_gpu == 0 || on_gpu == comm.size()) return;
    fail("the ranks disagree on the device: %d of %d found a usable GPU; these found none:%s\n---> HINT: check the "
         "driver and CUDA_VISIBLE_DEVICES on the nodes without one; --device cuda makes such a rank fail with its "
         "reason, --device cpu runs every rank on the CPU", on_gpu, comm.size(), none.c_str());
}

inline void print_cpu_device(int gpus) {
    std::printf("device: CPU backend (fp32, OpenBLAS, %d thread%s)%s\n", omp_get_max_threads(),
                omp_get_max_threads() == 1 ? "" : "s",
                gpus > 0 ? "" : "; fine for small models only");
}

// The CPU backend's OpenMP threads of every rank as a checkpoint records them (record_cpu_threads: "N" when every
// rank has N, else each rank's, "1,2"): its sums' order, so a resume with other counts is said (notice_other_arithmetic;
// rank 0's count alone let a rank 1 with another count pass unsaid). A collective, which also says (rank 0) where
// threads take turns on cores, each step slower: a node's ranks with more threads than it has cores (mpirun
// --bind-to none without OMP_NUM_THREADS gives every rank all of them: 1.5-2x the time per step at 2 ranks on 2
// cores), or a rank with more threads than the cores it may run on (its affinity: mpirun's --bind-to core, a cpuset).
inline std::string cpu_threads_of_ranks(Comm& comm) {
    cpu_set_t mask;
    const int mine = omp_get_max_threads(),
              allowed = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : mine;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    std::vector<std::string> threads;
    std::map<std::string, std::pair<long, long>> node;  // host -> (its ranks' threads, its cores)
    std::map<std::string, int> ranks_of;
    std::string bound;  // the ranks with more threads than their affinity allows
    const std::vector<std::string> all =
        all_gather_string(comm, format("%d %d %ld %s", mine, allowed, cores, host_name().c_str()));
    for (size_t r = 0; r < all.size(); r++) {
        std::istringstream in(all[r]);
        int t = 0, a = 0;
        long c = 0;
        std::string host;
        in >> t >> a >> c >> host;
        threads.push_back(std::to_string(t));
        node[host].first += t;
        node[host].second = c;
        ranks_of[host]++;
        if (t > a) bound += format("%srank %zu has %d threads on the %d core%s it may run on", bound.empty() ? "" : "; ",
                                   r, t, a, a == 1 ? "" : "s");
    }
    if (comm.rank() == 0) {
        bool said = false;  // (a node's notice covers its ranks' affinity)
        for (const auto& [host, tc] : node) {
            const int n = ranks_of[host];
            const long fit = std::max(1L, tc.second / n);
            if (tc.first <= tc.second) continue;
            said = true;
            if (all.size() == 1)
                std::printf("notice: %ld OpenMP threads on %ld cores take turns on them, each step slower\n---> HINT: "
                            "OMP_NUM_THREADS=%ld\n", tc.first, tc.second, tc.second);
            else
                std::printf("notice: %s runs %d rank%s with %ld OpenMP threads in all on %ld cores: they take turns on "
                            "the cores, each step slower\n---> HINT: OMP_NUM_THREADS=%ld per rank (mpirun --bind-to "
                            "none -x OMP_NUM_THREADS=%ld), the cores over the ranks of a node\n", host.c_str(), n,
                            n == 1 ? "" : "s", tc.first, tc.second, fit, fit);
        }
        if (!bound.empty() && !said)
            std::printf("notice: %s: they take turns on those cores, each step slower\n---> HINT: as many "
                        "threads as cores a rank may use (OMP_NUM_THREADS), or mpirun --bind-to none\n",
                        bound.c_str());
    }
    const bool uniform = std::all_of(threads.begin(), threads.end(), [&](const std::string& t) { return t == threads[0]; });
    return uniform ? threads[0] : join(threads, ",");
}

// One process, no communicator (finetune_roberta): run(backend) on the backend choose_device picks, GPU 0.
template <class Run>
int run_on_one_device(const TrainOptions& opts, Run&& run) {
    DeviceChoice d = choose_device(opts.device);
#if defined(PRAC_CUDA_BACKEND)
    if (d.cuda) {
        print_cuda_device(0);
        CudaBackend be(0, (uint64_t)opts.seed);
        return run(be);
    }
#endif
    print_cpu_device(d.gpus);
    CpuBackend be;
    return run(be);
}

#if defined(PRAC_CUDA_BACKEND)
// NCCL needs one GPU per rank. The ranks of a node may all see its GPUs (each takes local rank % GPUs) or each
// see its own (Slurm's --gpus-per-task, a CUDA_VISIBLE_DEVICES per rank: every rank's GPU 0), so GPUs are told
// apart by UUID, not by number. A collective; every rank fails alike, naming two ranks that share one.
inline void check_one_gpu_per_rank(Comm& comm, int dev) {
    std::vector<std::string> uuids, hosts;  // one gather of "UUID HOST" per rank
    for (const std::string& id : all_gather_string(comm, cuda_device_uuid(dev) + " " + host_name())) {
        uuids.push_back(id.substr(0, id.find(' ')));
        hosts.push_back(id.substr(id.find(' ') + 1));
    }
    for (int a = 0; a < comm.size(); a++)
        for (int b = a + 1; b < comm.size(); b++)
            if (!uuids[a].empty() && uuids[a] == uuids[b])
                fail("ranks %d and %d share one GPU (%s on %s): NCCL needs one GPU per rank (two ranks on one GPU "
                     "fail with \"Duplicate GPU detected\")\n---> HINT: start at most as many ranks per node as it "
                     "has GPUs (mpirun -np N --host NODE:GPUS,...), or give each rank its own (srun "
                     "--gpus-per-task=1), or use --device cpu", a, b, uuids[a].c_str(), hosts[a].c_str());
}
#endif

// Runs train(backend, setup) on the backend this run uses; `train` is the main's loop, a generic lambda.
template <class Train>
int run_on_device(RunSetup& s, Train&& train) {
    TrainOptions& opts = s.opts;
    Comm& comm = *s.comm;
    const int rank = comm.rank(), ranks = comm.size();
    DeviceChoice d = choose_device(opts.device);
    if (ranks > 1) check_ranks_agree_on_device(comm, d);
#if defined(PRAC_CUDA_BACKEND)
    if (d.cuda) {
        const int gpus = d.gpus;
        // the gradients live on the GPU: data parallelism reduces them with NCCL (MPI reduces host buffers only).
        // --comm nccl with one rank runs the same NCCL path alone (the GPU tests compare it with the plain run).
        bool nccl = opts.comm == "nccl" || (opts.comm == "auto" && ranks > 1);
        if (ranks > 1 && !nccl)
            fail("--comm mpi reduces host buffers, but the CUDA backend's gradients are on the GPU: %d GPU ranks need "
                 "NCCL\n---> HINT: drop --comm mpi (auto picks nccl on GPUs), or use --device cpu", ranks);
        // one GPU per rank of this node; a GPU set before MPI_Init stays (another would open a second context), and
        // check_one_gpu_per_rank still refuses two ranks on one GPU
        int dev = comm.local_rank() % gpus;
        if (s.gpu_before_mpi.device >= 0) {
            if (s.gpu_before_mpi.device != dev)
                std::printf("notice: rank %d took GPU %d from %s before MPI_Init; MPI's node order would give "
                            "GPU %d\n", rank, s.gpu_before_mpi.device, s.gpu_before_mpi.from.c_str(), dev);
            dev = s.gpu_before_mpi.device;
        }
        print_cuda_device(dev, s.gpu_before_mpi.from);
        if (nccl) {
#if defined(PRAC_HAVE_NCCL)
            if (ranks > 1) check_one_gpu_per_rank(comm, dev);
            // NCCL logs NCCL_DEBUG's messages to stdout, which only rank 0 keeps (make_run_setup): the others log to
            // a file of their own unless the user named one (NCCL_DEBUG_FILE; %h: host, %p: pid)
            if (ranks > 1 && std::getenv("NCCL_DEBUG") && !std::getenv("NCCL_DEBUG_FILE")) {
                if (rank == 0)
                    std::printf("notice: NCCL_DEBUG is set: rank 0's NCCL messages follow here, the other ranks' go "
                                "to nccl_debug.<host>.<pid>.log (set NCCL_DEBUG_FILE to choose)\n");
                else
                    setenv("NCCL_DEBUG_FILE", "nccl_debug.%h.%p.log", 0);
            }
            CudaBackend be(dev, (uint64_t)opts.seed);
            NcclComm nccl_comm(comm, dev, be.stream);  // destroyed before be (its stream waits on be's)
            std::printf("communicator: %s (%s), rank %d of %d on GPU %d\n",
                        NcclComm::version().c_str(), ranks > 1 ? "id broadcast over MPI" : "one process", rank, ranks,
                        dev);
            s.comm = &nccl_comm;
            int code = train(be, s);
            s.comm = &comm;
            return code;
#else
            fail("data parallelism on GPUs needs NCCL, which this build lacks (cmake's dependency report says "
                 "\"NCCL not found\")\n---> HINT: pip install nvidia-nccl-cu13 (or set NCCL_PATH), reconfigure and "
                 "rebuild; or use --device cpu%s", ranks > 1 ? "" : ", or drop --comm nccl");
#endif
        }
        CudaBackend be(dev, (uint64_t)opts.seed);
        return train(be, s);
    }
#endif
    CHECK_USER(opts.comm != "nccl", "--comm nccl reduces GPU buffers, but this run uses the CPU backend\n---> HINT: "
               "use --comm auto or mpi on the CPU (or --device cuda in a build with CUDA and NCCL)");
    print_cpu_device(d.gpus);
    s.cpu_threads = cpu_threads_of_ranks(comm);
    CpuBackend be;
    return train(be, s);
}

// The error that ends a rank, on stderr after what it printed before (also when both go to one file). The ranks of a
// job mostly fail alike (their flags, program and data are checked to be the same), and N copies of one message bury
// it: a rank other than 0 first waits SAY_ERROR_WAIT_S for rank 0's MPI_Abort to end the job, and says its error
// (naming itself) only when it is still running then, an error of its own (a file its node lacks, its GPU's fault).
// The wait takes SIGTERM and SIGINT back from the trainer's handlers: Open MPI's abort sends SIGTERM, which would
// otherwise end the wait early and print the copy. (Errors before MPI_Init, of which there are few, every rank says.)
constexpr unsigned SAY_ERROR_WAIT_S = 5;
inline void say_error(Comm* comm, const char* program, const char* kind, const char* what) {
    std::fflush(stdout);
    if (comm && comm->size() > 1 && comm->rank() > 0) {
        std::signal(SIGTERM, SIG_DFL);
        std::signal(SIGINT, SIG_DFL);
        for (unsigned left = SAY_ERROR_WAIT_S; left > 0;) left = sleep(left);
        std::fprintf(stderr, "%s: %s on rank %d of %d: %s\n", program, kind, comm->rank(), comm->size(), what);
    } else {
        std::fprintf(stderr, "%s: %s: %s\n", program, kind, what);
    }
}

// What a failed host allocation says (it was "internal error: std::bad_alloc", exit 2: the weights' fp32 host copy of
// a large model under a memory limit): exit 1, with what to do.
inline const char* OUT_OF_HOST_MEMORY =
    "out of host memory (an allocation failed: std::bad_alloc)\n---> HINT: --plan with the same flags prints what the "
    "run holds (on the CPU backend, all of it in host memory; a GPU run also keeps host copies of the weights while "
    "it loads and saves them): lower --batch-size or --seq-len, pick a smaller model, or raise the memory limit "
    "(the shell's ulimit, the job's memory request)";

// main() of both trainers: set up the ranks, the run and the device, run `train`, and on an error print it and
// end every rank (a rank that returned normally would leave the others waiting in a collective forever).
template <class Train>
int train_main(Arch arch, const char* program, int argc, char** argv, Train&& train) {
    std::unique_ptr<Comm> comm;
    int code = 0;
    file_size_limit_as_error();
    try {
        GpuBeforeMpi gpu_before_mpi;
#if defined(PRAC_CUDA_BACKEND)
        comm = comm_create(&argc, &argv, [&] { gpu_before_mpi = choose_gpu_before_mpi_init(argc, argv); });
#else
        comm = comm_create(&argc, &argv);
#endif
        RunSetup s;
        s.gpu_before_mpi = gpu_before_mpi;
        s.opts.precision = plan_precision_of_this_build();  // (the default: a --precision flag replaces it)
        if (!make_run_setup(s, arch, program, argc, argv, *comm, &code)) return code;
        closed_stdout_as_error();  // (after --help and --plan, which end quietly in a closed pipe, as filters do)
        code = run_on_device(s, train);
        // what the run printed is a result too (--eval-only's loss, --sample's text): lost to a full disk, not exit 0
        if (code == 0) check_stdout_written("the run's output");
        return code;
    } catch (const UserError& e) {
        code = 1;
        say_error(comm.get(), program, "error", e.what());
    } catch (const std::bad_alloc&) {
        code = 1;
        say_error(comm.get(), program, "error", OUT_OF_HOST_MEMORY);
    } catch (const std::exception& e) {
        code = 2;
        say_error(comm.get(), program, "internal error", e.what());
    }
    remove_made_output_dirs_left_empty();  // (--save's, --ckpt-dir's, made by a run refused before it wrote them)
    if (comm && comm->size() > 1) comm_abort(*comm, code);
    return code;
}
