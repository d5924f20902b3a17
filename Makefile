# dtlab: the only build entry. Everything lands in $(BUILD)/.
#
#   make                 build the library, lessons, benchmark, viewer, tools and tests
#   make deps            install the Debian packages dtlab needs
#   make test            run every test suite (about 8 minutes on 2 quiet cores)
#   make check           the quick subset: unit suites, collectives, lessons (1-2 minutes)
#   make demo            ring allreduce lesson at 4 ranks, then the viewer on its trace
#   make pictures        redraw the docs' pictures with the viewer (docs/viewer.md)
#   make run L=08 NP=4   run one lesson
#   make bench           collbench at 2 and 4 ranks, dtlab beside MPICH
#   make grade           the exercises' points table (EX=NN, SOLUTION=1, ...)
#   make reset EX=NN     put one exercise back as it was
#   make gradescope      Gradescope autograder zips, one per exercise (EX=NN: one)
#   make grade-class SUBMISSIONS=DIR   grade a whole class into a CSV (docs/course.md)
#   make valgrind        memcheck on every unit suite (a build without SANITIZE)
#   make hosts L=22 NP=3 lesson L on NP hosts made of network namespaces (root)
#
# Knobs: CUDA=auto|0|1  CUDA_ARCH="80 90"  BUILD=build  NP=4  MPIEXEC_TIMEOUT=120
#        SANITIZE=address,undefined  (see "sanitizers" below; its BUILD is build-san)

SANITIZE   ?=
BUILD      ?= $(if $(SANITIZE),build-san,build)
CUDA       ?= auto
CUDA_ARCH  ?= 80 90
NP         ?= 4
L          ?= 08
MPIEXEC    ?= mpiexec
export MPIEXEC_TIMEOUT ?= 120

# ---- tools ------------------------------------------------------------------
MPICC  := $(shell command -v mpicc 2>/dev/null)
NVCC   := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
PKGS   := check sdl2 SDL2_ttf SDL2_image zlib openblas
HAVE_PKGS := $(shell pkg-config --exists $(PKGS) 2>/dev/null && echo yes)

ifeq ($(CUDA),auto)
  CUDA := $(if $(NVCC),1,0)
endif
ifeq ($(CUDA),1)
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found on PATH or in /usr/local/cuda/bin)
  endif
  CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
endif

CC       := $(if $(MPICC),$(MPICC),mpicc)
CFLAGS   ?= -O3 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -MMD -MP -Ilib -pthread
# GCC 12 takes MPICH's MPI_STATUS(ES)_IGNORE, a constant pointer, for a zero-sized array
CFLAGS   += -Wno-stringop-overflow
# Nothing in dtlab watches floating-point traps or errno after a math function: so GCC
# may run element-wise loops with comparisons and sqrtf on vector registers (GELU, the
# optimizers: lib/nn). No result changes; these flags allow no reordering of arithmetic.
CFLAGS   += -fno-trapping-math -fno-math-errno
# No fused multiply-adds: lib/nn's loops also have AVX2 and AVX-512 builds (DTI_NN_WIDE,
# lib/nn/nn_internal.h), where GCC would otherwise fuse a * b + c into one rounding, and
# the results would then depend on the CPU. Baseline x86-64 has no FMA: nothing else moves.
CFLAGS   += -ffp-contract=off
# A section per function and per variable: each one's relocations are its own, so the
# grader reads from libdt.a which functions reach which (tests/grade/grade.sh: a
# learner's call to a function of dtlab that runs the collective the exercise builds is
# a call to that collective). The code is the same.
CFLAGS   += -ffunction-sections -fdata-sections
LDLIBS   := -lm -lz -pthread
# OpenBLAS (Debian's pthreads build): the CPU's matrix products (lib/nn/blas.c)
CFLAGS   += $(shell pkg-config --cflags openblas 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs openblas 2>/dev/null)
# --default-stream per-thread: each host thread's kernels and copies go to its own
# stream (DDP's communication thread overlaps the main thread's compute; device.cu)
NVFLAGS  := -O3 -Ilib -DDT_HAVE_CUDA --default-stream per-thread -Xcompiler -Wall,-Wextra $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a))

ifeq ($(CUDA),1)
  CFLAGS += -DDT_HAVE_CUDA -I$(CUDA_HOME)/include
  # cudart static, so binaries do not depend on where the runtime lives; cuBLAS (only
  # shared in the toolkit) opened on the first product (lib/nn/nn_kernels.cu: a CPU run
  # never maps it), from beside nvcc, or where the dynamic linker finds it
  LDLIBS += -lcudart_static -lstdc++ -ldl -lrt
  NVFLAGS += -DDT_CUBLAS='"$(CUDA_HOME)/lib64/libcublas.so"'

endif

# ---- sanitizers -------------------------------------------------------------
# SANITIZE=address,undefined (any list gcc's -fsanitize= takes) compiles and links
# everything with it through CFLAGS: the library, lessons, tests and graded exercises
# (mpicc) and the viewer (cc). CUDA kernels (.cu) are not instrumented. A sanitized
# build gets its own default BUILD, build-san, so it never mixes with a plain build;
# and $(BUILD)/config records CFLAGS, so a BUILD reused with other flags is rebuilt whole.
# ASan and UBSan stop a program at its first error and abort(), so that dtlab's handler
# names the rank ("killed by SIGABRT") under the sanitizer's report. UBSan's null check
# is left out: a store through NULL already dies of SIGSEGV, which dtlab names, and the
# tests of that message (faults, the grader's crash case) must see the same death.
# Every target exports SANITIZE and the options below, so each rank that mpiexec starts
# inherits them (to run tests/run.sh by hand on this build, set them yourself):
#   protect_shadow_gap=0    the CUDA runtime maps memory where ASan would protect it
#   verify_asan_link_order=0  scripts/hosts.sh preloads its MPI_Finalize stand-in
#                           (LD_PRELOAD) ahead of ASan's runtime; it allocates nothing
#   LSAN_OPTIONS            the leak suppressions, tests/sanitize.supp: MPICH's own leaks
#                           and the viewer's system libraries', each with its reason
#   HWLOC_COMPONENTS=-pci   MPI_Init has hwloc load its PCI plugin, which leaks inside
#                           libpciaccess and is unloaded before LSan reports, so no
#                           suppression can name it; dtlab needs no PCI topology
#   SDL_RENDER_DRIVER=software  under Xvfb, SDL's OpenGL renderer runs on Mesa's software
#                           driver, which leaks and is unloaded the same way: dtviz draws
#                           with SDL's own software renderer (dtviz's code is the same)
ifneq ($(SANITIZE),)
  SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-sanitize=null -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
  CFLAGS    += $(SAN_FLAGS)
  export SANITIZE
  SAN_STOP  := halt_on_error=1:abort_on_error=1
  export ASAN_OPTIONS  ?= protect_shadow_gap=0:verify_asan_link_order=0:detect_leaks=1:$(SAN_STOP)
  export UBSAN_OPTIONS ?= print_stacktrace=1:$(SAN_STOP)
  export LSAN_OPTIONS  ?= suppressions=$(CURDIR)/tests/sanitize.supp:print_suppressions=0
  export HWLOC_COMPONENTS ?= -pci
  export SDL_RENDER_DRIVER ?= software
  export SDL_FRAMEBUFFER_ACCELERATION ?= 0
endif

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null)

# ---- sources ----------------------------------------------------------------
LIB_SRC  := $(wildcard lib/*.c lib/collectives/*.c lib/nn/*.c lib/parallel/*.c)
LIB_CU   := $(if $(filter 1,$(CUDA)),$(wildcard lib/*.cu lib/nn/*.cu lib/parallel/*.cu))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(LIB_CU:%.cu=$(BUILD)/obj/%.o)
LIBDT    := $(BUILD)/libdt.a

LESSONS  := $(patsubst lessons/%.c,$(BUILD)/lessons/%,$(wildcard lessons/[0-9]*.c))
TRAIN    := $(BUILD)/train
BENCH    := $(BUILD)/bench/collbench
STEPBENCH := $(BUILD)/bench/stepbench
GPTSTEP  := $(BUILD)/bench/gptstep
TOOLS    := $(BUILD)/dttrace
UNIT     := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/unit_*.c))
MULTI    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/mpi_*.c tests/misuse.c \
              tests/faults.c tests/stress.c))

# The viewer and its tests: SDL2, no MPI, so a plain C compiler, and only the two MPI-free
# parts of lib/ (schedule, the trace reader, units). The fuzz target needs clang's libFuzzer.
VCC      := cc
VCFLAGS  := $(filter-out -pthread,$(CFLAGS)) $(shell pkg-config --cflags sdl2 SDL2_ttf SDL2_image 2>/dev/null)
VLIBS    := $(shell pkg-config --libs sdl2 SDL2_ttf SDL2_image 2>/dev/null) -lm
VIZ_SRC  := $(filter-out viz/dtviz.c viz/dttrace.c,$(wildcard viz/*.c))
VIZ_OBJ  := $(VIZ_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/lib/schedule.o $(BUILD)/obj/lib/trace_read.o \
            $(BUILD)/obj/lib/units.o
DTVIZ    := $(BUILD)/dtviz
VIZTESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/viz_*.c))
CLANG    := $(shell command -v clang 2>/dev/null)
FUZZ     := $(if $(CLANG),$(BUILD)/fuzz/fuzz_trace)

# keep objects that pattern rules chain through (lessons, tests), so nothing rebuilds twice
.SECONDARY:

.PHONY: FORCE all deps test check demo pictures run bench stress clean check-deps check-run-deps \
        check-view-deps check-grade-deps check-tools flags libs grade reset valgrind \
        gradescope grade-class
all: check-tools $(LIBDT) $(LESSONS) $(TRAIN) $(BENCH) $(STEPBENCH) $(GPTSTEP) $(TOOLS) $(UNIT) $(MULTI) $(DTVIZ) \
     $(VIZTESTS) $(FUZZ)

check-tools:
	@if [ -z "$(MPICC)" ] || [ "$(HAVE_PKGS)" != yes ]; then \
	  echo "dtlab: MPICH's mpicc or a library ($(PKGS)) is missing: run 'make deps' first" >&2; \
	  exit 1; fi

# What your own program needs to build against dtlab, as the last build made it:
#   mpicc $$(make -s flags) myprog.c $$(make -s libs) -o myprog
flags libs:
	@cat $(BUILD)/$@ 2>/dev/null || { echo "dtlab: build first ('make')" >&2; exit 1; }

# ---- rules ------------------------------------------------------------------
# Objects depend on the configuration, so `make CUDA=0` after `make CUDA=1` rebuilds.
CONFIG := CUDA=$(CUDA) CUDA_ARCH=$(CUDA_ARCH) CFLAGS=$(CFLAGS)
$(BUILD)/config: FORCE
	@mkdir -p $(BUILD)
	@if [ "$$(cat $@ 2>/dev/null)" != '$(CONFIG)' ]; then echo '$(CONFIG)' > $@; fi
FORCE:

$(BUILD)/obj/%.o: %.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu $(BUILD)/config
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -M -MT $@ $< -o $(@:.o=.d)
	$(NVCC) $(NVFLAGS) -c $< -o $@

# The library, and beside it what a program built against it needs (make flags, make libs)
$(LIBDT): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
	$(file >$(BUILD)/flags,-I$(CURDIR)/lib $(filter -D% -I/%,$(CFLAGS)) $(SAN_FLAGS) -pthread)
	$(file >$(BUILD)/libs,$(abspath $(LIBDT)) $(SAN_FLAGS) $(LDLIBS))

$(BUILD)/lessons/%: $(BUILD)/obj/lessons/%.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

$(TRAIN): $(BUILD)/obj/lessons/train.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

$(BENCH): $(BUILD)/obj/bench/collbench.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

# one training step on the CPU, sgemm or the loops (bench/stepbench.c)
$(STEPBENCH): $(BUILD)/obj/bench/stepbench.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

# one training step of the GPT on the CPU, and --dump for bench/gpt_vs_torch.py
$(GPTSTEP): $(BUILD)/obj/bench/gptstep.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

# the reduction kernel beside a device-to-device copy (bench/gpubw.c): CUDA builds only
GPUBW := $(if $(filter 1,$(CUDA)),$(BUILD)/bench/gpubw)
all: $(GPUBW)
$(BUILD)/bench/gpubw: $(BUILD)/obj/bench/gpubw.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

$(BUILD)/dttrace: $(BUILD)/obj/viz/dttrace.o $(LIBDT)
	$(CC) $(CFLAGS) $< $(LIBDT) $(LDLIBS) -o $@

# the viewer's objects and tests (tests/viz_*.c): plain cc, SDL2 flags
$(BUILD)/obj/viz/%.o: viz/%.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(VCC) $(VCFLAGS) -c $< -o $@

$(DTVIZ): $(BUILD)/obj/viz/dtviz.o $(VIZ_OBJ)
	$(VCC) $(VCFLAGS) $^ $(VLIBS) -o $@

$(BUILD)/obj/tests/viz_%.o: tests/viz_%.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(VCC) $(VCFLAGS) -Iviz $(CHECK_CFLAGS) -c $< -o $@

$(BUILD)/tests/viz_%: $(BUILD)/obj/tests/viz_%.o $(VIZ_OBJ)
	@mkdir -p $(dir $@)
	$(VCC) $(VCFLAGS) $^ $(CHECK_LIBS) $(VLIBS) -o $@

# libFuzzer on the trace reader, the viewer's model and its timetable (tests/run.sh runs it for a
# bounded time); built from the sources with clang, AddressSanitizer and UBSan.
FUZZ_SRC := tests/fuzz_trace.c viz/model.c viz/model_call.c viz/grow.c viz/replay.c viz/algos.c \
            viz/timetable.c viz/train_algos.c lib/trace_read.c lib/schedule.c lib/units.c
$(BUILD)/fuzz/fuzz_trace: $(FUZZ_SRC) $(wildcard viz/*.h lib/trace.h lib/schedule.h)
	@mkdir -p $(dir $@)
	$(CLANG) -g -O1 -std=gnu11 -Ilib -Iviz -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined $(FUZZ_SRC) -lm -o $@

$(BUILD)/obj/tests/%.o: tests/%.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -c $< -o $@

# the unit suites share tests/unit.c's helpers (tests/unit.h)
$(UNIT): $(BUILD)/obj/tests/unit.o

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(LIBDT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.o,$^) $(LIBDT) $(CHECK_LIBS) $(LDLIBS) -o $@

# ---- grading (make grade; tests/grade/grade.sh drives these rules) -----------------
# Exercise E's program, $(GRADE_OUT)/E, is its suite (tests/grade/E.c), the code graded
# (the learner's $(GRADE_SRC)/E/topic.c, or dtlab's tests/grade/ref/E.c with SOLUTION=1),
# dtlab's reference for every OTHER exercise (so each is graded on its own), and libdt.
# The learner's file is compiled once, $(GRADE_OUT)/obj/E.o: with the build's own flags
# and AddressSanitizer (GRADE_ASAN), so that an access outside a buffer stops the case
# with ASan's report at every rank count; a section per function and per variable, so
# that grade.sh reads from this very object's relocations what each function calls (the
# rules hold for the code that runs, whatever its #ifdefs); and -save-temps=obj keeps
# beside it the preprocessed file (E.i: what it includes, its attributes) and the
# assembly (E.s), which grade.sh reads too. dtlab's answers run without ASan.
# An instructor's hidden suite DIR/NN_name.c (EXTRA_TESTS=DIR) becomes
# $(GRADE_OUT)/extra/NN_name, linked the same way with exercise NN's code.
# grade.sh copies the learner's and the instructor's files under $(BUILD) and names the
# copies here, so make never sees a path with spaces or quotes.
EXERCISES   := $(sort $(notdir $(wildcard exercises/[0-9][0-9]_*)))
GRADE_SRC   ?= exercises
GRADE_OUT   ?= $(BUILD)/grade/$(if $(filter 1,$(SOLUTION)),solution,learner)
EXTRA_TESTS ?=
GRADE_FLAGS := -Iexercises -Itests -Itests/grade $(CHECK_CFLAGS)
GRADE_ASAN  := -fsanitize=address -fno-omit-frame-pointer
GRADE_LINK   = $(if $(filter 1,$(SOLUTION)),,$(GRADE_ASAN))
# Only the learner's ex_* functions stay global in the learner's object: a function of
# its own named like one of libc, MPI or dtlab (write, MPI_Allreduce, dt_bytes_sent)
# becomes private to the file instead of replacing the real one in the whole program.
GRADE_LOCAL := objcopy --wildcard --keep-global-symbol='ex_*'
REF_OBJ     := $(EXERCISES:%=$(BUILD)/obj/tests/grade/ref/%.o)
ex_topic     = $(patsubst $(firstword $(subst _, ,$(1)))_%,%,$(1))
ex_code      = $(if $(filter 1,$(SOLUTION)),$(BUILD)/obj/tests/grade/ref/$(1).o,$(GRADE_OUT)/obj/$(1).o)

$(BUILD)/obj/tests/grade/%.o: tests/grade/%.c $(BUILD)/config
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(GRADE_FLAGS) -c $< -o $@

define grade_rules
$(GRADE_OUT)/obj/$(1).o: $(GRADE_SRC)/$(1)/$(call ex_topic,$(1)).c $(BUILD)/config
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(GRADE_ASAN) -save-temps=obj $$(GRADE_FLAGS) -c $$< -o $$@
	$$(GRADE_LOCAL) $$@
$(GRADE_OUT)/$(1): $(BUILD)/obj/tests/grade/$(1).o $(call ex_code,$(1)) \
                   $(filter-out %/$(1).o,$(REF_OBJ)) $(LIBDT)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(GRADE_LINK) $$^ $$(CHECK_LIBS) $$(LDLIBS) -o $$@
endef
$(foreach e,$(EXERCISES),$(eval $(call grade_rules,$(e))))

define extra_rules
$(GRADE_OUT)/extra/obj/$(1).o: $(EXTRA_TESTS)/$(1).c $(BUILD)/config
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(GRADE_FLAGS) -c $$< -o $$@
$(GRADE_OUT)/extra/$(1): $(GRADE_OUT)/extra/obj/$(1).o $(call ex_code,$(2)) \
                         $(filter-out %/$(2).o,$(REF_OBJ)) $(LIBDT)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(GRADE_LINK) $$^ $$(CHECK_LIBS) $$(LDLIBS) -o $$@
endef
EXTRA_SUITES := $(if $(EXTRA_TESTS),$(basename $(notdir $(wildcard $(EXTRA_TESTS)/[0-9][0-9]_*.c))))
$(foreach t,$(EXTRA_SUITES),$(eval $(call extra_rules,$(t),$(filter $(firstword $(subst _, ,$(t)))_%,$(EXERCISES)))))

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---- set-up -----------------------------------------------------------------
# The Debian packages, by what needs them: running a program (MPICH), the viewer (SDL2 and
# a font), Check (the unit suites and the grader), and tools only the tests use (clang's
# libFuzzer, a virtual display and a key presser, valgrind, network namespaces).
RUN_DEBS   := mpich libmpich-dev zlib1g-dev libopenblas-dev pkg-config
VIEW_DEBS  := libsdl2-dev libsdl2-ttf-dev libsdl2-image-dev fonts-dejavu-core
CHECK_DEBS := check libsubunit-dev
TEST_DEBS  := clang libclang-rt-dev xvfb xauth xdotool valgrind iproute2
DEBS       := $(RUN_DEBS) $(VIEW_DEBS) $(CHECK_DEBS) $(TEST_DEBS)
FONT       := /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf

deps:
	@bash scripts/deps.sh $(DEBS)

# $(call need,COMMANDS,MODULES,FILES,DEBS): a recipe line that installs DEBS
# (scripts/deps.sh) when a command is not on PATH, a pkg-config module is not found or a
# file is missing, so each target asks only for what it uses: `make demo` never for the
# tests' tools, and a fresh machine needs nothing else.
need = @miss=; for c in $(1); do command -v $$c >/dev/null 2>&1 || miss="$$miss $$c"; done; \
  for m in $(2); do pkg-config --exists $$m 2>/dev/null || miss="$$miss $$m"; done; \
  for f in $(3); do [ -e $$f ] || miss="$$miss $$f"; done; \
  if [ -n "$$miss" ]; then echo "dtlab: missing:$$miss; installing what this target needs"; \
    bash scripts/deps.sh $(4) || exit 1; fi
RUN_CMDS   := mpicc $(MPIEXEC) pkg-config

check-deps:
	$(call need,$(RUN_CMDS) clang Xvfb xauth xdotool valgrind,$(PKGS),$(FONT),$(DEBS))
check-run-deps:
	$(call need,$(RUN_CMDS),zlib openblas,,$(RUN_DEBS))
check-view-deps:
	$(call need,$(RUN_CMDS),zlib openblas sdl2 SDL2_ttf SDL2_image,$(FONT),$(RUN_DEBS) $(VIEW_DEBS))
check-grade-deps:
	$(call need,$(RUN_CMDS) objcopy,zlib openblas check,,$(RUN_DEBS) $(CHECK_DEBS))

# ---- running ----------------------------------------------------------------
NPROC := $(shell nproc 2>/dev/null || echo 2)

test: check-deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@if [ -n "$(SANITIZE)" ]; then echo "dtlab: SANITIZE=$(SANITIZE) in $(BUILD); unlike a" \
	  "plain run, dtviz draws with SDL's software renderer and hwloc skips its PCI plugin" \
	  "(their leaks cannot be suppressed: see the Makefile)"; fi
	@BUILD=$(BUILD) CUDA=$(CUDA) MPIEXEC=$(MPIEXEC) bash tests/run.sh

# The quick subset, for a learner after a change (a minute or two): the unit suites, the
# multi-rank suites and every lesson at 1 and 3 ranks (tests/run.sh with QUICK=1). It
# needs Check, not the viewer's or the tests' tools; `make test` runs everything. It
# builds what those runs start: lesson 25 runs the training driver, $(TRAIN), which the
# quick start's next command uses too.
check: check-grade-deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(LIBDT) $(LESSONS) $(TRAIN) $(UNIT) $(MULTI)
	@BUILD=$(BUILD) CUDA=$(CUDA) MPIEXEC=$(MPIEXEC) QUICK=1 bash tests/run.sh

# valgrind's memcheck on every unit suite: no invalid access, no uninitialised value
# used, no leak (definite or possible). A build without SANITIZE (valgrind cannot run
# sanitized programs). Check forks each test and valgrind follows the fork, so each
# test is checked as it ends, exit tests included; Check's time limits are stretched
# for valgrind's pace. tests/valgrind.supp: errors that are not dtlab's, with reasons.
VALGRIND := valgrind -q --error-exitcode=99 --leak-check=full \
            --suppressions=tests/valgrind.supp
valgrind: check-deps
	@if [ -n "$(SANITIZE)" ]; then echo "dtlab: make valgrind needs a build without" \
	  "SANITIZE: valgrind cannot run sanitized programs" >&2; exit 2; fi
	@$(MAKE) --no-print-directory -j$(NPROC) $(UNIT)
	@failed=""; for t in $(UNIT); do echo "== $(VALGRIND) $$t"; \
	  CK_TIMEOUT_MULTIPLIER=20 $(VALGRIND) $$t || failed="$$failed $${t##*/}"; done; \
	  if [ -n "$$failed" ]; then echo "valgrind: errors in$$failed" >&2; exit 1; fi; \
	  echo "valgrind: $(words $(UNIT)) unit suites clean"

# The ring allreduce lesson at 4 ranks, then the viewer on its trace: a window when there
# is a display, else every step as a PNG. It needs MPICH and SDL2 only, and builds only
# the lesson, dttrace and the viewer, in parallel, for the CPU: where nvcc makes $(BUILD)
# a CUDA build, into $(DEMO_BUILD) instead (the ring's chunks are the lesson, not the GPU),
# so the first run skips the CUDA compiles. Its outputs go to $(BUILD) either way.
DEMO_BUILD ?= $(if $(filter 1,$(CUDA)),$(BUILD)-cpu,$(BUILD))
DEMO_CUDA  := $(if $(filter $(BUILD),$(DEMO_BUILD)),$(CUDA),0)
demo: check-view-deps
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=$(DEMO_BUILD) CUDA=$(DEMO_CUDA) \
	  $(DEMO_BUILD)/lessons/08_ring_allreduce $(DEMO_BUILD)/dttrace $(DEMO_BUILD)/dtviz
	@mkdir -p $(BUILD)
	$(MPIEXEC) -n 4 $(DEMO_BUILD)/lessons/08_ring_allreduce --trace $(BUILD)/demo.trace
	@$(DEMO_BUILD)/dttrace --chrome $(BUILD)/demo.json $(BUILD)/demo.trace >/dev/null
	@if [ -n "$${DISPLAY:-}$${WAYLAND_DISPLAY:-}" ] && $(DEMO_BUILD)/dtviz $(BUILD)/demo.trace; then :; else \
	  rm -rf $(BUILD)/demo-frames; \
	  $(DEMO_BUILD)/dtviz --frames $(BUILD)/demo-frames $(BUILD)/demo.trace >/dev/null || exit 1; \
	  echo; echo "No window (no display, or the viewer said why above): each step of the ring is a PNG in $(BUILD)/demo-frames/"; \
	  echo "(or run '$(DEMO_BUILD)/dtviz $(BUILD)/demo.trace' where there is a display)."; fi
	@echo "The trace: $(BUILD)/demo.trace; for https://ui.perfetto.dev: $(BUILD)/demo.json"

# The pictures in docs/ (viz/pictures/), drawn by the viewer itself.
pictures: check-view-deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(DTVIZ) $(TRAIN)
	bash viz/pictures.sh $(BUILD)

LESSON := $(firstword $(wildcard lessons/$(L)_*.c))
# NP must be a rank count: mpiexec -n takes "0" or "abc" without a word and runs 1 rank
NP_OK   = case '$(NP)' in ''|*[!0-9]*|0*) echo "dtlab: NP=$(NP) is not a rank count (NP=4 runs 4" \
            "ranks)" >&2; exit 2;; esac
run: check-run-deps
	@$(NP_OK)
	@if [ -z "$(LESSON)" ]; then echo "dtlab: no lesson $(L); the lessons are:" \
	  $(patsubst lessons/%.c,%,$(wildcard lessons/[0-9]*.c)) "(L=08 picks 08_...)" >&2; exit 2; fi
	@$(MAKE) -s --no-print-directory $(LESSON:lessons/%.c=$(BUILD)/lessons/%)
	$(MPIEXEC) -n $(NP) $(LESSON:lessons/%.c=$(BUILD)/lessons/%) $(ARGS)

bench: check-run-deps
	@$(MAKE) --no-print-directory $(BENCH)
	$(MPIEXEC) -n 2 $(BENCH) $(ARGS)
	$(MPIEXEC) -n 4 $(BENCH) $(ARGS)

# Random collectives against MPICH's at 1..8 ranks, longer than make test's bounded run
# (tests/stress.sh): STRESS_SECONDS per rank count.
STRESS_SECONDS ?= 60
stress: check-deps
	@$(MAKE) --no-print-directory -j$(NPROC) $(LIBDT) $(BUILD)/tests/stress
	@BUILD=$(BUILD) MPIEXEC=$(MPIEXEC) SECTIONS=11 STRESS_SECONDS=$(STRESS_SECONDS) \
	  bash tests/run.sh

# The exercises: the points table (tests/grade/grade.sh says what each setting does).
#   make grade [EX=NN] [SOLUTION=1] [WORK=DIR] [EXTRA_TESTS=DIR] [TAP=FILE]
# The settings reach grade.sh through the environment as they were typed, never through
# a shell command line: any path works in WORK, TAP and EXTRA_TESTS, and $(value ...)
# keeps a '$' in them as it is.
override WORK        := $(value WORK)
override TAP         := $(value TAP)
override EXTRA_TESTS := $(value EXTRA_TESTS)
override GRADE_RESULTS := $(value GRADE_RESULTS)
export EX SOLUTION WORK EXTRA_TESTS TAP HINTS STRICT RULES GRADE_RANKS GRADE_TIMEOUT GRADE_WAIT \
       GRADE_RESULTS
grade: check-grade-deps
	@$(MAKE) --no-print-directory $(LIBDT)
	@BUILD=$(BUILD) CUDA=$(CUDA) MPIEXEC=$(MPIEXEC) bash tests/grade/grade.sh

# A course's grading (docs/course.md): Gradescope's autograder zips, one per exercise
# (tests/grade/gradescope/pack.sh: EX, EXTRA_TESTS packed as hidden suites), and a whole
# class graded at once, SUBMISSIONS/NAME/NN_topic/topic.c, into a CSV and a summary
# (tests/grade/class.sh: EX, CLASS_OUT, CLASS_TIMEOUT seconds a student's exercise, and
# the limits CLASS_PROCS, CLASS_FILE_MB, CLASS_MEM_MB).
override SUBMISSIONS := $(value SUBMISSIONS)
override CLASS_OUT   := $(value CLASS_OUT)
export SUBMISSIONS CLASS_OUT CLASS_TIMEOUT CLASS_PROCS CLASS_FILE_MB CLASS_MEM_MB GS_TIMEOUT \
       GS_HIDDEN_VISIBILITY
gradescope:
	@BUILD=$(BUILD) bash tests/grade/gradescope/pack.sh $(BUILD)/gradescope
grade-class: check-grade-deps
	@$(MAKE) --no-print-directory $(LIBDT)
	@BUILD=$(BUILD) CUDA=$(CUDA) MPIEXEC=$(MPIEXEC) bash tests/grade/class.sh

# Puts exercise EX back as the last commit has it (RESET_REF=origin/main: as dtlab ships
# it, when you commit your work); your file is kept beside it as topic.c.mine (.mine.1,
# .mine.2, ... when there is one already: nothing of yours is overwritten).
RESET_REF ?= HEAD
RESET_EX   = $(if $(filter 1 2 3 4 5 6 7 8 9,$(EX)),0$(EX),$(EX))
RESET_DIR  = $(firstword $(filter $(RESET_EX)_% $(RESET_EX),$(EXERCISES)))
reset:
	@if [ -z "$(EX)" ] || [ -z "$(RESET_DIR)" ]; then echo "usage: make reset EX=NN (one of:" \
	  $(EXERCISES)")" >&2; exit 2; fi
	@f=exercises/$(RESET_DIR)/$(call ex_topic,$(RESET_DIR)).c; \
	  git show $(RESET_REF):$$f > $$f.fresh || { rm -f $$f.fresh; exit 1; }; \
	  if cmp -s $$f $$f.fresh; then rm -f $$f.fresh; echo "$$f is already as $(RESET_REF) has it"; \
	    up=$$(git rev-parse -q --abbrev-ref origin/HEAD 2>/dev/null); \
	    if [ "$(RESET_REF)" = HEAD ] && [ -n "$$up" ] && ! git diff --quiet "$$up" -- $$f 2>/dev/null; then \
	      echo "(you committed changes to it: 'make reset EX=$(EX) RESET_REF=$$up' puts back dtlab's version)"; fi; \
	  else keep=$$f.mine; i=0; while [ -e $$keep ]; do i=$$((i + 1)); keep=$$f.mine.$$i; done; \
	  cp $$f $$keep && mv $$f.fresh $$f && echo "$$f is back as $(RESET_REF) has it; yours is $$keep"; fi

clean:
	rm -rf $(BUILD)

# ---- many hosts on one machine ----------------------------------------------
# Lesson L on HOSTS hosts made of network namespaces (scripts/hosts.sh; needs root),
# NP ranks placed round-robin over them; RATE (Mbit/s) and DELAY (ms) shape each
# host's link. The hosts are taken down again however the run ends.
#   make hosts L=22 NP=4 RATE=200 ARGS="--max-size 1M"
HOSTS ?= $(NP)
.PHONY: hosts
hosts: check-deps
	@$(NP_OK)
	@if [ -z "$(LESSON)" ]; then echo "dtlab: no lesson $(L)" >&2; exit 2; fi
	@$(MAKE) -s --no-print-directory $(LESSON:lessons/%.c=$(BUILD)/lessons/%)
	bash scripts/hosts.sh $(HOSTS) $(if $(RATE),--rate $(RATE)) $(if $(DELAY),--delay $(DELAY)) \
	  -n $(NP) -- $(LESSON:lessons/%.c=$(BUILD)/lessons/%) $(ARGS)
