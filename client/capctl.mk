# client/capctl.mk - capctl, the administrator's command line: main and the
# command table in capctl.c, the commands by group in capctl_*.c, the admin
# connection in client/admin.c (module admin).
PROGS += capctl
capctl_SRCS := client/capctl.c client/capctl_tok.c client/capctl_sbx.c client/capctl_watch.c \
	client/capctl_audit.c
capctl_LIBS := admin cli audit state caps wire common
MAN1 += docs/man/capctl.1
