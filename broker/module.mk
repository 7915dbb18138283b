MODULES += broker
broker_SRCS := broker/broker.c broker/sbx.c broker/chan.c broker/dispatch.c \
	broker/work.c broker/approval.c broker/tokens.c broker/ops_fs.c broker/ops_net.c \
	broker/ops_proc.c broker/ops_tok.c broker/admin.c broker/hostaddr.c \
	broker/budget.c broker/commit.c broker/notify.c broker/hosts.c broker/dns.c broker/fs_served.c \
	broker/pool.c broker/fleet.c broker/reap.c
broker_LIBS := broker fsrv policy sandbox audit state cluster caps wire common
PROGS += capbroker
MAN1 += docs/man/capbroker.1
capbroker_SRCS := broker/main.c broker/service.c
capbroker_LIBS := admin broker fsrv policy sandbox audit state cluster caps wire common
# libsystemd (sd_notify, sd_listen_fds, the journal) only for the program,
# and loaded by service.c when `serve` needs it (dlopen), not linked: not for
# the broker module, nor for anything that runs in a sandbox, nor for the
# start of every `capbroker run`.  Its headers give the prototypes.
$(B)/broker/service.o: ALL_CFLAGS += $(SYSTEMD_CFLAGS)
