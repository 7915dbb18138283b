MODULES += state
state_SRCS := state/state.c state/tokmap.c
state_LIBS := state caps wire common
