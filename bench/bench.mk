# bench/bench.mk - build rules for the benchmark programs (`make bench`).
#
# Included by the main Makefile (its */*.mk include) or, with an older
# Makefile, read by bench/run.sh as `make -f Makefile -f bench/bench.mk`,
# so that the programs get exactly the project's flags (ALL_CFLAGS, hardening,
# warnings as errors) and link the same module libraries.  Nothing here is
# part of `make` or `make install`.
#
#   build/bench/floor      the physical floor: seqpacket echo, openat2 + SCM_RIGHTS
#   build/bench/agent      runs inside a sandbox, drives the broker through libclient
#   build/bench/inproc     in-process: token sign/verify/check, revocation lookups,
#                          state with many tokens, per-connection broker memory
#   build/bench/pool       the warm pool through the launcher API: build, hand-over,
#                          refill rate, memory per pooled sandbox

BENCH_PROGS := floor agent inproc pool
BENCH_BINS  := $(BENCH_PROGS:%=$(B)/bench/%)

bench_floor_LIBS  := common
bench_agent_LIBS  := client wire common
bench_inproc_LIBS := broker fsrv policy sandbox audit state cluster caps wire common
bench_pool_LIBS   := sandbox wire common

.PHONY: bench-progs
bench-progs: $(BENCH_BINS)

define bench_rule
$(B)/bench/$(1): $(B)/bench/$(1).o $$(patsubst %,$(B)/lib%.a,$$(bench_$(1)_LIBS))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ $$(ALL_LIBS)
endef
$(foreach p,$(BENCH_PROGS),$(eval $(call bench_rule,$(p))))
