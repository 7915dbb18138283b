# sandbox-stub: the launcher library (linked by the broker) and the stub
# program it spawns (installed in LIBEXECDIR).
MODULES += sandbox
sandbox_SRCS := sandbox-stub/launch.c
sandbox_LIBS := sandbox common

LIBEXEC_PROGS += capbroker-stub
capbroker-stub_SRCS := sandbox-stub/stub_main.c sandbox-stub/stub_mount.c \
	sandbox-stub/stub_landlock.c sandbox-stub/stub_seccomp.c sandbox-stub/launch.c
capbroker-stub_LIBS := common

# The escape suite's stand-in for "capbroker run" (tests/escape/launch.c)
# links the launcher, not the client library the other attempts may use.
$(B)/escape/launch: $(B)/tests/escape/launch.o $(B)/libsandbox.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LIBS)

# The stub runs once per sandbox start: load only what it uses (startup
# time is part of the sandbox's start time).
$(BIN)/capbroker-stub: ALL_LIBS := -lseccomp
$(B)/escape/launch: ALL_LIBS := -lseccomp
