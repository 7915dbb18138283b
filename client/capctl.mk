# client/capctl.mk - capctl, the administrator's command line (the lead's
# Makefile includes */module.mk; add `include client/capctl.mk`).
PROGS += capctl
capctl_SRCS := client/capctl.c
capctl_LIBS := cli caps wire common audit state
MAN1 += docs/man/capctl.1
