MODULES += common
common_SRCS := common/common.c
common_LIBS := common
