MODULES += common
common_SRCS := common/common.c common/text.c
common_LIBS := common
