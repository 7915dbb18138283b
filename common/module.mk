MODULES += common
common_SRCS := common/common.c common/text.c common/resolve.c common/dl.c
common_LIBS := common
