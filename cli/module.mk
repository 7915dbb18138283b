# cli/ - what capcall and capctl share: the one JSON writer (jansson).
MODULES += cli
cli_SRCS := cli/json.c
cli_LIBS := cli common
