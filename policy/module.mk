MODULES += policy
policy_SRCS := policy/policy.c policy/load.c policy/print.c policy/net.c policy/default.c policy/cmd.c
policy_LIBS := policy sandbox caps wire common
