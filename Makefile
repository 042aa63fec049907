# PRAC trainer -- front door (llm.c style). CMake does the work; this file only drives it.
#
#   make              configure into build/ (cmake) and build everything with -j$(nproc)
#   make test         build, then run every test: ctest --test-dir build --output-on-failure -j$(nproc)
#   make train        build, then run the main job on the built-in corpus: $(TRAIN_BIN) $(TRAIN_ARGS) (./train_gpt2)
#   make clean        remove build/ and the binaries at the repo root
#   make help         this list plus the variables
#
# Variables (on the command line or in the environment):
#   CUDA_ARCHS=...    -> -DPRAC_CUDA_ARCHS (default in cmake: "80-real;90a-real;90-virtual"; CI uses 90a-real)
#   PRAC_CUDA=...     AUTO (default) | ON | OFF  (OFF: CPU-only build, .cu compiled as C++)
#   PRECISION=...     BF16 | FP32 -> -DPRAC_PRECISION
#   BUILD_TYPE=...    Release (default) | Debug | RelWithDebInfo
#   CMAKE_ARGS=...    any extra cmake arguments, passed as they are
#   CUDA_HOME, CUDNN_PATH, NCCL_PATH, CUDNN_FRONTEND_PATH   where the NVIDIA libraries are (optional)
#   INSTALL_DEPS=0    do not run scripts/install_deps.sh before configuring (it installs missing apt/pip packages)
# The build reconfigures by itself whenever one of these changes; a variable dropped from the command line
# goes back to its default. Only CMAKE_ARGS cannot be undone that way: use `make clean` for that.

SHELL := /bin/bash
.DEFAULT_GOAL := all

BUILD_DIR  ?= build
BUILD_TYPE ?= Release
CUDA_ARCHS ?=
PRAC_CUDA  ?=
PRECISION  ?=
CMAKE_ARGS ?=
CTEST_ARGS ?=
INSTALL_DEPS ?= 1
NPROC      := $(shell nproc 2>/dev/null || echo 2)

# ---- make train ---------------------------------------------------------------------------------------------
# The lead may edit these: the binary and its arguments with and without a GPU.
TRAIN_BIN      ?= ./train_gpt2
TRAIN_ARGS_GPU ?= --model gpt2-124m
TRAIN_ARGS_CPU ?= --model gpt2-mini --steps 200 --seq-len 128 --eval-tokens 8192 --eval-interval 50 --sample 64
# A GPU is "present" when `nvidia-smi -L` lists one (evaluated only when TRAIN_ARGS is used).
HAVE_GPU        = $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo 1)
TRAIN_ARGS     ?= $(if $(HAVE_GPU),$(TRAIN_ARGS_GPU),$(TRAIN_ARGS_CPU))

# OpenMPI refuses to start as root and to run more ranks than cores; tests that use mpirun need both.
TEST_ENV ?= OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# ---- checks -------------------------------------------------------------------------------------------------
ifneq ($(filter-out BF16 FP32,$(PRECISION)),)
$(error PRECISION must be BF16 or FP32 (got '$(PRECISION)'))
endif
ifneq ($(filter-out AUTO ON OFF,$(PRAC_CUDA)),)
$(error PRAC_CUDA must be AUTO, ON or OFF (got '$(PRAC_CUDA)'))
endif

# ---- cmake arguments ----------------------------------------------------------------------------------------
# shq: single-quote for the shell. cmake_var: -DNAME='value' when set, -UNAME (back to the default) when not.
shq       = '$(subst ','\'',$(1))'
cmake_var = $(if $(strip $(2)),-D$(1)=$(call shq,$(strip $(2))),-U$(1))

CONFIG_ARGS := -DCMAKE_BUILD_TYPE=$(call shq,$(BUILD_TYPE)) \
               $(call cmake_var,PRAC_CUDA_ARCHS,$(CUDA_ARCHS)) \
               $(call cmake_var,PRAC_CUDA,$(PRAC_CUDA)) \
               $(call cmake_var,PRAC_PRECISION,$(PRECISION)) \
               $(call cmake_var,CUDA_HOME,$(CUDA_HOME)) \
               $(call cmake_var,CUDNN_PATH,$(CUDNN_PATH)) \
               $(call cmake_var,NCCL_PATH,$(NCCL_PATH)) \
               $(call cmake_var,CUDNN_FRONTEND_PATH,$(CUDNN_FRONTEND_PATH)) \
               $(CMAKE_ARGS)
# Handed to the recipes through the environment, so the quotes above survive (eval re-parses them).
export PRAC_CMAKE_ARGS := $(strip $(CONFIG_ARGS))
CONFIG_STAMP := $(BUILD_DIR)/.prac-cmake-args

.PHONY: all configure build test train clean help train_gpt2 train_llama

all: build

# Installs what is missing (scripts/install_deps.sh: one dpkg-query and one python3 call when nothing is), then runs
# cmake when build/ has never been configured or when the arguments differ from the last successful run.
configure:
	@if [ "$(INSTALL_DEPS)" != 0 ]; then bash scripts/install_deps.sh; fi
	@command -v cmake >/dev/null || { echo "cmake not found -> bash scripts/install_deps.sh (or apt-get install cmake)" >&2; exit 1; }
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ] || [ "$$(cat $(CONFIG_STAMP) 2>/dev/null)" != "$$PRAC_CMAKE_ARGS" ]; then \
	  rm -f $(CONFIG_STAMP); \
	  echo "cmake -S . -B $(BUILD_DIR) $$PRAC_CMAKE_ARGS"; \
	  eval cmake -S . -B $(BUILD_DIR) $$PRAC_CMAKE_ARGS && printf '%s\n' "$$PRAC_CMAKE_ARGS" > $(CONFIG_STAMP); \
	fi

# MAKEFLAGS is cleared so the inner make that cmake runs takes -j$(NPROC) without jobserver warnings.
build: configure
	MAKEFLAGS= cmake --build $(BUILD_DIR) -j$(NPROC)

train_gpt2 train_llama: configure
	MAKEFLAGS= cmake --build $(BUILD_DIR) -j$(NPROC) --target $@

# The emulated CUDA suite's kernel coverage line (written by the cuda-emu.coverage test) goes just above ctest's
# summary, so the output still ends with the summary and ctest's exit status is make's. stdbuf and the shell's
# line-by-line read keep ctest's lines flowing as they are printed (mawk would hold them back in a buffer).
test: build
	@set -o pipefail; $(TEST_ENV) $(shell command -v stdbuf >/dev/null && echo stdbuf -oL) \
	  ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(NPROC) $(CTEST_ARGS) | \
	  while IFS= read -r line; do \
	    case "$$line" in *"tests passed, "*" tests failed out of "*) \
	      [ -s $(BUILD_DIR)/cuda-emu-coverage.txt ] && { cat $(BUILD_DIR)/cuda-emu-coverage.txt; echo; } ;; esac; \
	    printf '%s\n' "$$line"; \
	  done

train: build
	$(TRAIN_BIN) $(TRAIN_ARGS)

clean:
	rm -rf $(BUILD_DIR) train_gpt2 train_llama finetune_roberta prep_data prac_analyze

help:
	@echo "PRAC trainer (GPT-2 / LLaMA with PRAC activation compression)"
	@echo ""
	@echo "  make, make build  configure into $(BUILD_DIR)/ and build (train_gpt2, train_llama, finetune_roberta,"
	@echo "                    prac_analyze and prep_data at the repo root; benchmarks in $(BUILD_DIR)/tools/)"
	@echo "  make configure    install what is missing and configure $(BUILD_DIR)/ (no build)"
	@echo "  make test         build, then ctest --test-dir $(BUILD_DIR) --output-on-failure -j$(NPROC)"
	@echo "  make train        build, then $(TRAIN_BIN) \$$(TRAIN_ARGS)"
	@echo "  make train_gpt2   build one binary (likewise train_llama)"
	@echo "  make clean        remove $(BUILD_DIR)/ and the binaries"
	@echo ""
	@echo "Variables:"
	@echo "  CUDA_ARCHS=...    CUDA architectures (default \"80-real;90a-real;90-virtual\": sm_80 + sm_90a + compute_90 PTX)"
	@echo "  PRAC_CUDA=...     AUTO (default) | ON (fail without nvcc) | OFF (CPU-only build)"
	@echo "  PRECISION=...     BF16 | FP32"
	@echo "  BUILD_TYPE=...    Release (default) | Debug | RelWithDebInfo   (now: $(BUILD_TYPE))"
	@echo "  CMAKE_ARGS=...    extra cmake arguments; CTEST_ARGS=... extra ctest arguments (e.g. -R name)"
	@echo "  CUDA_HOME, CUDNN_PATH, NCCL_PATH, CUDNN_FRONTEND_PATH   override where NVIDIA libraries are found"
	@echo "  INSTALL_DEPS=0    skip scripts/install_deps.sh (run before configuring: installs missing apt/pip packages)"
	@echo "  TRAIN_ARGS=...    arguments of make train; default with a GPU: $(TRAIN_ARGS_GPU)"
	@echo "                    and without one: $(TRAIN_ARGS_CPU)"
	@echo "  TRAIN_BIN=...     the binary of make train (default ./train_gpt2; e.g. TRAIN_BIN=./train_llama"
	@echo "                    TRAIN_ARGS=\"--model llama-mini ...\")"
	@echo "  BUILD_DIR=...     the build directory (default build)"
	@echo ""
	@echo "cmake arguments in use: $$PRAC_CMAKE_ARGS"
