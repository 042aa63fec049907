# cmake/Dependencies.cmake -- finds every dependency of the PRAC trainer and defines the prac::* targets.
#
# Included once from the top-level CMakeLists.txt, after project(). Prints ONE status line per dependency
# ("✓ NAME: what was found" or "✗ NAME: not found -> how to fix"), enables the CUDA language only when nvcc
# actually works, and always defines these IMPORTED INTERFACE targets (empty when an optional dep is missing):
#
#   prac::blas           OpenBLAS (cblas) + LAPACKE, with include dirs                    (required)
#   prac::openmp         OpenMP for C++ (and -Xcompiler=-fopenmp for .cu when CUDA is on)  (required)
#   prac::json           nlohmann_json                                                     (required)
#   prac::pcre2          PCRE2 8-bit (defines PCRE2_CODE_UNIT_WIDTH=8)          PRAC_HAVE_PCRE2
#   prac::sentencepiece  SentencePiece                                          PRAC_HAVE_SENTENCEPIECE
#   prac::mpi            MPI::MPI_CXX (OpenMPI)                                 PRAC_HAVE_MPI
#   prac::cuda_libs      cudart (static), cuBLAS, cuBLASLt, cuSOLVER, cuRAND    PRAC_HAVE_CUDA
#   prac::cudnn          cuDNN (+ cudnn-frontend headers and NVRTC when found)  PRAC_HAVE_CUDNN / _CUDNN_FRONTEND
#   prac::nccl           NCCL                                                   PRAC_HAVE_NCCL
#   Boost.Math           headers only (prac_analyze)                                       (required)
#   GoogleTest:          GTest::gtest, GTest::gtest_main, include(GoogleTest)  (required)
#
# Each non-empty optional target also carries a compile definition PRAC_HAVE_<X>=1 for its users.
#
# Where the NVIDIA libraries are searched, in order (first root holding both header and library wins):
#   CUDA libs : $CUDA_HOME, the toolkit that nvcc belongs to, pip wheels (site-packages/nvidia/cu13,
#               nvidia/<lib> for cu12-style wheels), /usr, /usr/local.
#   cuDNN     : $CUDNN_PATH only if set; else $CUDA_HOME, nvcc's toolkit, pip nvidia/cudnn, /usr, /usr/local.
#   NCCL      : $NCCL_PATH only if set; else $CUDA_HOME, nvcc's toolkit, pip nvidia/nccl, /usr, /usr/local.
#   frontend  : $CUDNN_FRONTEND_PATH only if set; else pip nvidia-cudnn-frontend, the cuDNN root, /usr(/local).
# CUDA_HOME / CUDNN_PATH / NCCL_PATH / CUDNN_FRONTEND_PATH may be given as -D cache variables or as environment
# variables. Wheels ship only versioned .so files (libcudnn.so.9), so versioned names are searched too; every
# NVIDIA library is an IMPORTED SHARED target with its full path, so CMake writes its directory into the
# binary's RPATH and nothing needs LD_LIBRARY_PATH.
#
# Options / cache variables:
#   PRAC_CUDA        AUTO (default: use CUDA when nvcc works) | ON (fail if it does not) | OFF
#   PRAC_CUDA_ARCHS  "80-real;90a-real;90-virtual" = sm_80 + sm_90a SASS + compute_90 PTX; CI sets one.
#
# Function:
#   prac_cuda_or_cxx(<target>)   see its definition at the end of this file.

include_guard(GLOBAL)

# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------
set(PRAC_DEPS_MISSING_REQUIRED "")

function(_prac_line ok name text)
  if(ok)
    message(STATUS "  ✓ ${name}: ${text}")
  else()
    message(STATUS "  ✗ ${name}: ${text}")
  endif()
endfunction()

# Marks a required dependency as missing; configure fails after all lines are printed.
macro(_prac_require_failed name fix)
  list(APPEND PRAC_DEPS_MISSING_REQUIRED "${name} -> ${fix}")
endmacro()

# Value of an override variable: -D / cache variable first, then the environment.
function(_prac_override out name)
  if(DEFINED ${name} AND NOT "${${name}}" STREQUAL "")
    set(${out} "${${name}}" PARENT_SCOPE)
  elseif(DEFINED ENV{${name}} AND NOT "$ENV{${name}}" STREQUAL "")
    set(${out} "$ENV{${name}}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# Reads "#define MACRO value" for each macro from a header and joins the values with dots.
function(_prac_header_version out header)
  set(parts "")
  if(EXISTS "${header}")
    file(STRINGS "${header}" lines REGEX "^[ \t]*#[ \t]*define[ \t]+[A-Z0-9_]+[ \t]+\"?[ A-Za-z0-9.]+\"?")
    foreach(m IN LISTS ARGN)
      set(val "")
      foreach(l IN LISTS lines)
        if(l MATCHES "^[ \t]*#[ \t]*define[ \t]+${m}[ \t]+([0-9]+)")
          set(val "${CMAKE_MATCH_1}")
          break()
        endif()
      endforeach()
      if(val STREQUAL "")
        set(parts "")
        break()
      endif()
      list(APPEND parts "${val}")
    endforeach()
  endif()
  list(JOIN parts "." v)
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

# Target-triple folder used by CUDA toolkits (targets/<x>/lib).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(_prac_cuda_target_dir "sbsa-linux")
else()
  set(_prac_cuda_target_dir "${CMAKE_SYSTEM_PROCESSOR}-linux")
endif()

# _prac_locate(<prefix> HEADER <h> NAMES <lib file names...> ROOTS <dirs...> [PREFER_INCS <dirs...>])
# Looks through ROOTS in order for a library file (exact file names, e.g. libcudnn.so libcudnn.so.9) in
# lib64/lib/targets/<arch>/lib/lib/<multiarch>, and the header in PREFER_INCS first, then in the same root's
# include dirs. Sets <prefix>_FOUND, <prefix>_LIB (file), <prefix>_INC (dir holding the header), <prefix>_ROOT.
# Uses if(EXISTS) rather than find_library, so nothing stale is cached when CUDA_HOME & co change.
function(_prac_locate prefix)
  cmake_parse_arguments(A "" "HEADER" "NAMES;ROOTS;PREFER_INCS" ${ARGN})
  set(${prefix}_FOUND FALSE PARENT_SCOPE)
  set(${prefix}_LIB "" PARENT_SCOPE)
  set(${prefix}_INC "" PARENT_SCOPE)
  set(${prefix}_ROOT "" PARENT_SCOPE)
  foreach(root IN LISTS A_ROOTS)
    if(root STREQUAL "" OR NOT IS_DIRECTORY "${root}")
      continue()
    endif()
    set(lib "")
    foreach(sub lib64 lib "targets/${_prac_cuda_target_dir}/lib" "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
      foreach(n IN LISTS A_NAMES)
        if(EXISTS "${root}/${sub}/${n}" AND NOT IS_DIRECTORY "${root}/${sub}/${n}")
          set(lib "${root}/${sub}/${n}")
          break()
        endif()
      endforeach()
      if(lib)
        break()
      endif()
    endforeach()
    if(NOT lib)
      continue()
    endif()
    set(inc "")
    if(A_HEADER)
      foreach(d IN LISTS A_PREFER_INCS ITEMS "${root}/include" "${root}/targets/${_prac_cuda_target_dir}/include"
                                              "${root}/include/${CMAKE_LIBRARY_ARCHITECTURE}")
        if(NOT d STREQUAL "" AND EXISTS "${d}/${A_HEADER}")
          set(inc "${d}")
          break()
        endif()
      endforeach()
      if(NOT inc)
        continue() # a library without its header is no use; look further
      endif()
    endif()
    get_filename_component(lib "${lib}" ABSOLUTE)
    set(${prefix}_FOUND TRUE PARENT_SCOPE)
    set(${prefix}_LIB "${lib}" PARENT_SCOPE)
    set(${prefix}_INC "${inc}" PARENT_SCOPE)
    set(${prefix}_ROOT "${root}" PARENT_SCOPE)
    return()
  endforeach()
endfunction()

# An IMPORTED SHARED (or STATIC for .a) library for a full path, so that CMake links it by path and puts its
# directory into the build RPATH (works for versioned-only wheel files such as libcudnn.so.9).
function(_prac_imported_lib name path)
  if(TARGET ${name})
    return()
  endif()
  if(path MATCHES "\\.a$")
    add_library(${name} STATIC IMPORTED GLOBAL)
  else()
    add_library(${name} SHARED IMPORTED GLOBAL)
  endif()
  set_target_properties(${name} PROPERTIES IMPORTED_LOCATION "${path}")
endfunction()

# Explicit RPATH entries for the directories of shared NVIDIA libraries. CMake leaves out directories it takes
# for implicit link dirs (e.g. the CUDA toolkit's lib64 for targets linked by nvcc's rules), which only works
# where ld.so.conf happens to list them; an explicit -rpath makes the binaries run without LD_LIBRARY_PATH.
function(_prac_rpath target)
  set(dirs "")
  foreach(p IN LISTS ARGN)
    if(p AND NOT p MATCHES "\\.a$")
      get_filename_component(d "${p}" DIRECTORY)
      list(APPEND dirs "${d}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  foreach(d IN LISTS dirs)
    target_link_options(${target} INTERFACE "LINKER:-rpath,${d}")
  endforeach()
endfunction()

# "libcublas.so.13.1.0.3 in /usr/local/cuda/lib" for the status line.
function(_prac_describe_lib out path)
  get_filename_component(real "${path}" REALPATH)
  get_filename_component(rname "${real}" NAME)
  get_filename_component(dir "${path}" DIRECTORY)
  set(${out} "${rname} in ${dir}" PARENT_SCOPE)
endfunction()

find_package(Threads REQUIRED) # cudart_static needs it; found before the report so its check stays out of it
message(STATUS "PRAC dependencies (✓ found, ✗ missing -> fix):")

# --------------------------------------------------------------------------------------------------------------
# Python: where pip put the NVIDIA wheels and the cudnn-frontend headers
# --------------------------------------------------------------------------------------------------------------
find_program(PRAC_PYTHON NAMES python3 python DOC "python used to locate pip-installed NVIDIA wheels")
set(PRAC_PIP_NVIDIA_DIRS "")
set(PRAC_PIP_FRONTEND_INC "")
if(PRAC_PYTHON)
  set(_prac_py [=[
import sys
try:
    import nvidia
    for p in nvidia.__path__:
        print("NV=" + p)
except Exception:
    pass
try:
    import importlib.metadata as md
    for f in (md.files("nvidia-cudnn-frontend") or []):
        if f.name == "cudnn_frontend.h":
            print("FE=" + str(f.locate().parent))
            break
except Exception:
    pass
]=])
  execute_process(COMMAND "${PRAC_PYTHON}" -c "${_prac_py}"
                  OUTPUT_VARIABLE _prac_py_out ERROR_QUIET TIMEOUT 60)
  string(REPLACE "\n" ";" _prac_py_lines "${_prac_py_out}")
  foreach(l IN LISTS _prac_py_lines)
    if(l MATCHES "^NV=(.+)$")
      list(APPEND PRAC_PIP_NVIDIA_DIRS "${CMAKE_MATCH_1}")
    elseif(l MATCHES "^FE=(.+)$")
      set(PRAC_PIP_FRONTEND_INC "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endif()

# --------------------------------------------------------------------------------------------------------------
# CUDA toolkit (nvcc) and architectures
# --------------------------------------------------------------------------------------------------------------
set(PRAC_CUDA "AUTO" CACHE STRING
    "Build the CUDA code: AUTO (when nvcc works), ON (required), OFF, EMU (for the CPU execution layer)")
set_property(CACHE PRAC_CUDA PROPERTY STRINGS AUTO ON OFF EMU)
set(PRAC_CUDA_ARCHS "80-real;90a-real;90-virtual" CACHE STRING
    "CUDA architectures (CMAKE_CUDA_ARCHITECTURES syntax); default = sm_80 + sm_90a SASS + compute_90 PTX")

string(TOUPPER "${PRAC_CUDA}" _prac_cuda_mode)
if(_prac_cuda_mode STREQUAL "AUTO")
elseif(_prac_cuda_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(_prac_cuda_mode ON)
elseif(_prac_cuda_mode MATCHES "^(OFF|NO|FALSE|N|0)$")
  set(_prac_cuda_mode OFF)
elseif(_prac_cuda_mode STREQUAL "EMU")
  # The CUDA source built for the CPU execution layer (kernels/cuda_emu/, cmake/CudaEmu.cmake): no nvcc here;
  # the toolkit's headers and our stand-ins for its libraries take its place.
  set(PRAC_CUDA_EMU ON)
  set(_prac_cuda_mode OFF)
else()
  message(FATAL_ERROR "PRAC_CUDA must be AUTO, ON, OFF or EMU (got '${PRAC_CUDA}')")
endif()

foreach(a IN LISTS PRAC_CUDA_ARCHS)
  if(a MATCHES "^(native|all|all-major)$")
    message(FATAL_ERROR "PRAC_CUDA_ARCHS='${PRAC_CUDA_ARCHS}': '${a}' probes or multiplies the build; name the "
                        "architectures, e.g. -DPRAC_CUDA_ARCHS=\"80-real;90a-real;90-virtual\" or 90a-real")
  endif()
endforeach()

_prac_override(_prac_cuda_home_override CUDA_HOME)
if(NOT _prac_cuda_home_override)
  _prac_override(_prac_cuda_home_override CUDA_PATH)
endif()

# Pick nvcc: $CUDA_HOME/bin, an already configured CMAKE_CUDA_COMPILER, $CUDACXX, PATH, /usr/local/cuda, pip.
set(_prac_nvcc "")
set(_prac_nvcc_candidates "")
if(_prac_cuda_home_override)
  list(APPEND _prac_nvcc_candidates "${_prac_cuda_home_override}/bin/nvcc")
endif()
if(CMAKE_CUDA_COMPILER)
  list(APPEND _prac_nvcc_candidates "${CMAKE_CUDA_COMPILER}")
endif()
if(DEFINED ENV{CUDACXX})
  list(APPEND _prac_nvcc_candidates "$ENV{CUDACXX}")
endif()
find_program(_prac_nvcc_on_path NAMES nvcc NO_CACHE)
if(_prac_nvcc_on_path)
  list(APPEND _prac_nvcc_candidates "${_prac_nvcc_on_path}")
endif()
list(APPEND _prac_nvcc_candidates "/usr/local/cuda/bin/nvcc")
foreach(d IN LISTS PRAC_PIP_NVIDIA_DIRS)
  list(APPEND _prac_nvcc_candidates "${d}/cu13/bin/nvcc" "${d}/cuda_nvcc/bin/nvcc")
endforeach()
foreach(c IN LISTS _prac_nvcc_candidates)
  if(NOT c STREQUAL "" AND EXISTS "${c}" AND NOT IS_DIRECTORY "${c}")
    set(_prac_nvcc "${c}")
    break()
  endif()
endforeach()

set(PRAC_HAVE_CUDA OFF)
set(PRAC_CUDA_VERSION "")
set(PRAC_CUDA_MAJOR "")
set(_prac_cuda_reason "")
set(_prac_cuda_toolkit_root "")
set(_prac_cuda_toolkit_inc "")

if(PRAC_CUDA_EMU)
  set(_prac_cuda_reason "not used: PRAC_CUDA=EMU builds the CUDA source for the CPU execution layer")
elseif(_prac_cuda_mode STREQUAL "OFF")
  set(_prac_cuda_reason "disabled (PRAC_CUDA=OFF)")
elseif(NOT _prac_nvcc)
  set(_prac_cuda_reason "nvcc not found -> install the CUDA 13 toolkit, put nvcc on PATH, or set CUDA_HOME=/path/to/cuda")
else()
  execute_process(COMMAND "${_prac_nvcc}" --version OUTPUT_VARIABLE _prac_nvcc_out ERROR_VARIABLE _prac_nvcc_err
                  RESULT_VARIABLE _prac_nvcc_rc TIMEOUT 60)
  if(NOT _prac_nvcc_rc EQUAL 0 OR NOT _prac_nvcc_out MATCHES "release ([0-9]+)\\.([0-9]+)")
    set(_prac_cuda_reason "${_prac_nvcc} does not run (${_prac_nvcc_err}) -> reinstall the CUDA toolkit or set CUDA_HOME")
  else()
    set(PRAC_CUDA_MAJOR "${CMAKE_MATCH_1}")
    set(PRAC_CUDA_VERSION "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
    if(PRAC_CUDA_MAJOR LESS 12)
      set(_prac_cuda_reason "nvcc ${PRAC_CUDA_VERSION} at ${_prac_nvcc} is too old (sm_90a needs >= 12.0; 13.x expected) -> install CUDA 13 or set CUDA_HOME")
    else()
      get_filename_component(_prac_nvcc_real "${_prac_nvcc}" REALPATH)
      get_filename_component(_prac_nvcc_bindir "${_prac_nvcc_real}" DIRECTORY)
      get_filename_component(_prac_cuda_toolkit_root "${_prac_nvcc_bindir}" DIRECTORY)
      foreach(d "${_prac_cuda_toolkit_root}/include" "${_prac_cuda_toolkit_root}/targets/${_prac_cuda_target_dir}/include")
        if(EXISTS "${d}/cuda_runtime.h")
          set(_prac_cuda_toolkit_inc "${d}")
          break()
        endif()
      endforeach()
      if(NOT _prac_cuda_toolkit_inc)
        set(_prac_cuda_reason "nvcc ${PRAC_CUDA_VERSION} at ${_prac_nvcc} has no cuda_runtime.h beside it -> install the full CUDA toolkit (cudart headers)")
      endif()
    endif()
  endif()
endif()

# CUDA libraries: roots in order. cu12-style wheels keep one folder per library.
set(_prac_cuda_roots "")
if(_prac_cuda_home_override)
  list(APPEND _prac_cuda_roots "${_prac_cuda_home_override}")
endif()
list(APPEND _prac_cuda_roots "${_prac_cuda_toolkit_root}")
foreach(d IN LISTS PRAC_PIP_NVIDIA_DIRS)
  if(PRAC_CUDA_MAJOR)
    list(APPEND _prac_cuda_roots "${d}/cu${PRAC_CUDA_MAJOR}")
  endif()
  list(APPEND _prac_cuda_roots "${d}/cublas" "${d}/cusolver" "${d}/curand" "${d}/cuda_runtime" "${d}/cuda_nvrtc")
endforeach()
list(APPEND _prac_cuda_roots /usr /usr/local)
list(REMOVE_DUPLICATES _prac_cuda_roots)

set(_prac_cuda_libs_ok FALSE)
if(NOT _prac_cuda_reason)
  math(EXPR _prac_cusolver_major "${PRAC_CUDA_MAJOR} - 1")
  set(_prac_libspec
      "CUDART|cuda_runtime.h|libcudart_static.a,libcudart.so.${PRAC_CUDA_MAJOR},libcudart.so"
      "CUBLAS|cublas_v2.h|libcublas.so.${PRAC_CUDA_MAJOR},libcublas.so"
      "CUBLASLT|cublasLt.h|libcublasLt.so.${PRAC_CUDA_MAJOR},libcublasLt.so"
      "CUSOLVER|cusolverDn.h|libcusolver.so.${_prac_cusolver_major},libcusolver.so"
      "CURAND|curand.h|libcurand.so.10,libcurand.so")
  set(_prac_cuda_libs_ok TRUE)
  set(_prac_cuda_missing "")
  foreach(spec IN LISTS _prac_libspec)
    string(REPLACE "|" ";" spec "${spec}")
    list(GET spec 0 key)
    list(GET spec 1 hdr)
    list(SUBLIST spec 2 -1 names)
    string(REPLACE "," ";" names "${names}")
    # cudart must come from nvcc's own toolkit first (device-code link compatibility).
    if(key STREQUAL "CUDART")
      set(roots "${_prac_cuda_toolkit_root}" ${_prac_cuda_roots})
    else()
      set(roots ${_prac_cuda_roots})
    endif()
    _prac_locate(PRAC_${key} HEADER "${hdr}" NAMES ${names} ROOTS ${roots} PREFER_INCS "${_prac_cuda_toolkit_inc}")
    if(NOT PRAC_${key}_FOUND)
      set(_prac_cuda_libs_ok FALSE)
      list(APPEND _prac_cuda_missing "${key}")
    endif()
  endforeach()
endif()

set(_prac_pip_hint "pip install nvidia-cublas nvidia-cusolver nvidia-curand nvidia-cuda-runtime, or set CUDA_HOME")

# Probe: can CMake enable CUDA with this nvcc, host compiler and architecture list? Done in a throw-away
# sub-project so that a broken toolkit gives a clear line instead of a fatal enable_language(CUDA) error.
# The result is cached per (nvcc, host compiler, archs).
if(NOT _prac_cuda_reason AND _prac_cuda_libs_ok)
  if(NOT CMAKE_CUDA_HOST_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "host compiler for nvcc")
  endif()
  set(_prac_probe_key "${_prac_nvcc}|${CMAKE_CUDA_HOST_COMPILER}|${PRAC_CUDA_ARCHS}|${CMAKE_VERSION}")
  if(NOT PRAC_CUDA_PROBE_KEY STREQUAL _prac_probe_key)
    set(_pd "${CMAKE_BINARY_DIR}/CMakeFiles/prac_cuda_probe")
    file(REMOVE_RECURSE "${_pd}")
    file(MAKE_DIRECTORY "${_pd}")
    file(WRITE "${_pd}/CMakeLists.txt"
         "cmake_minimum_required(VERSION 3.24)\nproject(prac_cuda_probe LANGUAGES CXX CUDA)\n")
    message(CHECK_START "Checking that nvcc ${PRAC_CUDA_VERSION} works for ${PRAC_CUDA_ARCHS}")
    execute_process(
      COMMAND "${CMAKE_COMMAND}" -S "${_pd}" -B "${_pd}/build" -G "${CMAKE_GENERATOR}"
              "-DCMAKE_MAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}"
              "-DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}"
              "-DCMAKE_CUDA_COMPILER=${_prac_nvcc}"
              "-DCMAKE_CUDA_HOST_COMPILER=${CMAKE_CUDA_HOST_COMPILER}"
              "-DCMAKE_CUDA_ARCHITECTURES=${PRAC_CUDA_ARCHS}"
      RESULT_VARIABLE _prac_probe_rc OUTPUT_VARIABLE _prac_probe_out ERROR_VARIABLE _prac_probe_out TIMEOUT 300)
    if(_prac_probe_rc EQUAL 0)
      message(CHECK_PASS "yes")
      set(PRAC_CUDA_PROBE_OK TRUE CACHE INTERNAL "")
    else()
      message(CHECK_FAIL "no (log: ${_pd}/probe.log)")
      file(WRITE "${_pd}/probe.log" "${_prac_probe_out}")
      set(PRAC_CUDA_PROBE_OK FALSE CACHE INTERNAL "")
    endif()
    set(PRAC_CUDA_PROBE_KEY "${_prac_probe_key}" CACHE INTERNAL "")
  endif()
  if(PRAC_CUDA_PROBE_OK)
    set(PRAC_HAVE_CUDA ON)
  else()
    set(_prac_cuda_reason "nvcc ${PRAC_CUDA_VERSION} at ${_prac_nvcc} failed CMake's CUDA check for archs '${PRAC_CUDA_ARCHS}' (see ${CMAKE_BINARY_DIR}/CMakeFiles/prac_cuda_probe/probe.log) -> fix the toolkit/host compiler or set PRAC_CUDA_ARCHS")
  endif()
elseif(NOT _prac_cuda_reason)
  list(JOIN _prac_cuda_missing ", " _m)
  set(_prac_cuda_reason "nvcc ${PRAC_CUDA_VERSION} found but libraries missing (${_m}) -> ${_prac_pip_hint}")
endif()

if(PRAC_HAVE_CUDA)
  set(CMAKE_CUDA_COMPILER "${_prac_nvcc}")
  set(CMAKE_CUDA_ARCHITECTURES "${PRAC_CUDA_ARCHS}")
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
  enable_language(CUDA)
  _prac_line(TRUE "CUDA toolkit" "nvcc ${PRAC_CUDA_VERSION} (${_prac_nvcc}), archs ${PRAC_CUDA_ARCHS}")
else()
  if(_prac_cuda_mode STREQUAL "ON")
    _prac_line(FALSE "CUDA toolkit" "${_prac_cuda_reason}")
    message(FATAL_ERROR "PRAC_CUDA=ON but CUDA is not usable: ${_prac_cuda_reason}")
  endif()
  if(NOT PRAC_CUDA_EMU)
    _prac_line(FALSE "CUDA toolkit" "${_prac_cuda_reason}; building CPU-only (.cu compiled as C++ with PRAC_NO_CUDA=1)")
  endif()
endif()

# --- prac::cuda_libs --------------------------------------------------------------------------------------------
add_library(prac::cuda_libs INTERFACE IMPORTED GLOBAL)
if(PRAC_HAVE_CUDA)
  foreach(key CUDART CUBLAS CUBLASLT CUSOLVER CURAND)
    string(TOLOWER "${key}" lk)
    _prac_imported_lib(prac_nv_${lk} "${PRAC_${key}_LIB}")
    # Headers: nvcc's own include dir needs no -I for .cu files; a different root's include goes in as
    # SYSTEM (searched after nvcc's own), so a wheel's newer cuda_runtime.h never shadows the toolkit's.
    if(PRAC_${key}_INC)
      target_include_directories(prac::cuda_libs SYSTEM INTERFACE "${PRAC_${key}_INC}")
    endif()
  endforeach()
  target_link_libraries(prac::cuda_libs INTERFACE prac_nv_cublaslt prac_nv_cublas prac_nv_cusolver prac_nv_curand
                        prac_nv_cudart Threads::Threads ${CMAKE_DL_LIBS} rt)
  target_compile_definitions(prac::cuda_libs INTERFACE PRAC_HAVE_CUDA=1)
  _prac_describe_lib(_d1 "${PRAC_CUBLAS_LIB}")
  _prac_describe_lib(_d2 "${PRAC_CUBLASLT_LIB}")
  get_filename_component(_cublas_v "${PRAC_CUBLAS_INC}/cublas_api.h" ABSOLUTE)
  _prac_header_version(_cublas_v "${_cublas_v}" CUBLAS_VER_MAJOR CUBLAS_VER_MINOR CUBLAS_VER_PATCH)
  if(_cublas_v)
    set(_cublas_v "${_cublas_v} (headers ${PRAC_CUBLAS_INC}); ")
  endif()
  _prac_line(TRUE "cuBLAS/cuBLASLt" "${_cublas_v}${_d1}; ${_d2}")
  _prac_describe_lib(_d1 "${PRAC_CUSOLVER_LIB}")
  _prac_line(TRUE "cuSOLVER" "${_d1}")
  _prac_describe_lib(_d1 "${PRAC_CURAND_LIB}")
  _prac_line(TRUE "cuRAND" "${_d1}")
elseif(_prac_cuda_mode STREQUAL "OFF" OR NOT _prac_nvcc)
  _prac_line(FALSE "cuBLAS/cuBLASLt" "not used (no CUDA)")
  _prac_line(FALSE "cuSOLVER" "not used (no CUDA)")
  _prac_line(FALSE "cuRAND" "not used (no CUDA)")
else()
  foreach(pair "CUBLAS|cuBLAS/cuBLASLt|nvidia-cublas" "CUSOLVER|cuSOLVER|nvidia-cusolver" "CURAND|cuRAND|nvidia-curand")
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 key)
    list(GET pair 1 label)
    list(GET pair 2 wheel)
    if(PRAC_${key}_FOUND AND (NOT key STREQUAL "CUBLAS" OR PRAC_CUBLASLT_FOUND))
      _prac_describe_lib(_d1 "${PRAC_${key}_LIB}")
      _prac_line(TRUE "${label}" "${_d1} (unused: CUDA toolkit not usable)")
    else()
      _prac_line(FALSE "${label}" "not found -> pip install ${wheel}, or set CUDA_HOME to a full CUDA 13 toolkit")
    endif()
  endforeach()
endif()

# --------------------------------------------------------------------------------------------------------------
# cuDNN, cudnn-frontend, NCCL
# --------------------------------------------------------------------------------------------------------------
_prac_override(_prac_cudnn_path CUDNN_PATH)
_prac_override(_prac_nccl_path NCCL_PATH)
_prac_override(_prac_fe_path CUDNN_FRONTEND_PATH)

# An optional NVIDIA library (cuDNN, NCCL): in <override> (the <override_var> setting) when given, else in CUDA_HOME,
# nvcc's toolkit, the pip wheel's nvidia/<pip_dir>, /usr, /usr/local. When found: PRAC_HAVE_<key> ON, and <target>
# carries its headers, the library and the definition PRAC_HAVE_<key>=1. A macro, so that PRAC_<key>_INC and
# PRAC_<key>_LIB stay visible to the rest of this file.
macro(_prac_optional_nv_lib key label override override_var pip_dir header lib_names target version_header
      version_macros fix)
  if(NOT "${override}" STREQUAL "")
    set(_roots "${override}")
    set(_where "${override_var}=${override}")
  else()
    set(_roots "${_prac_cuda_home_override}" "${_prac_cuda_toolkit_root}")
    foreach(d IN LISTS PRAC_PIP_NVIDIA_DIRS)
      list(APPEND _roots "${d}/${pip_dir}")
    endforeach()
    list(APPEND _roots /usr /usr/local)
    set(_where "CUDA_HOME, nvcc's toolkit, pip nvidia/${pip_dir}, /usr, /usr/local")
  endif()
  _prac_locate(PRAC_${key} HEADER ${header} NAMES ${lib_names} ROOTS ${_roots})
  if(PRAC_${key}_FOUND)
    set(PRAC_HAVE_${key} ON)
    string(TOLOWER "prac_nv_${key}" _imported)
    _prac_imported_lib(${_imported} "${PRAC_${key}_LIB}")
    target_include_directories(${target} SYSTEM INTERFACE "${PRAC_${key}_INC}")
    target_link_libraries(${target} INTERFACE ${_imported} prac::cuda_libs)
    target_compile_definitions(${target} INTERFACE PRAC_HAVE_${key}=1)
    _prac_header_version(_v "${PRAC_${key}_INC}/${version_header}" ${version_macros})
    _prac_describe_lib(_d "${PRAC_${key}_LIB}")
    _prac_line(TRUE "${label}" "${_v} (headers ${PRAC_${key}_INC}; ${_d})")
  else()
    _prac_line(FALSE "${label}" "not found in ${_where} -> ${fix}, or set ${override_var}")
  endif()
endmacro()

set(PRAC_HAVE_CUDNN OFF)
set(PRAC_HAVE_CUDNN_FRONTEND OFF)
set(PRAC_HAVE_NCCL OFF)
add_library(prac::cudnn INTERFACE IMPORTED GLOBAL)
add_library(prac::nccl INTERFACE IMPORTED GLOBAL)

if(PRAC_HAVE_CUDA)
  # cuDNN
  _prac_optional_nv_lib(CUDNN cuDNN "${_prac_cudnn_path}" CUDNN_PATH cudnn cudnn.h "libcudnn.so.9;libcudnn.so"
                        prac::cudnn cudnn_version.h "CUDNN_MAJOR;CUDNN_MINOR;CUDNN_PATCHLEVEL"
                        "pip install nvidia-cudnn-cu13 (or apt-get install cudnn9-cuda-13)")

  # cudnn-frontend (header-only)
  if(_prac_fe_path)
    set(_fe_dirs "${_prac_fe_path}/include" "${_prac_fe_path}")
    set(_where "CUDNN_FRONTEND_PATH=${_prac_fe_path}")
  else()
    set(_fe_dirs "${PRAC_PIP_FRONTEND_INC}")
    if(PRAC_CUDNN_INC)
      list(APPEND _fe_dirs "${PRAC_CUDNN_INC}")
    endif()
    list(APPEND _fe_dirs /usr/include /usr/local/include)
    set(_where "pip nvidia-cudnn-frontend (python ${PRAC_PYTHON}), the cuDNN include dir, /usr/include, /usr/local/include")
  endif()
  set(_fe_inc "")
  foreach(d IN LISTS _fe_dirs)
    if(NOT d STREQUAL "" AND EXISTS "${d}/cudnn_frontend.h")
      set(_fe_inc "${d}")
      break()
    endif()
  endforeach()
  # the frontend's headers call NVRTC (cuDNN's runtime-compiled engines): usable only with libnvrtc beside it
  set(PRAC_NVRTC_FOUND FALSE)
  if(_fe_inc AND PRAC_HAVE_CUDNN)
    _prac_locate(PRAC_NVRTC HEADER nvrtc.h NAMES libnvrtc.so.${PRAC_CUDA_MAJOR} libnvrtc.so ROOTS ${_prac_cuda_roots}
                 PREFER_INCS "${_prac_cuda_toolkit_inc}")
  endif()
  if(_fe_inc AND PRAC_HAVE_CUDNN AND PRAC_NVRTC_FOUND)
    set(PRAC_HAVE_CUDNN_FRONTEND ON)
    set(PRAC_CUDNN_FRONTEND_INCLUDE_DIR "${_fe_inc}")
    _prac_imported_lib(prac_nv_nvrtc "${PRAC_NVRTC_LIB}")
    target_include_directories(prac::cudnn SYSTEM INTERFACE "${_fe_inc}")
    target_link_libraries(prac::cudnn INTERFACE prac_nv_nvrtc)
    target_compile_definitions(prac::cudnn INTERFACE PRAC_HAVE_CUDNN_FRONTEND=1)
    _prac_header_version(_v "${_fe_inc}/cudnn_frontend_version.h"
                         CUDNN_FRONTEND_MAJOR_VERSION CUDNN_FRONTEND_MINOR_VERSION CUDNN_FRONTEND_PATCH_VERSION)
    _prac_line(TRUE "cudnn-frontend" "${_v} (headers ${_fe_inc}; NVRTC ${PRAC_NVRTC_LIB})")
  elseif(_fe_inc AND PRAC_HAVE_CUDNN)
    _prac_line(FALSE "cudnn-frontend" "headers at ${_fe_inc}, but libnvrtc.so.${PRAC_CUDA_MAJOR} (which it calls) is missing -> pip install nvidia-cuda-nvrtc; the hand-written attention kernels are used")
  elseif(_fe_inc)
    _prac_line(FALSE "cudnn-frontend" "headers at ${_fe_inc} but cuDNN itself is missing -> install cuDNN (see above)")
  else()
    _prac_line(FALSE "cudnn-frontend" "not found in ${_where} -> pip install --no-deps nvidia-cudnn-frontend, or set CUDNN_FRONTEND_PATH")
  endif()

  # NCCL
  _prac_optional_nv_lib(NCCL NCCL "${_prac_nccl_path}" NCCL_PATH nccl nccl.h "libnccl.so.2;libnccl.so" prac::nccl
                        nccl.h "NCCL_MAJOR;NCCL_MINOR;NCCL_PATCH" "pip install nvidia-nccl-cu13 (or apt-get install libnccl-dev)")
  # RPATH for all NVIDIA shared libraries, on prac::cuda_libs (which prac::cudnn and prac::nccl link too).
  # cuDNN's and NCCL's directories go first: when they come from an override or a wheel while the toolkit
  # directory holds another copy, the copy whose headers were compiled against is the one loaded.
  _prac_rpath(prac::cuda_libs "${PRAC_CUDNN_LIB}" "${PRAC_NCCL_LIB}" "${PRAC_CUBLAS_LIB}" "${PRAC_CUBLASLT_LIB}"
              "${PRAC_CUSOLVER_LIB}" "${PRAC_CURAND_LIB}" "${PRAC_CUDART_LIB}" "${PRAC_NVRTC_LIB}")
else()
  _prac_line(FALSE "cuDNN" "not used (no CUDA)")
  _prac_line(FALSE "cudnn-frontend" "not used (no CUDA)")
  _prac_line(FALSE "NCCL" "not used (no CUDA)")
endif()

# --------------------------------------------------------------------------------------------------------------
# MPI (OpenMPI), optional
# --------------------------------------------------------------------------------------------------------------
set(PRAC_HAVE_MPI OFF)
add_library(prac::mpi INTERFACE IMPORTED GLOBAL)
find_package(MPI QUIET COMPONENTS CXX)
if(MPI_CXX_FOUND AND TARGET MPI::MPI_CXX)
  set(PRAC_HAVE_MPI ON)
  target_link_libraries(prac::mpi INTERFACE MPI::MPI_CXX)
  target_compile_definitions(prac::mpi INTERFACE PRAC_HAVE_MPI=1)
  set(_impl "")
  foreach(d IN LISTS MPI_CXX_INCLUDE_DIRS)
    if(EXISTS "${d}/mpi.h")
      _prac_header_version(_v "${d}/mpi.h" OMPI_MAJOR_VERSION OMPI_MINOR_VERSION OMPI_RELEASE_VERSION)
      if(_v)
        set(_impl "Open MPI ${_v}, ")
      else()
        file(STRINGS "${d}/mpi.h" _l REGEX "define MPICH_VERSION ")
        if(_l MATCHES "\"([0-9.]+)\"")
          set(_impl "MPICH ${CMAKE_MATCH_1}, ")
        endif()
      endif()
      break()
    endif()
  endforeach()
  _prac_line(TRUE "MPI" "${_impl}MPI ${MPI_CXX_VERSION} (MPI::MPI_CXX; mpiexec ${MPIEXEC_EXECUTABLE})")
  # How tests start several ranks. Open MPI: allow root (CI), more ranks than cores, no CMA in containers
  # (open-mpi/ompi#4948), and, like .ci/run, the "isolated" launcher when there is no ssh/rsh (Open MPI 4.1 refuses
  # to start without one even for local ranks). --oversubscribe is an Open MPI flag (MPICH's mpiexec rejects it).
  set(PRAC_MPI_TEST_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1)
  find_program(PRAC_SSH_EXECUTABLE NAMES ssh rsh)
  mark_as_advanced(PRAC_SSH_EXECUTABLE)
  if(NOT PRAC_SSH_EXECUTABLE)
    list(APPEND PRAC_MPI_TEST_ENV OMPI_MCA_plm=isolated)
  endif()
  execute_process(COMMAND "${MPIEXEC_EXECUTABLE}" --version OUTPUT_VARIABLE _v ERROR_QUIET TIMEOUT 30)
  set(PRAC_MPIEXEC_FLAGS "")
  if(_v MATCHES "Open MPI|OpenRTE")
    set(PRAC_MPIEXEC_FLAGS --oversubscribe)
  endif()
else()
  _prac_line(FALSE "MPI" "not found -> apt-get install libopenmpi-dev openmpi-bin")
endif()

# --------------------------------------------------------------------------------------------------------------
# OpenBLAS (cblas) + LAPACKE, required
# --------------------------------------------------------------------------------------------------------------
add_library(prac::blas INTERFACE IMPORTED GLOBAL)
# Prefer OpenBLAS's own cblas.h over netlib's, and its OpenMP build (Debian: libopenblas-openmp-dev) over the
# pthreads one: our kernels use OpenMP, and two thread pools spinning on the same cores slow both down
# several-fold. The suffixes are tried in order below every prefix (CMAKE_PREFIX_PATH first, then the system).
find_path(PRAC_CBLAS_INCLUDE_DIR NAMES cblas.h
          PATH_SUFFIXES "${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp" "${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread"
                        openblas-openmp openblas-pthread openblas
          PATHS /opt/OpenBLAS/include)
# The suffixes also find Debian's packages unpacked under a CMAKE_PREFIX_PATH (dpkg -x makes no alternatives
# symlinks, so only <prefix>/lib/<multiarch>/openblas-pthread/libopenblas.so exists there).
find_library(PRAC_OPENBLAS_LIBRARY NAMES openblas openblas64
             PATH_SUFFIXES openblas-openmp openblas-pthread
             PATHS /opt/OpenBLAS/lib)
find_path(PRAC_LAPACKE_INCLUDE_DIR NAMES lapacke.h PATH_SUFFIXES openblas lapacke)
find_library(PRAC_LAPACKE_LIBRARY NAMES lapacke)
if(PRAC_CBLAS_INCLUDE_DIR AND PRAC_OPENBLAS_LIBRARY AND PRAC_LAPACKE_INCLUDE_DIR AND PRAC_LAPACKE_LIBRARY)
  target_include_directories(prac::blas INTERFACE "${PRAC_CBLAS_INCLUDE_DIR}" "${PRAC_LAPACKE_INCLUDE_DIR}")
  target_link_libraries(prac::blas INTERFACE "${PRAC_LAPACKE_LIBRARY}" "${PRAC_OPENBLAS_LIBRARY}")
  set(_v "")
  if(EXISTS "${PRAC_CBLAS_INCLUDE_DIR}/openblas_config.h")
    file(STRINGS "${PRAC_CBLAS_INCLUDE_DIR}/openblas_config.h" _l REGEX "define OPENBLAS_VERSION")
    if(_l MATCHES "OpenBLAS ([0-9.]+)")
      set(_v " ${CMAKE_MATCH_1}")
    endif()
  endif()
  _prac_line(TRUE "OpenBLAS+LAPACKE" "OpenBLAS${_v} (${PRAC_OPENBLAS_LIBRARY}, cblas.h in ${PRAC_CBLAS_INCLUDE_DIR}); LAPACKE ${PRAC_LAPACKE_LIBRARY}")
else()
  set(_miss "")
  if(NOT PRAC_CBLAS_INCLUDE_DIR OR NOT PRAC_OPENBLAS_LIBRARY)
    list(APPEND _miss "OpenBLAS (cblas.h/libopenblas)")
  endif()
  if(NOT PRAC_LAPACKE_INCLUDE_DIR OR NOT PRAC_LAPACKE_LIBRARY)
    list(APPEND _miss "LAPACKE (lapacke.h/liblapacke)")
  endif()
  list(JOIN _miss " and " _miss)
  _prac_line(FALSE "OpenBLAS+LAPACKE" "${_miss} not found -> apt-get install libopenblas-dev liblapacke-dev")
  _prac_require_failed("OpenBLAS+LAPACKE" "apt-get install libopenblas-dev liblapacke-dev")
endif()

# --------------------------------------------------------------------------------------------------------------
# OpenMP, required
# --------------------------------------------------------------------------------------------------------------
add_library(prac::openmp INTERFACE IMPORTED GLOBAL)
find_package(OpenMP QUIET COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  target_link_libraries(prac::openmp INTERFACE OpenMP::OpenMP_CXX)
  if(PRAC_HAVE_CUDA AND OpenMP_CXX_FLAGS)
    # OpenMP::OpenMP_CXX only adds -fopenmp for CXX sources; pass it to nvcc's host compiler too.
    separate_arguments(_omp_flags UNIX_COMMAND "${OpenMP_CXX_FLAGS}")
    foreach(f IN LISTS _omp_flags)
      target_compile_options(prac::openmp INTERFACE "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${f}>")
    endforeach()
  endif()
  _prac_line(TRUE "OpenMP" "${OpenMP_CXX_VERSION} (${OpenMP_CXX_FLAGS}; ${OpenMP_CXX_LIB_NAMES})")
else()
  _prac_line(FALSE "OpenMP" "not found -> apt-get install libomp-dev (clang) or use GCC (libgomp)")
  _prac_require_failed("OpenMP" "apt-get install libomp-dev, or build with GCC")
endif()

# --------------------------------------------------------------------------------------------------------------
# PCRE2 (8-bit), optional
# --------------------------------------------------------------------------------------------------------------
set(PRAC_HAVE_PCRE2 OFF)
add_library(prac::pcre2 INTERFACE IMPORTED GLOBAL)
find_path(PRAC_PCRE2_INCLUDE_DIR NAMES pcre2.h)
find_library(PRAC_PCRE2_LIBRARY NAMES pcre2-8)
if(PRAC_PCRE2_INCLUDE_DIR AND PRAC_PCRE2_LIBRARY)
  set(PRAC_HAVE_PCRE2 ON)
  target_include_directories(prac::pcre2 INTERFACE "${PRAC_PCRE2_INCLUDE_DIR}")
  target_link_libraries(prac::pcre2 INTERFACE "${PRAC_PCRE2_LIBRARY}")
  target_compile_definitions(prac::pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=8 PRAC_HAVE_PCRE2=1)
  _prac_header_version(_v "${PRAC_PCRE2_INCLUDE_DIR}/pcre2.h" PCRE2_MAJOR PCRE2_MINOR)
  _prac_line(TRUE "PCRE2" "${_v} (${PRAC_PCRE2_LIBRARY})")
else()
  _prac_line(FALSE "PCRE2" "pcre2-8 not found -> apt-get install libpcre2-dev")
endif()

# --------------------------------------------------------------------------------------------------------------
# SentencePiece, optional
# --------------------------------------------------------------------------------------------------------------
set(PRAC_HAVE_SENTENCEPIECE OFF)
add_library(prac::sentencepiece INTERFACE IMPORTED GLOBAL)
find_path(PRAC_SENTENCEPIECE_INCLUDE_DIR NAMES sentencepiece_processor.h)
find_library(PRAC_SENTENCEPIECE_LIBRARY NAMES sentencepiece)
if(PRAC_SENTENCEPIECE_INCLUDE_DIR AND PRAC_SENTENCEPIECE_LIBRARY)
  set(PRAC_HAVE_SENTENCEPIECE ON)
  target_include_directories(prac::sentencepiece INTERFACE "${PRAC_SENTENCEPIECE_INCLUDE_DIR}")
  target_link_libraries(prac::sentencepiece INTERFACE "${PRAC_SENTENCEPIECE_LIBRARY}")
  target_compile_definitions(prac::sentencepiece INTERFACE PRAC_HAVE_SENTENCEPIECE=1)
  set(_v "")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PRAC_PC_SPM QUIET sentencepiece)
    if(PRAC_PC_SPM_VERSION)
      set(_v "${PRAC_PC_SPM_VERSION} ")
    endif()
  endif()
  _prac_line(TRUE "SentencePiece" "${_v}(${PRAC_SENTENCEPIECE_LIBRARY})")
else()
  _prac_line(FALSE "SentencePiece" "not found -> apt-get install libsentencepiece-dev")
endif()

# --------------------------------------------------------------------------------------------------------------
# nlohmann_json, required
# --------------------------------------------------------------------------------------------------------------
add_library(prac::json INTERFACE IMPORTED GLOBAL)
find_package(nlohmann_json 3 QUIET CONFIG)
if(nlohmann_json_FOUND AND TARGET nlohmann_json::nlohmann_json)
  target_link_libraries(prac::json INTERFACE nlohmann_json::nlohmann_json)
  _prac_line(TRUE "nlohmann_json" "${nlohmann_json_VERSION} (${nlohmann_json_DIR})")
else()
  _prac_line(FALSE "nlohmann_json" "not found -> apt-get install nlohmann-json3-dev")
  _prac_require_failed("nlohmann_json" "apt-get install nlohmann-json3-dev")
endif()

# --------------------------------------------------------------------------------------------------------------
# Boost.Math's headers (prac_analyze's Student t quantile), required; no library to link
# --------------------------------------------------------------------------------------------------------------
find_path(PRAC_BOOST_MATH_INC boost/math/distributions/students_t.hpp)
if(PRAC_BOOST_MATH_INC)
  _prac_line(TRUE "Boost.Math" "headers in ${PRAC_BOOST_MATH_INC}")
  if(NOT PRAC_BOOST_MATH_INC IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)  # (-isystem /usr/include breaks libstdc++)
    include_directories(SYSTEM "${PRAC_BOOST_MATH_INC}")
  endif()
else()
  _prac_line(FALSE "Boost.Math" "not found -> apt-get install libboost-dev")
  _prac_require_failed("Boost.Math" "apt-get install libboost-dev")
endif()

# --------------------------------------------------------------------------------------------------------------
# GoogleTest, required
# --------------------------------------------------------------------------------------------------------------
find_package(GTest QUIET)
if(GTest_FOUND AND TARGET GTest::gtest AND TARGET GTest::gtest_main)
  set(_v "${GTest_VERSION}")
  if(NOT _v)
    set(_v "${GTEST_VERSION}")
  endif()
  set(_d "${GTest_DIR}")
  if(NOT _d)
    get_target_property(_d GTest::gtest IMPORTED_LOCATION)
  endif()
  _prac_line(TRUE "GoogleTest" "${_v} (GTest::gtest, GTest::gtest_main; ${_d})")
else()
  _prac_line(FALSE "GoogleTest" "not found -> apt-get install libgtest-dev googletest")
  _prac_require_failed("GoogleTest" "apt-get install libgtest-dev googletest")
endif()

if(PRAC_DEPS_MISSING_REQUIRED)
  list(JOIN PRAC_DEPS_MISSING_REQUIRED "\n  " _m)
  message(FATAL_ERROR "Required dependencies are missing:\n  ${_m}\n"
                      "On Debian/Ubuntu: apt-get update && apt-get install -y libopenblas-dev liblapacke-dev "
                      "libomp-dev nlohmann-json3-dev libboost-dev libgtest-dev googletest (or run: bash .ci/run)")
endif()

include(GoogleTest)

# prac_mpiexec(<out> <np>): the command list that starts <np> ranks of a test program (append the program).
function(prac_mpiexec out np)
  set(${out} ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${PRAC_MPIEXEC_FLAGS} ${MPIEXEC_PREFLAGS} PARENT_SCOPE)
endfunction()

# --------------------------------------------------------------------------------------------------------------
# prac_cuda_or_cxx(<target>)
#
# Call once per target that has .cu sources, after add_executable/add_library with all its sources.
#   CUDA ON : CUDA_ARCHITECTURES=${PRAC_CUDA_ARCHS}, CUDA_STANDARD 17 (-std=c++17), --expt-relaxed-constexpr,
#             -O3 (not in Debug builds; no --use_fast_math), PUBLIC PRAC_HAVE_CUDA=1, PUBLIC link prac::cuda_libs.
#   CUDA OFF: every .cu source of the target becomes LANGUAGE CXX compiled with "-x c++", and
#             PRAC_NO_CUDA=1 is defined PUBLIC. The code must then not include CUDA headers (#if !PRAC_NO_CUDA).
# Uses the keyword form of target_link_libraries (PUBLIC), so the caller must use keywords too.
# --------------------------------------------------------------------------------------------------------------
function(prac_cuda_or_cxx target)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "prac_cuda_or_cxx: '${target}' is not a target")
  endif()
  get_target_property(_srcs ${target} SOURCES)
  get_target_property(_src_dir ${target} SOURCE_DIR)
  set(_cu "")
  foreach(s IN LISTS _srcs)
    if(s MATCHES "\\.cu$")
      list(APPEND _cu "${s}")
    endif()
  endforeach()
  if(PRAC_HAVE_CUDA)
    set_target_properties(${target} PROPERTIES
      CUDA_ARCHITECTURES "${PRAC_CUDA_ARCHS}"
      CUDA_STANDARD 17
      CUDA_STANDARD_REQUIRED ON
      CUDA_EXTENSIONS OFF)
    target_compile_options(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>"
      "$<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<NOT:$<CONFIG:Debug>>>:-O3>")
    target_compile_definitions(${target} PUBLIC PRAC_HAVE_CUDA=1)
    target_link_libraries(${target} PUBLIC prac::cuda_libs)
  else()
    if(_cu)
      # TARGET_DIRECTORY: source properties are per directory; make them visible where the target lives.
      set_source_files_properties(${_cu} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX)
      set_property(SOURCE ${_cu} TARGET_DIRECTORY ${target} APPEND PROPERTY COMPILE_OPTIONS -x c++)
    endif()
    target_compile_definitions(${target} PUBLIC PRAC_NO_CUDA=1)
  endif()
endfunction()
