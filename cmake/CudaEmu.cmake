# cmake/CudaEmu.cmake -- the CUDA source on the CPU execution layer (kernels/cuda_emu/).
#
# Two roles, included from the top-level CMakeLists.txt after Dependencies.cmake:
#
#  * In the main build (PRAC_CUDA AUTO/ON/OFF): when the emulation can be built here (clang++, Boost.Context, the
#    CUDA toolkit's headers, python3), adds two sub-builds of this same source tree with PRAC_CUDA=EMU,
#    build/cuda-emu-bf16 and build/cuda-emu-fp32 (ExternalProject, built by `make` with everything else), and
#    includes their tests in this build's ctest: every GPU test program, the trainer tests and the NCCL tests run
#    emulated in `make test` (label cuda-emu), followed by the kernel coverage report. PRAC_EMU=OFF skips them.
#
#  * In such a sub-build (PRAC_CUDA=EMU): .cu files are rewritten by kernels/cuda_emu/rewrite.py into
#    <build>/emu_src and compiled as C++ by clang with kernels/cuda_emu/cuda_emu.h forced in front; the kernels'
#    translation units get the load/store callbacks of the shared-memory race check; everything is built with
#    AddressSanitizer; prac::cuda_libs / prac::nccl link the stand-ins (prac_cuda_emu) instead of NVIDIA's
#    libraries. Only what the CUDA backend needs is built (no CPU tests or tools: the main build has them).
include_guard(GLOBAL)

if(NOT PRAC_CUDA_EMU)
  # ---------------------------------------------------------------------------------------------------------------
  # main build: the two emulated sub-builds
  # ---------------------------------------------------------------------------------------------------------------
  set(PRAC_EMU "AUTO" CACHE STRING "Build and test the CUDA source on the CPU execution layer: AUTO, ON, OFF")
  set_property(CACHE PRAC_EMU PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${PRAC_EMU}" _emu_mode)
  set(_why "")
  find_program(PRAC_CLANGXX NAMES clang++ clang++-14 clang++-15 clang++-16)
  find_program(PRAC_CLANG NAMES clang clang-14 clang-15 clang-16)
  find_path(PRAC_BOOST_CONTEXT_INC boost/context/detail/fcontext.hpp)
  find_library(PRAC_BOOST_CONTEXT_LIB NAMES boost_context)
  set(_cuda_inc_roots "${_prac_cuda_home_override}" "${_prac_cuda_toolkit_root}" /usr/local/cuda /usr)
  find_path(PRAC_EMU_CUDA_INC cuda_runtime.h PATHS ${_cuda_inc_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  if(_emu_mode STREQUAL "OFF")
    set(_why "disabled (PRAC_EMU=OFF)")
  elseif(NOT PRAC_CLANGXX OR NOT PRAC_CLANG)
    set(_why "clang++ not found (its load/store instrumentation drives the race check) -> apt-get install clang")
  elseif(NOT PRAC_BOOST_CONTEXT_INC OR NOT PRAC_BOOST_CONTEXT_LIB)
    set(_why "Boost.Context not found (fiber switches) -> apt-get install libboost-context-dev")
  elseif(NOT PRAC_EMU_CUDA_INC)
    set(_why "the CUDA toolkit's headers (cuda_runtime.h) are not found -> install the CUDA 13 toolkit or set CUDA_HOME")
  elseif(NOT PRAC_PYTHON)
    set(_why "python3 not found (runs kernels/cuda_emu/rewrite.py) -> apt-get install python3")
  endif()
  if(_why)
    _prac_line(FALSE "CUDA emulation" "${_why}; the GPU tests will not run without a GPU")
    if(_emu_mode STREQUAL "ON")
      message(FATAL_ERROR "PRAC_EMU=ON but the CUDA emulation cannot be built: ${_why}")
    endif()
    set(PRAC_HAVE_EMU OFF)
    return()
  endif()
  set(PRAC_HAVE_EMU ON)
  get_filename_component(_emu_cuda_home "${PRAC_EMU_CUDA_INC}" DIRECTORY)
  _prac_line(TRUE "CUDA emulation" "BF16 and FP32 builds in ${CMAKE_BINARY_DIR}/cuda-emu-{bf16,fp32} (${PRAC_CLANGXX}, "
                                   "Boost.Context ${PRAC_BOOST_CONTEXT_LIB}, CUDA headers ${PRAC_EMU_CUDA_INC})")

  include(ExternalProject)
  set(PRAC_EMU_COVERAGE_DIR "${CMAKE_BINARY_DIR}/cuda-emu-coverage")
  set(_tests_file "${CMAKE_BINARY_DIR}/cuda-emu-tests.cmake")
  file(WRITE "${_tests_file}" "# written by cmake/CudaEmu.cmake: the emulated builds' tests, run by this build's ctest\n")
  foreach(prec BF16 FP32)
    string(TOLOWER "${prec}" p)
    set(dir "${CMAKE_BINARY_DIR}/cuda-emu-${p}")
    ExternalProject_Add(cuda_emu_${p}
      SOURCE_DIR "${PROJECT_SOURCE_DIR}"
      BINARY_DIR "${dir}"
      CMAKE_ARGS -DPRAC_CUDA=EMU -DPRAC_PRECISION=${prec} -DCMAKE_BUILD_TYPE=Release
                 -DCMAKE_CXX_COMPILER=${PRAC_CLANGXX} -DCMAKE_C_COMPILER=${PRAC_CLANG}
                 -DCUDA_HOME=${_emu_cuda_home} -DPRAC_EMU_COVERAGE_DIR=${PRAC_EMU_COVERAGE_DIR}
                 -DPRAC_EMU_TEST_PREFIX=cuda-emu.${p}.
      INSTALL_COMMAND ""
      BUILD_ALWAYS ON)
    file(APPEND "${_tests_file}" "subdirs(\"${dir}\")\n")
  endforeach()
  set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY TEST_INCLUDE_FILES "${_tests_file}")

  # The coverage report: the reset runs before every emulated test, the report after all of them (a ctest fixture).
  add_test(NAME cuda-emu.coverage-reset
           COMMAND ${CMAKE_COMMAND} -E rm -rf "${PRAC_EMU_COVERAGE_DIR}" "${CMAKE_BINARY_DIR}/cuda-emu-coverage.txt")
  # (each sub-build lists the tests that can run project kernels: a run of some of them, ctest -R, is not judged
  # but skipped, exit 77)
  add_test(NAME cuda-emu.coverage
           COMMAND ${PRAC_PYTHON} "${PROJECT_SOURCE_DIR}/kernels/cuda_emu/coverage.py" --src "${PROJECT_SOURCE_DIR}"
                   --runs "${PRAC_EMU_COVERAGE_DIR}" --out "${CMAKE_BINARY_DIR}/cuda-emu-coverage.txt"
                   --expected "${CMAKE_BINARY_DIR}/cuda-emu-bf16/cuda-emu-kernel-tests.txt"
                              "${CMAKE_BINARY_DIR}/cuda-emu-fp32/cuda-emu-kernel-tests.txt")
  set_tests_properties(cuda-emu.coverage-reset PROPERTIES FIXTURES_SETUP cuda_emu LABELS cuda-emu)
  set_tests_properties(cuda-emu.coverage PROPERTIES FIXTURES_CLEANUP cuda_emu LABELS cuda-emu SKIP_RETURN_CODE 77)
  return()
endif()

# -----------------------------------------------------------------------------------------------------------------
# an emulated sub-build (PRAC_CUDA=EMU)
# -----------------------------------------------------------------------------------------------------------------
# the tests prac_emu_test_properties registers, listed for the coverage report (written anew at each configure)
file(WRITE "${CMAKE_BINARY_DIR}/cuda-emu-kernel-tests.txt" "")
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "PRAC_CUDA=EMU needs clang++ (its -fsanitize-coverage=trace-loads,trace-stores drives the "
                      "shared-memory race check); got ${CMAKE_CXX_COMPILER_ID} -> -DCMAKE_CXX_COMPILER=clang++")
endif()
set(_cuda_inc_roots "${_prac_cuda_home_override}" "${_prac_cuda_toolkit_root}" /usr/local/cuda /usr)
find_path(PRAC_EMU_CUDA_INC cuda_runtime.h PATHS ${_cuda_inc_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_path(PRAC_BOOST_CONTEXT_INC boost/context/detail/fcontext.hpp)
find_library(PRAC_BOOST_CONTEXT_LIB NAMES boost_context)
foreach(h cuda_runtime.h cuda_bf16.h cublasLt.h cusolverDn.h nccl.h)
  if(NOT EXISTS "${PRAC_EMU_CUDA_INC}/${h}")
    message(FATAL_ERROR "PRAC_CUDA=EMU: ${h} not found in '${PRAC_EMU_CUDA_INC}' -> set CUDA_HOME to a CUDA 13 toolkit")
  endif()
endforeach()
if(NOT PRAC_BOOST_CONTEXT_INC OR NOT PRAC_BOOST_CONTEXT_LIB)
  message(FATAL_ERROR "PRAC_CUDA=EMU needs Boost.Context -> apt-get install libboost-context-dev")
endif()
_prac_line(TRUE "CUDA emulation" "${PRAC_PRECISION} (headers ${PRAC_EMU_CUDA_INC}; stand-ins kernels/cuda_emu)")

set(PRAC_HAVE_CUDA ON)
set(PRAC_HAVE_NCCL ON)  # the NCCL stand-in: one rank in process, several over MPI
set(PRAC_EMU_SRC "${CMAKE_BINARY_DIR}/emu_src")
set(PRAC_EMU_COVERAGE_DIR "" CACHE PATH "where emulated runs record the kernels they executed (coverage report)")
set(PRAC_EMU_TEST_PREFIX "cuda-emu." CACHE STRING "name prefix of the emulated tests")

# AddressSanitizer on everything; line tables for its reports and the race check's.
add_compile_options(-fsanitize=address -fno-omit-frame-pointer -gline-tables-only)
add_link_options(-fsanitize=address)

target_include_directories(prac::cuda_libs SYSTEM INTERFACE "${PRAC_EMU_CUDA_INC}")
target_link_libraries(prac::cuda_libs INTERFACE prac_cuda_emu)
target_compile_definitions(prac::cuda_libs INTERFACE PRAC_HAVE_CUDA=1)
target_link_libraries(prac::nccl INTERFACE prac::cuda_libs)
target_compile_definitions(prac::nccl INTERFACE PRAC_HAVE_NCCL=1)

# cuDNN's graph API through its stand-in (kernels/cuda_emu/cudnn_emu.cpp): with cudnn.h (the toolkit's, else the pip
# wheel's) and the cudnn-frontend headers, the bf16 emulated build compiles kernels/attention_cudnn.cu as the GPU
# build does, and the frontend's graphs run on the stand-in's interpreter.
set(PRAC_EMU_CUDNN_INC "")
set(_cudnn_roots "${PRAC_EMU_CUDA_INC}")
foreach(d IN LISTS PRAC_PIP_NVIDIA_DIRS)
  list(APPEND _cudnn_roots "${d}/cudnn/include")
endforeach()
foreach(d IN LISTS _cudnn_roots)
  if(EXISTS "${d}/cudnn.h" AND EXISTS "${d}/cudnn_graph.h")
    set(PRAC_EMU_CUDNN_INC "${d}")
    break()
  endif()
endforeach()
set(PRAC_HAVE_CUDNN_FRONTEND OFF)
if(PRAC_EMU_CUDNN_INC AND PRAC_PIP_FRONTEND_INC AND EXISTS "${PRAC_PIP_FRONTEND_INC}/cudnn_frontend.h")
  set(PRAC_HAVE_CUDNN_FRONTEND ON)
  target_include_directories(prac::cudnn SYSTEM INTERFACE "${PRAC_EMU_CUDNN_INC}" "${PRAC_PIP_FRONTEND_INC}")
  target_link_libraries(prac::cudnn INTERFACE prac::cuda_libs)
  target_compile_definitions(prac::cudnn INTERFACE PRAC_HAVE_CUDNN_FRONTEND=1)
  _prac_line(TRUE "cuDNN (emulated)" "the graph API's stand-in (headers ${PRAC_EMU_CUDNN_INC}; cudnn-frontend "
                                     "${PRAC_PIP_FRONTEND_INC})")
else()
  _prac_line(FALSE "cuDNN (emulated)" "cudnn.h or the cudnn-frontend headers not found -> pip install "
                                      "nvidia-cudnn-frontend (and cuDNN's headers); the emulated attention tests "
                                      "skip the cuDNN path")
endif()

# Every .cu/.cuh of the project, rewritten at build time, one command per file (its original and the rewriter are
# its dependencies), so that an edit regenerates one file and recompiles only what includes it.
file(GLOB_RECURSE _emu_rel CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}"
     "${PROJECT_SOURCE_DIR}/kernels/*.cu" "${PROJECT_SOURCE_DIR}/kernels/*.cuh" "${PROJECT_SOURCE_DIR}/prac/*.cu"
     "${PROJECT_SOURCE_DIR}/prac/*.cuh" "${PROJECT_SOURCE_DIR}/train/*.cu" "${PROJECT_SOURCE_DIR}/common/*.cu"
     "${PROJECT_SOURCE_DIR}/common/*.cuh" "${PROJECT_SOURCE_DIR}/test/*.cu" "${PROJECT_SOURCE_DIR}/test/*.cuh"
     "${PROJECT_SOURCE_DIR}/tools/*.cu")
file(GLOB _emu_mains CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}" "${PROJECT_SOURCE_DIR}/*.cu")
list(APPEND _emu_rel ${_emu_mains})
set(_emu_out "")
foreach(f IN LISTS _emu_rel)
  add_custom_command(OUTPUT "${PRAC_EMU_SRC}/${f}"
    COMMAND ${PRAC_PYTHON} "${PROJECT_SOURCE_DIR}/kernels/cuda_emu/rewrite.py" --src "${PROJECT_SOURCE_DIR}"
            --out "${PRAC_EMU_SRC}" --touch "${f}"
    DEPENDS "${PROJECT_SOURCE_DIR}/${f}" "${PROJECT_SOURCE_DIR}/kernels/cuda_emu/rewrite.py"
    COMMENT "cuda_emu: rewriting ${f}"
    VERBATIM)
  list(APPEND _emu_out "${PRAC_EMU_SRC}/${f}")
endforeach()
add_custom_target(cuda_emu_sources DEPENDS ${_emu_out})

# The flags of a rewritten .cu: C++, the device built-ins forced in front, no FMA contraction (nvcc keeps the _rn
# intrinsics apart, and the CPU twins compare bit for bit). The race check's load/store callbacks go only into the
# targets that define kernels (every kernel of the project is compiled into prac_cuda: the .cuh templates are
# instantiated there, `extern template` elsewhere): in the tests' and trainers' host code they would only cost time.
set(PRAC_EMU_CU_FLAGS -x c++ -include "${PROJECT_SOURCE_DIR}/kernels/cuda_emu/cuda_emu.h" -ffp-contract=off)
# An experiment, not a build `make` makes: PRAC_EMU_FMA=ON contracts a * b + c into FMAs in device code (every
# __global__ and __device__ body, by a pragma rewrite.py puts there: cuda_emu.h's CUDA_EMU_DEVICE_CONTRACT) as nvcc's
# default --fmad=true does on a GPU, the _rn intrinsics, host code and __host__ __device__ functions apart, so a
# kernel claimed bitwise equal to its uncontracted CPU twin that misses an intrinsic shows here. Needs a CPU with FMA.
option(PRAC_EMU_FMA "Emulated sub-build: contract multiplies and adds in device code into FMAs, as nvcc does" OFF)
if(PRAC_EMU_FMA)
  list(APPEND PRAC_EMU_CU_FLAGS -mfma -DCUDA_EMU_FMA)
endif()
set(PRAC_EMU_RACECHECK_FLAGS -fsanitize-coverage=func,trace-loads,trace-stores)
set(PRAC_EMU_KERNEL_TARGETS prac_cuda test_emu_core)
# Host code that launches no kernel of its own (the trainers' and bench_gpu's mains, the cuDNN graphs) is compiled
# unoptimized: an emulated run's time is the kernels' (a 6-step gpt2-tiny run on the emulated GPU took as long; its
# CPU-backend run 0.7 s -> 2 s), and -O3 with AddressSanitizer took 65 s for each main (-O0: 14 s), 26 s for
# bench_gpu.cu (8 s) and 262 s for attention_cudnn.cu (66 s) of a 2-core build.
set(PRAC_EMU_HOST_ONLY_SOURCES train_gpt2.cu train_llama.cu finetune_roberta.cu tools/bench_gpu.cu
    kernels/attention_cudnn.cu)

# The emulated prac_cuda_or_cxx (replaces Dependencies.cmake's): each .cu source becomes its rewritten copy.
function(prac_cuda_or_cxx target)
  get_target_property(_srcs ${target} SOURCES)
  get_target_property(_src_dir ${target} SOURCE_DIR)
  set(_new "")
  foreach(s IN LISTS _srcs)
    if(s MATCHES "\\.cu$")
      get_filename_component(_abs "${s}" ABSOLUTE BASE_DIR "${_src_dir}")
      file(RELATIVE_PATH _rel "${PROJECT_SOURCE_DIR}" "${_abs}")
      set(_gen "${PRAC_EMU_SRC}/${_rel}")
      set(_flags ${PRAC_EMU_CU_FLAGS})
      # host code only (attention_cudnn.cu in prac_cuda among it): nothing for the race check's callbacks
      if(_rel IN_LIST PRAC_EMU_HOST_ONLY_SOURCES)
        list(APPEND _flags -O0)
      elseif(target IN_LIST PRAC_EMU_KERNEL_TARGETS)
        list(APPEND _flags ${PRAC_EMU_RACECHECK_FLAGS})
      endif()
      set_source_files_properties("${_gen}" TARGET_DIRECTORY ${target} PROPERTIES
                                  LANGUAGE CXX GENERATED TRUE COMPILE_OPTIONS "${_flags}")
      list(APPEND _new "${_gen}")
    else()
      list(APPEND _new "${s}")
    endif()
  endforeach()
  set_property(TARGET ${target} PROPERTY SOURCES ${_new})
  target_include_directories(${target} BEFORE PRIVATE "${PRAC_EMU_SRC}")
  add_dependencies(${target} cuda_emu_sources)
  target_compile_definitions(${target} PUBLIC PRAC_HAVE_CUDA=1)
  target_link_libraries(${target} PUBLIC prac::cuda_libs)
endfunction()

# What every emulated test gets: its label, the coverage record, ASan's settings, the fixture that runs the coverage
# report after all of them. LeakSanitizer stays off: Open MPI and OpenBLAS keep allocations to exit by design.
# An emulated test runs its CUDA threads as fibers on ONE core (one OpenMP/OpenBLAS thread too), so `ctest -j2` runs
# two of them side by side (PROCESSORS 1); the other tests ask for every core (test/CMakeLists.txt).
#
# ctest -j starts the costliest tests first, by the costs it measured in earlier runs of the build directory. A fresh
# build (CI's) has none, so the longest emulated tests carry their seconds (COST) as measured on the 2-core sandbox
# in session 64's whole suite, the larger of the two builds: declared order would leave one of them running alone at
# the end.
set(PRAC_EMU_TEST_SECONDS trainer_cuda.resume=145 bench_gpu_smoke=139 attention_cuda=110 elementwise_cuda=99
    prac_cuda.other_library=86 prac_cuda=84 elementwise_cuda.grid_capped=78 step_cuda=67 trainer_cuda.nccl=65
    matmul_cuda=62 prac_cuda.grid_capped=58 bench_gpu_overlap_smoke=44 optim_cuda=37 optim_cuda.other_library=32
    trainer_cuda.cpu=32 gpu_sanitize_commands=31 dist.DataParallel.TwoRanksEqualOneRankWithTheDoubledBatch=31
    trainer_cuda.overlap_thread=31 optim_cuda.grid_capped=27 finetune_cuda.resume=26 step_cuda.refresh_thread=23)
function(prac_emu_test_properties test)
  set_tests_properties(${test} PROPERTIES LABELS cuda-emu FIXTURES_REQUIRED cuda_emu PROCESSORS 1)
  string(REPLACE "${PRAC_EMU_TEST_PREFIX}" "" _name "${test}")
  foreach(entry IN LISTS PRAC_EMU_TEST_SECONDS)
    if(entry MATCHES "^(.+)=([0-9]+)$" AND CMAKE_MATCH_1 STREQUAL _name)
      set_tests_properties(${test} PROPERTIES COST ${CMAKE_MATCH_2})
    endif()
  endforeach()
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT "PRAC_EMU_COVERAGE_DIR=${PRAC_EMU_COVERAGE_DIR}"
               "PRAC_EMU_TEST=${test}" "ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0" OMP_NUM_THREADS=1
               OPENBLAS_NUM_THREADS=1)
  file(APPEND "${CMAKE_BINARY_DIR}/cuda-emu-kernel-tests.txt" "${test}\n")
endfunction()
