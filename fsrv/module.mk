# fsrv/ - the FUSE file server (fsrv_): serves granted trees to a sandbox,
# every operation checked by the caller.  Speaks the kernel's protocol
# itself (proto.c); links no FUSE library.
MODULES += fsrv
fsrv_SRCS := fsrv/node.c fsrv/ops.c fsrv/proto.c fsrv/server.c fsrv/pool.c fsrv/mount.c fsrv/passthrough.c
fsrv_LIBS := fsrv common

# The integration test's server (tests/integration/70-fsrv.sh) and the
# speed comparison (bench/fsrv.sh).  Built by `make check`; not installed.
# The rules below must not become make's default goal.
fsrv_saved_goal := $(.DEFAULT_GOAL)
$(B)/fsrv/fsrv-serve: $(B)/tests/integration/fsrv_serve.o $(B)/libfsrv.a $(B)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(ALL_LIBS)
check: $(B)/fsrv/fsrv-serve
.DEFAULT_GOAL := $(fsrv_saved_goal)
