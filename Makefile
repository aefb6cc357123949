# attn — build with GNU make.
#   make            library (build/libattn.a, build/libattn.so) and CLI (build/attn)
#   make test       build and run the test suite (tests/run_tests.sh prints "N passed, N failed")
#   make SAN=1 BUILD=build-san test   the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make install PREFIX=/usr/local    headers, libraries, CLI and attn.pc
#   make MPI=1 / MPI=0   force the MPI floor on / off (default: on when mpicc is found): src/mpi/
#                   becomes build/libattn_mpi.a (+ .so; include/attn_mpi.h), the CLI gets
#                   `sdpa --ring` and data-parallel `embed` under mpirun, `make test` runs
#                   tests/test_mpi.sh (mpirun --oversubscribe)
BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
VERSION := 0.1.0

PKGS    := libcjson libutf8proc libpng pangocairo cairo sndfile samplerate fftw3f libjpeg zlib pixman-1
PKGS    += libpcre2-8 libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -fPIC -fopenmp \
           -Iinclude -Isrc $(PKG_CFLAGS) -I/usr/include/x86_64-linux-gnu/openblas-pthread
LDLIBS  += $(PKG_LIBS) -lopenblas -lm -fopenmp -lpthread
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
# Leak checks: tests/lsan.supp names the only reports that are not ours (fontconfig's global
# caches, a leak inside cairo's PDF writer), so our own leaks stay visible. The picture tests
# (tests/test_viz*.c) ask ASan for full stack unwinding so the cairo entry can match.
# G_SLICE=always-malloc: GLib's slice allocator would otherwise hide leaked pango/GObject
# objects from LeakSanitizer.
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0
export G_SLICE ?= always-malloc
endif

LIB_SRC   := $(sort $(filter-out src/mpi/%,$(wildcard src/*/*.c)))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOL_OBJ  := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC  := $(sort $(filter-out tests/test_mpi%,$(wildcard tests/test_*.c)))
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TESTUTIL  := $(BUILD)/obj/tests/testutil.o
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))

# The MPI floor (src/mpi/, Open MPI): a separate library so that libattn itself never needs MPI.
ifeq ($(origin MPI),undefined)
MPI := $(if $(shell command -v mpicc 2>/dev/null),1,0)
endif
ifeq ($(MPI),1)
MPI_CFLAGS := $(shell mpicc --showme:compile) -DATTN_HAVE_MPI=1
MPI_LIBS   := $(shell mpicc --showme:link)
MPI_SRC    := $(sort $(wildcard src/mpi/*.c))
MPI_OBJ    := $(MPI_SRC:%.c=$(BUILD)/obj/%.o)
MPI_LIBA   := $(BUILD)/libattn_mpi.a
MPI_TESTS  := $(BUILD)/tests/test_mpi_ring $(BUILD)/tests/test_mpi_ring_backward $(BUILD)/tests/test_mpi_cli $(BUILD)/tests/test_mpi_seq2seq
MPI_RUN    := tests/test_mpi.sh
$(MPI_OBJ) $(TOOL_OBJ) $(MPI_TESTS): CFLAGS += $(MPI_CFLAGS)
endif

.PHONY: all lib test tests install clean fuzz
.SECONDARY:
all: lib $(BUILD)/attn
lib: $(BUILD)/libattn.a $(BUILD)/libattn.so $(if $(MPI_LIBA),$(MPI_LIBA) $(BUILD)/libattn_mpi.so)

$(BUILD)/obj/%.o: %.c $(wildcard include/*.h) $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# GCC prints a note on the portable template's 8-float vector helpers (static, never an ABI
# boundary) that its diagnostic pragma does not silence: the flag, for that file alone
$(BUILD)/obj/src/attention/sdpa_short.o $(BUILD)/fuzz/obj/src/attention/sdpa_short.o: CFLAGS += -Wno-psabi

# the CLI's objects also depend on its own headers (tools/cli.h's option table layout, ...)
$(TOOL_OBJ): $(wildcard tools/*.h)

$(BUILD)/libattn.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libattn.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libattn_mpi.a: $(MPI_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libattn_mpi.so: $(MPI_OBJ) $(BUILD)/libattn.so
	$(CC) -shared $(LDFLAGS) -o $@ $(MPI_OBJ) -L$(BUILD) -lattn $(MPI_LIBS) $(LDLIBS)

$(BUILD)/attn: $(TOOL_OBJ) $(BUILD)/libattn.a $(MPI_LIBA)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(MPI_LIBA) $(BUILD)/libattn.a $(MPI_LIBS) $(LDLIBS)

# bench/mpi (not built by default): make bench-mpi
.PHONY: bench-mpi
bench-mpi: $(BUILD)/bench/bench_ring
$(BUILD)/bench/bench_ring: bench/mpi/bench_ring.c $(BUILD)/libattn.a $(MPI_LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $(LDFLAGS) -o $@ $< $(MPI_LIBA) $(BUILD)/libattn.a $(MPI_LIBS) $(LDLIBS)

$(BUILD)/tests/test_mpi%: tests/test_mpi%.c $(TESTUTIL) $(BUILD)/libattn.a $(MPI_LIBA) tests/testutil.h tests/mpirun_util.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(TESTUTIL) $(MPI_LIBA) $(BUILD)/libattn.a $(MPI_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(TESTUTIL) $(BUILD)/libattn.a $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $(LDFLAGS) -o $@ $< $(TESTUTIL) $(BUILD)/libattn.a $(LDLIBS)

tests: all $(TEST_BIN) $(MPI_TESTS)

test: tests
	ATTN_BIN=$(BUILD)/attn ATTN_LIBRARY=$(BUILD)/libattn.so sh tests/run_tests.sh $(TEST_BIN) $(MPI_RUN) tests/run_python_tests.sh

# the Python package's tests alone (python/tests, pytest; also run by `make test`)
.PHONY: pytest
pytest: lib
	ATTN_LIBRARY=$(BUILD)/libattn.so sh tests/run_python_tests.sh

# libFuzzer targets (clang): tests/fuzz/fuzz_*.c with seeds in tests/fuzz/seeds_fuzz_*/.
# `make fuzz FUZZ_SECONDS=30` builds the library once with clang + sanitizers, then runs each
# fuzzer for a bounded time; a crash or sanitizer report fails the target.
FUZZ_SECONDS ?= 20
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fopenmp -Iinclude -Isrc $(PKG_CFLAGS) \
               -I/usr/include/x86_64-linux-gnu/openblas-pthread
FUZZ_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
$(BUILD)/fuzz/obj/%.o: %.c $(wildcard include/*.h) $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@
fuzz: $(FUZZ_OBJ)
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $$f $(FUZZ_OBJ) -o $(BUILD)/fuzz/$$n $(LDLIBS) || exit 1; \
	  mkdir -p $(BUILD)/fuzz/corpus_$$n; \
	  if $(BUILD)/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 $(BUILD)/fuzz/corpus_$$n tests/fuzz/seeds_$$n \
	       > $(BUILD)/fuzz/$$n.log 2>&1; then echo "fuzz: $$n: $$(grep -h '^Done' $(BUILD)/fuzz/$$n.log)"; \
	  else tail -n 40 $(BUILD)/fuzz/$$n.log; echo "fuzz: $$n FAILED"; exit 1; fi; \
	done

$(BUILD)/attn.pc:
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: attn\nDescription: Transformer self-attention in C\nVersion: %s\nRequires.private: $(PKGS)\nLibs: -L$${libdir} -lattn\nLibs.private: -lopenblas -lm -fopenmp\nCflags: -I$${includedir}\n' '$(PREFIX)' '$(VERSION)' > $@

install: all $(BUILD)/attn.pc
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/*.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libattn.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libattn.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(BUILD)/attn.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -m 755 $(BUILD)/attn $(DESTDIR)$(PREFIX)/bin/
	$(if $(MPI_LIBA),install -m 644 $(MPI_LIBA) $(DESTDIR)$(PREFIX)/lib/ && install -m 755 $(BUILD)/libattn_mpi.so $(DESTDIR)$(PREFIX)/lib/)

clean:
	rm -rf $(BUILD) build-san
