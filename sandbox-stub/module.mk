# sandbox-stub: the launcher library (linked by the broker) and the stub
# program it spawns (installed in LIBEXECDIR).
MODULES += sandbox
sandbox_SRCS := sandbox-stub/launch.c
sandbox_LIBS := sandbox wire common

LIBEXEC_PROGS += capbroker-stub
capbroker-stub_SRCS := sandbox-stub/stub_main.c sandbox-stub/stub_mount.c \
	sandbox-stub/stub_landlock.c sandbox-stub/stub_seccomp_load.c sandbox-stub/launch.c \
	fsrv/mount.c
capbroker-stub_LIBS := wire common

# The escape suite's stand-in for "capbroker run" (tests/escape/launch.c)
# links the launcher, not the client library the other attempts may use.
$(B)/escape/launch: $(B)/tests/escape/launch.o $(B)/libsandbox.a $(B)/libwire.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LIBS)

# The stub runs once per sandbox start: it links nothing but libc (start-up
# time is part of the sandbox's start time; the filters are precompiled).
$(BIN)/capbroker-stub: ALL_LIBS :=
$(B)/escape/launch: ALL_LIBS :=

# The seccomp filters are compiled once, at build time: stub-genbpf runs the
# rules of sandbox-stub/stub_seccomp.c through libseccomp and prints BPF
# arrays (stub_bpf.h) that the stub loads directly (saves ~2 ms per start).
STUB_GEN_CFLAGS = $(filter-out -MMD -MP,$(ALL_CFLAGS))
$(B)/sandbox-stub/stub-genbpf: sandbox-stub/stub_genbpf.c sandbox-stub/stub_seccomp.c \
		sandbox-stub/stub_int.h sandbox-stub/sandbox.h
	@mkdir -p $(dir $@)
	$(CC) $(STUB_GEN_CFLAGS) $(ALL_LDFLAGS) -o $@ sandbox-stub/stub_genbpf.c \
		sandbox-stub/stub_seccomp.c -lseccomp
$(B)/sandbox-stub/stub_bpf.h: $(B)/sandbox-stub/stub-genbpf
	$< >$@.tmp && mv $@.tmp $@
$(B)/sandbox-stub/stub_seccomp_load.o: $(B)/sandbox-stub/stub_bpf.h
$(B)/sandbox-stub/stub_seccomp_load.o: ALL_CFLAGS += -I$(B)/sandbox-stub
MAN1 += docs/man/capbroker-stub.1

