MODULES += cluster
cluster_SRCS := cluster/cluster.c
cluster_LIBS := cluster caps wire common
