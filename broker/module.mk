MODULES += broker
broker_SRCS := broker/loop.c broker/tokens.c broker/ops_fs.c broker/ops_net.c \
	broker/ops_proc.c broker/ops_tok.c broker/admin.c broker/hostaddr.c \
	broker/budget.c
broker_LIBS := broker sandbox policy audit state caps wire common
PROGS += capbroker
MAN1 += docs/man/capbroker.1
capbroker_SRCS := broker/main.c
capbroker_LIBS := broker sandbox policy audit state caps wire common
