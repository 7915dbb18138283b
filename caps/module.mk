MODULES += caps
caps_SRCS := caps/cap.c caps/key.c caps/token.c
caps_LIBS := caps wire common
