/*
 * A fiber's context and the switch between contexts (fiber.h): on x86-64 a few
 * instructions and no system call, elsewhere ucontext.
 */
#define _GNU_SOURCE
#include "fiber.h"

#include <stdint.h>
#include <string.h>

#ifdef BATON__FIBER_ASM

/* baton__fctx_switch(from, to): pushes the callee-saved registers and the two control
 * words on the running stack, saves the stack pointer in from->sp, loads to->sp and pops
 * the same from there; ret goes on where that context switched away (or, the first time,
 * into the entry a made context starts with). */
__asm__(".text\n"
        ".globl baton__fctx_switch\n"
        ".hidden baton__fctx_switch\n"
        ".type baton__fctx_switch,@function\n"
        ".p2align 4\n"
        "baton__fctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq (%rsi), %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size baton__fctx_switch, .-baton__fctx_switch\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");

int baton__fctx_make(baton__fctx *f, void *stack, size_t size, void (*entry)(void))
{
    if (!stack || size < 256)
        return -1;
    /* From the top, 16-aligned: a zero return address (entry never returns), entry's
     * address for ret, six zeroed registers, then the control words the thread starts with
     * (MXCSR 0x1F80: every exception masked, round to nearest; x87 0x037F: the same). After
     * ret, the stack pointer is 8 past a multiple of 16, as at any function's entry. */
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    uint64_t *p = (uint64_t *)top;
    *--p = 0;
    *--p = (uint64_t)(uintptr_t)entry;
    for (int i = 0; i < 6; i++)
        *--p = 0;
    uint32_t words[2] = {0x1F80, 0x037F};
    --p;
    memcpy(p, words, sizeof words);
    f->sp = p;
    return 0;
}

#else /* ucontext */

/* getcontext() returns twice, so it gets a frame of its own (no local can be clobbered). */
static __attribute__((noinline)) int context_init(ucontext_t *ctx)
{
    return getcontext(ctx);
}

int baton__fctx_make(baton__fctx *f, void *stack, size_t size, void (*entry)(void))
{
    if (context_init(&f->uc) != 0)
        return -1;
    f->uc.uc_stack.ss_sp = stack;
    f->uc.uc_stack.ss_size = size;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, entry, 0);
    return 0;
}

void baton__fctx_switch(baton__fctx *from, baton__fctx *to)
{
    swapcontext(&from->uc, &to->uc);
}

#endif
