/* stack.c: rdma-core's libraries running over this one's objects are refused, with how to start the program */
#ifndef PAGEWIRE_VERBS_STACK_H
#define PAGEWIRE_VERBS_STACK_H

#include "pw.h"

void pw_refuse_mixed_stack(const char *what);

#endif
