# capbroker - the one Makefile.
#
#   make                 build every program into ./bin/
#   make check           build and run every test (ends with "N passed, N failed")
#   make check-asan      the same under AddressSanitizer + UBSan (build-san/)
#   make fuzz            run each libFuzzer target for FUZZ_SECONDS (clang)
#   make demo            run the main job (examples/agent.py under capbroker run)
#   make demo-mcp        an MCP session with capcall mcp (examples/demo-mcp.sh)
#   make bench           the benchmark (bench/results.json)
#   make install         honours PREFIX, DESTDIR, BINDIR, LIBEXECDIR, MANDIR
#
# Each module lists its sources in MODULE/module.mk; this file holds the rules.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec/capbroker
INCLUDEDIR ?= $(PREFIX)/include
DATADIR    ?= $(PREFIX)/share/capbroker
MANDIR     ?= $(PREFIX)/share/man
DESTDIR    ?=

CC         ?= cc
SANITIZE   ?=
FUZZ_SECONDS ?= 60
PYTHON     ?= /usr/bin/python3

# Sanitizer builds live apart so they never mix objects with the normal one.
ifeq ($(SANITIZE),)
B    := build
BIN  := bin
OPT  := -O2
HARDEN_DEFS := -D_FORTIFY_SOURCE=3
else
B    := build-san
BIN  := build-san/bin
OPT  := -O1 -fno-omit-frame-pointer -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
HARDEN_DEFS :=
endif

PKGS       := libsodium libseccomp msgpack libevent_core sqlite3 libconfig jansson fuse3
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
          -Wmissing-prototypes -Wformat=2 -Wimplicit-fallthrough -Wvla
HARDEN := $(HARDEN_DEFS) -fstack-protector-strong -fstack-clash-protection -fPIE
LDHARDEN := -pie -Wl,-z,relro,-z,now,-z,noexecstack

# Project flags first, the user's CFLAGS/LDFLAGS last so they can override.
ALL_CFLAGS  = -std=c17 -D_GNU_SOURCE -g $(OPT) $(WARN) $(HARDEN) -I. \
              -DCB_LIBEXECDIR='"$(LIBEXECDIR)"' -DCB_DATADIR='"$(DATADIR)"' \
              -DCB_VERSION='"$(VERSION)"' \
              $(PKG_CFLAGS) -MMD -MP $(CFLAGS)
ALL_LDFLAGS = $(OPT) $(LDHARDEN) $(LDFLAGS)
ALL_LIBS    = $(PKG_LIBS) -lpthread $(LIBS)

# A module.mk adds itself to MODULES and sets NAME_SRCS and NAME_LIBS (the
# module libraries it needs, itself first, in link order).  A program sets
# PROG_SRCS and PROG_LIBS and adds itself to PROGS (or LIBEXEC_PROGS).
MODULES    :=
PROGS      :=
LIBEXEC_PROGS :=
MAN1       :=
include $(wildcard */module.mk) $(filter-out $(wildcard */module.mk),$(wildcard */*.mk))

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(B)/t/%)
ESC_SRCS   := $(wildcard tests/escape/*.c)
ESC_BINS   := $(ESC_SRCS:tests/escape/%.c=$(B)/escape/%)
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.c)
ALL_PROGS  := $(PROGS) $(LIBEXEC_PROGS)
ALL_LIB_SRCS := $(foreach m,$(MODULES),$($(m)_SRCS))
modlibs     = $(foreach m,$(1),$(B)/lib$(m).a)

.PHONY: all deps check check-asan fuzz demo demo-mcp bench install clean
all: deps programs
.PHONY: programs
programs: $(ALL_PROGS:%=$(BIN)/%)

# Install missing Debian packages (as root) or say exactly what to run.
deps:
	@scripts/deps.sh build

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

define mod_rule
$(B)/lib$(1).a: $$($(1)_SRCS:%.c=$(B)/%.o)
	@mkdir -p $$(dir $$@)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call mod_rule,$(m))))

define prog_rule
$(BIN)/$(1): $$($(1)_SRCS:%.c=$(B)/%.o) $$(call modlibs,$$($(1)_LIBS))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_LDFLAGS) -o $$@ -Wl,--start-group $$^ -Wl,--end-group $$(ALL_LIBS)
endef
# Programs that run inside a sandbox cannot carry AddressSanitizer: its
# shadow memory needs terabytes of address space and the sandbox's
# RLIMIT_AS (rightly) refuses that.  A sanitizer build uses their normal
# builds; the broker and every library stay sanitized.
IN_SANDBOX_PROGS := capbroker-stub capcall
PLAIN_PROGS := $(if $(SANITIZE),$(filter $(IN_SANDBOX_PROGS),$(ALL_PROGS)))
$(foreach p,$(filter-out $(PLAIN_PROGS),$(ALL_PROGS)),$(eval $(call prog_rule,$(p))))
.PHONY: plain-progs
$(PLAIN_PROGS:%=$(BIN)/%): plain-progs
	@mkdir -p $(dir $@) && cp bin/$(notdir $@) $@
plain-progs:
	$(if $(PLAIN_PROGS),$(MAKE) --no-print-directory SANITIZE= $(PLAIN_PROGS:%=bin/%))

# tests/unit/test_MOD[_more].c links module MOD and what MOD needs.
define unit_rule
$(B)/t/$(1): $(B)/tests/unit/$(1).o $(B)/tests/tap.o $$(call modlibs,$$($(2)_LIBS))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_LDFLAGS) -o $$@ -Wl,--start-group $$^ -Wl,--end-group $$(ALL_LIBS)
endef
$(foreach t,$(UNIT_SRCS:tests/unit/%.c=%),$(eval $(call unit_rule,$(t),$(word 2,$(subst _, ,$(t))))))

# Escape attempts: small attack programs run as the agent.  They are not
# our product code and are never built with sanitizers (whose runtimes need
# ptrace and /proc in ways the sandbox refuses).
ESC_CFLAGS = -std=c17 -D_GNU_SOURCE -g -O2 $(WARN) -fPIE -I. $(CFLAGS)
$(B)/escape/%: tests/escape/%.c tests/escape/escape.h
	@mkdir -p $(dir $@)
	$(CC) $(ESC_CFLAGS) -pie -o $@ $< $(LDFLAGS)
$(B)/escape/proc_exec_slot_nofile: tests/escape/proc_exec_slot.c

check: deps programs $(UNIT_BINS) $(ESC_BINS)
	@CB_BIN=$(abspath $(BIN)) CB_BUILD=$(abspath $(B)) PYTHON=$(PYTHON) CB_SANITIZE=$(SANITIZE) \
		tests/run.sh

check-asan:
	$(MAKE) check SANITIZE=address,undefined

# libFuzzer needs clang; fuzz objects are built apart from everything else.
FUZZ_B := build-fuzz
FUZZ_CFLAGS = -std=c17 -D_GNU_SOURCE -g -O1 -I. -DCB_LIBEXECDIR='"$(LIBEXECDIR)"' -DCB_DATADIR='"$(DATADIR)"' -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(PKG_CFLAGS)
$(FUZZ_B)/%: tests/fuzz/%.c $(ALL_LIB_SRCS)
	@scripts/deps.sh fuzz
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -o $@ $< $(ALL_LIB_SRCS) $(ALL_LIBS)

fuzz: $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_B)/%)
	@scripts/fuzz.sh $(FUZZ_B) $(FUZZ_SECONDS)

demo: deps programs
	@CB_BIN=$(abspath $(BIN)) PYTHON=$(PYTHON) examples/demo.sh

demo-mcp: deps programs
	@CB_BIN=$(abspath $(BIN)) PYTHON=$(PYTHON) examples/demo-mcp.sh

bench: deps programs
	@scripts/deps.sh bench
	@CB_BIN=$(abspath $(BIN)) CB_BUILD=$(abspath $(B)) bench/run.sh

# The C client library is installed as one static archive (the client and
# the modules it uses), with its headers under include/capbroker/ and a
# pkg-config file; the Python module goes where the broker binds it from.
VERSION ?= 0.1
CLIENT_ARCHIVES = $(call modlibs,$(client_LIBS))
$(B)/libcapclient.a: $(CLIENT_ARCHIVES)
	rm -f $@ && printf 'create $@\n$(foreach a,$^,addlib $(a)\n)save\nend\n' | ar -M

install: programs $(B)/libcapclient.a
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/capbroker/client \
		$(DESTDIR)$(INCLUDEDIR)/capbroker/common $(DESTDIR)$(DATADIR)/python/capbroker
	install -m 0755 $(PROGS:%=$(BIN)/%) $(DESTDIR)$(BINDIR)/
	$(if $(LIBEXEC_PROGS),install -m 0755 $(LIBEXEC_PROGS:%=$(BIN)/%) $(DESTDIR)$(LIBEXECDIR)/)
	$(if $(MAN1),install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/)
	install -m 0644 $(B)/libcapclient.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 client/capclient.h $(DESTDIR)$(INCLUDEDIR)/capbroker/
	install -m 0644 common/common.h $(DESTDIR)$(INCLUDEDIR)/capbroker/common/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
		client/capclient.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/capclient.pc
	install -m 0644 client/python/capbroker/__init__.py $(DESTDIR)$(DATADIR)/python/capbroker/

clean:
	rm -rf build build-san build-fuzz bin

-include $(shell find $(B) -name '*.d' 2>/dev/null)
