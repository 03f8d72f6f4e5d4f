/* `xidlelock idle` must start about as fast as xprintidle, and it runs in shell
 * loops and status bars. The Swift runtime finds argv on Linux with a global
 * constructor (ArgvGrabber, in libswiftCore's CommandLine.cpp) that reads and
 * sscanf()s all of /proc/self/maps at every start: about 0.2 M instructions, an
 * eighth of the whole run. glibc hands argc and argv to every constructor of the
 * executable (.init_array), so they are kept here, and the runtime's accessor is
 * defined here as well: the static link then resolves the standard library's
 * reference to this definition and never pulls CommandLine.cpp.o (or its
 * constructor) out of libswiftCore.a. Were the member pulled for another reason,
 * the link would fail on the duplicate definition: never a silent second copy.
 * Debug builds load libswiftCore.so, whose own accessor they use; this is then
 * unused. */
#include "cstartup.h"

static int saved_argc;
static char **saved_argv;
static char *no_arguments[] = {0};

static void keep_arguments(int argc, char **argv, char **envp) {
    (void)envp;
    saved_argc = argc;
    saved_argv = argv;
}

__attribute__((section(".init_array"), used))
static void (*const keep_arguments_at_start)(int, char **, char **) = keep_arguments;

/* The runtime's declaration: SWIFT_CC(swift) char **(int *outArgLen). */
__attribute__((swiftcall, visibility("hidden")))
char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (!saved_argv) {
        *outArgLen = 0;
        return no_arguments;
    }
    *outArgLen = saved_argc;
    return saved_argv;
}

void xil_startup_linked(void) {}

char **xil_startup_arguments(int *argc) {
    *argc = saved_argv ? saved_argc : 0;
    return saved_argv ? saved_argv : no_arguments;
}
