/*
 * Private to baton, core-only: a fiber's execution context and the switch between two
 * contexts on one thread (fiber.c), for the asynchronous engine (async.c).
 *
 * glibc's swapcontext() saves and restores the signal mask with a system call at every
 * switch: an operation switches about four times, and on a virtual machine those calls
 * were an eighth of the engine thread's time. A fiber never changes its signal mask, so on
 * x86-64 the switch saves only what the calling convention says a callee keeps (six
 * registers, the SSE control word and the x87 control word) and moves the stack pointer.
 * Elsewhere it is swapcontext(), as before. Sanitizers and valgrind are told of each switch
 * by the caller (async.c), whichever form runs.
 */
#ifndef BATON_CORE_FIBER_H
#define BATON_CORE_FIBER_H

#include <stddef.h>

/* Not under -fcf-protection (__CET__): a shadow stack would refuse the switch's ret, and
 * glibc's swapcontext knows how to move it. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(__CET__)
#define BATON__FIBER_ASM 1
#else
#include <ucontext.h>
#endif

typedef struct baton__fctx {
#ifdef BATON__FIBER_ASM
    void *sp; /* the saved stack pointer; the registers are on that stack */
#else
    ucontext_t uc;
#endif
} baton__fctx;

/* Makes f a context that runs entry() on the stack [stack, stack + size) when it is first
 * switched to. entry must never return (it switches away for good instead). Returns 0, or
 * -1 when the context could not be made. A thread's own context needs no making: the first
 * switch away from it saves it. */
int baton__fctx_make(baton__fctx *f, void *stack, size_t size, void (*entry)(void));

/* Saves the running context in from and runs to, until something switches back to from. */
void baton__fctx_switch(baton__fctx *from, baton__fctx *to);

#endif /* BATON_CORE_FIBER_H */
